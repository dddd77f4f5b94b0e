"""The tail's decisions apart from its ranking (`tail_decisions="own"`): the model's two answers against a blend by
hand (saved and loaded), what `settle` picks for them, and the evaluation reading its F1 from the decisions'
scores and its ranking metrics from the ranking's, on the dense and the chunked road."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from memory_models import settled_model

from cdgt_keras.chunked_eval import array_chunks, chunked_report
from cdgt_keras.config import CDGTConfig
from cdgt_keras.data import MultiLabelData
from cdgt_keras.evaluation import evaluate_chunks, evaluate_probs, label_groups
from cdgt_keras.inputs import to_sparse_tensor
from cdgt_keras.metrics import report
from cdgt_keras.tail_memory import TailView, blend_all, tune_tail
from cdgt_keras.thresholds import apply_thresholds, tuned_thresholds


def _settled_model(tail_memory: str = "own", metric: str = "macro_f1", shortlist: int = 0):
    """The small model of memory_models, with votes in both spaces and centroids, settled with
    tail_decisions="own"."""
    config = CDGTConfig(n_players=2, encoder_hidden=(8,), head_hidden=(), neighbours=5, neighbour_space="both",
                        centroid_features=10, tail_memory=tail_memory, tail_memory_slack=0.0, tail_fraction=0.3,
                        tail_decisions="own", tail_decisions_metric=metric, shortlist=shortlist)
    model, x, _ = settled_model(config)
    return model, x, [model.neighbours, model.encoder_neighbours, model.centroids]


@pytest.mark.parametrize("tail_memory,metric", [("own", "rare_f1"), ("shared", "rare_f1"), ("own", "macro_f1")])
def test_settle_gives_the_decisions_weights_of_their_own_against_the_rankings(tail_memory, metric):
    model, _, layers = _settled_model(tail_memory, metric)
    ranking, decided = getattr(model, "tail_choice", None), model.decision_choice
    assert (ranking is None) == (tail_memory == "shared")
    assert decided.metric == metric
    # the layers carry what the decisions' search chose (-1: the ranking's stayed)
    assert [float(layer.decision_weight.numpy()) for layer in layers] == pytest.approx(
        decided.weights or [-1.0] * 3)
    assert model.decides_apart() == (decided.weights is not None)
    # its bar is the ranking's tail weights (the tail's own where they were kept), and it keeps only a better pick
    if ranking is not None and metric == "rare_f1":
        assert decided.shared_rare_f1 == pytest.approx(ranking.rare_f1 if ranking.weights else ranking.shared_rare_f1)
    if decided.weights is not None:
        assert decided.rare_f1 > decided.shared_rare_f1


def test_without_the_guard_the_search_keeps_what_the_guard_held_back():
    """Four rows, label 2 the tail: its votes at 0.5 lift the tail's F1 but put a negative first on one row."""
    bare = np.array([[0.0, 0.2, 0.6], [0.3, 0.2, 0.8], [0.5, 0.6, 0.8], [0.2, 0.1, 0.7]])
    votes = np.array([[0.8, 0.5, 0.8], [0.4, 0.7, 0.5], [0.3, 0.7, 0.1], [0.5, 0.7, 0.7]])
    truth = sp.csr_matrix([[1, 0, 1], [0, 0, 1], [0, 0, 1], [0, 0, 0]])
    view = TailView.of(lambda: [(bare, [votes], truth)], [0.0], tail=np.array([2]), k=1)
    grid, rule = [(0.0, 0.5, 1.0)], {"mode": "global"}
    assert tune_tail(view, grid, rule, slack=0.0, metric="macro_f1").weights is None
    free = tune_tail(view, grid, rule, slack=1.0, metric="macro_f1")  # settle's search for the decisions
    assert free.weights == [0.5] and free.metric == "macro_f1"
    # the tail's F1: its 3 positives found in 4 decisions, against 2 of them in 2
    assert free.rare_f1 == pytest.approx(6 / 7) and free.shared_rare_f1 == pytest.approx(0.8)
    assert free.precision[1] == 0.5 < free.shared_precision[1] == 0.75


def test_the_model_ranks_with_the_tails_weights_and_decides_with_its_own_saved_and_loaded(tmp_path):
    import keras

    model, x, layers = _settled_model()
    tail = np.flatnonzero(model.tail_mask.numpy())
    assert tail.tolist() == [7, 8, 9]
    shared, ranking, deciding = [0.2, 0.1, 0.3], [0.0, 0.6, -1.0], [0.9, -1.0, 0.5]
    q = to_sparse_tensor(x[:12])
    for layer in layers:
        layer.weight.assign(0.0)
        layer.tail_weight.assign(-1.0)
        layer.decision_weight.assign(-1.0)
    assert not model.decides_apart()
    own = np.asarray(model(q))
    encoded = model.shared_encoder(q, training=False)
    parts = [model.neighbours(q).numpy(), model.encoder_neighbours(encoded).numpy(), model.centroids(q).numpy()]

    def by_hand(tail_weights):
        """Every label blended with the shared weights, the tail's columns with `tail_weights` (-1: shared)."""
        full = blend_all(own, parts, shared)
        mine = [s if t < 0 else t for s, t in zip(shared, tail_weights)]
        full[:, tail] = blend_all(own, parts, mine)[:, tail]
        return full

    for layer, w, r, d in zip(layers, shared, ranking, deciding):
        layer.weight.assign(w)
        layer.tail_weight.assign(r)
        layer.decision_weight.assign(d)
    assert model.decides_apart()
    ranked = by_hand(ranking)
    # the decisions: a layer's own decision weight, else the ranking's tail weight, else the shared one
    decided = by_hand([0.9, 0.6, 0.5])
    assert not np.allclose(ranked[:, tail], decided[:, tail])
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.decides_apart()
    for m in (model, loaded):
        np.testing.assert_allclose(np.asarray(m(q)), ranked, atol=1e-5)
        np.testing.assert_allclose(np.asarray(m(q, deciding=True)), decided, atol=1e-5)
        # both answers from one pass: the same values as the two calls
        both = m.answers(q)
        np.testing.assert_array_equal(np.asarray(both[0]), np.asarray(m(q)))
        np.testing.assert_array_equal(np.asarray(both[1]), np.asarray(m(q, deciding=True)))


def test_a_model_without_the_option_has_no_decision_weights():
    from cdgt_keras.learning import build_trainable
    from cdgt_keras.neighbours import MemoryShape

    x = sp.random(20, 10, density=0.3, format="csr", random_state=0)
    y = sp.csr_matrix(np.eye(20, 4, dtype=np.float32))
    config = CDGTConfig(n_players=1, encoder_hidden=(4,), head_hidden=(), neighbours=3, centroid_features=5)
    model = build_trainable(config, np.full(4, 0.25), MemoryShape.for_config(config, x, y))
    assert model.neighbours.decision_weight is None and model.centroids.decision_weight is None
    assert not model.decides_apart()
    model.neighbours.remember(x, y)
    ranked, decided = model.answers(to_sparse_tensor(x))
    assert ranked is decided


@pytest.mark.parametrize("shortlist", [0, 4])
def test_the_evaluation_predicts_both_answers_in_one_pass(shortlist, monkeypatch):
    """`evaluate_model` (dense and chunked) gives the figures of the two answers predicted apart, and the
    chunked road predicts each chunk once for ranking and decisions read together (`chunked_report`'s order)."""
    import cdgt_keras.inputs as inputs
    from cdgt_keras.evaluation import answer_chunks, evaluate_model, predict_answers

    model, x, _ = _settled_model(shortlist=shortlist)
    assert model.shortlisted() == bool(shortlist)
    for layer in (model.neighbours, model.encoder_neighbours, model.centroids):
        layer.weight.assign(0.3)
        layer.tail_weight.assign(0.0)
        layer.decision_weight.assign(0.8)
    assert model.decides_apart()
    q = to_sparse_tensor(x)
    ranked, decided = np.asarray(model(q)), np.asarray(model(q, deciding=True))
    tail = np.flatnonzero(model.tail_mask.numpy())
    assert not np.allclose(ranked[:, tail], decided[:, tail])
    split = _data_split(x)
    got = predict_answers(model, split, 16)
    np.testing.assert_allclose(got[0], ranked, atol=1e-6)
    np.testing.assert_allclose(got[1], decided, atol=1e-6)
    counts, n = np.asarray(split.labels.sum(0)).ravel(), split.num_examples
    config = model.cdgt_config
    want = evaluate_probs(ranked, split, ranked, split, counts, n, config, decided, decided)
    for chunked in (False, True):
        result = evaluate_model(model, split, split, counts, n, config, chunked=chunked)
        np.testing.assert_allclose(result.thresholds, want.thresholds)
        _same(result.report, want.report)
    passes = []
    scorer = inputs.batch_scorer

    def counted(fn):
        score = scorer(fn)
        return lambda features, batch_size: passes.append(features.shape[0]) or score(features, batch_size)

    monkeypatch.setattr(inputs, "batch_scorer", counted)
    ranking, deciding = answer_chunks(model, split, 16, rows=32)
    for r, d in zip(ranking(), deciding()):  # read together: one pass of 80 rows
        assert r.shape == d.shape
    assert passes == [32, 32, 16]
    assert sum(c.shape[0] for c in deciding()) == 80  # read alone: predicted
    assert passes == [32, 32, 16] * 2
    made = []
    monkeypatch.setattr(inputs, "batch_scorer", lambda fn: made.append(fn) or scorer(fn))
    for chunked in (False, True):  # validation and test share one scorer, traced once
        evaluate_model(model, split, split, counts, n, config, chunked=chunked)
    assert len(made) == 2


def _data_split(x):
    rng = np.random.default_rng(5)
    y = (rng.random((x.shape[0], 10)) < np.linspace(0.5, 0.1, 10)).astype(np.float32)
    y[0] = 1.0
    return MultiLabelData(x, sp.csr_matrix(y), [])


def _split(seed, n, labels=8):
    rng = np.random.default_rng(seed)
    truth = (rng.random((n, labels)) < np.linspace(0.5, 0.1, labels)).astype(np.float32)
    truth[0] = 1.0  # every label has a positive
    scores = np.clip(0.5 * truth + rng.normal(0.2, 0.25, truth.shape), 0.0, 1.0)
    deciding = scores.copy()
    deciding[:, -3:] = np.clip(0.7 * truth[:, -3:] + rng.normal(0.1, 0.2, (n, 3)), 0.0, 1.0)
    return MultiLabelData(sp.csr_matrix((n, 1)), sp.csr_matrix(truth), []), scores, deciding


def _same(got, want):
    assert got.keys() == want.keys()
    for group in want:
        assert got[group] == pytest.approx(want[group], nan_ok=True), group


def test_the_evaluation_reads_f1_from_the_decisions_scores_and_ranks_by_the_ranking():
    config = CDGTConfig(thresholds="per_label", tail_fraction=0.3)
    (val, val_s, val_d), (test, test_s, test_d) = _split(0, 90), _split(1, 70)
    counts, n = np.asarray(val.labels.sum(0)).ravel(), 90
    head, tail, props = label_groups(counts, n, config)
    taus = tuned_thresholds(val_d, val.labels, config)
    want = report(test.labels, test_s, apply_thresholds(test_d, taus), head_labels=head, tail_labels=tail,
                  propensities=props)
    got = evaluate_probs(val_s, val, test_s, test, counts, n, config, val_d, test_d)
    np.testing.assert_allclose(got.thresholds, taus)
    _same(got.report, want)
    ranking_alone = evaluate_probs(val_s, val, test_s, test, counts, n, config)
    assert got.report["overall"]["p_at_1"] == ranking_alone.report["overall"]["p_at_1"]
    assert got.report["overall"]["macro_f1"] != ranking_alone.report["overall"]["macro_f1"]
    chunked = evaluate_chunks(array_chunks(val_s, rows=16), val, array_chunks(test_s, rows=16), test, counts, n,
                              config, array_chunks(val_d, rows=16), array_chunks(test_d, rows=16))
    np.testing.assert_allclose(chunked.thresholds, taus)
    _same(chunked.report, want)


def test_decision_scores_must_come_for_both_splits_and_follow_the_score_chunks():
    config = CDGTConfig(thresholds="per_label")
    (val, val_s, val_d), (test, test_s, _) = _split(0, 40), _split(1, 30)
    counts = np.asarray(val.labels.sum(0)).ravel()
    with pytest.raises(ValueError, match="both validation and test"):
        evaluate_probs(val_s, val, test_s, test, counts, 40, config, val_d, None)
    with pytest.raises(ValueError, match="do not follow"):
        chunked_report(test.labels, array_chunks(test_s, rows=10), np.full(8, 0.5), head_labels=[0],
                       tail_labels=[7], decision_chunks=array_chunks(test_s, rows=7))
    with pytest.raises(ValueError, match="more rows"):
        chunked_report(test.labels, array_chunks(test_s, rows=10), np.full(8, 0.5), head_labels=[0],
                       tail_labels=[7], decision_chunks=array_chunks(np.vstack([test_s, test_s[:5]]), rows=10))


def test_tail_decisions_is_checked():
    with pytest.raises(ValueError, match="tail_decisions"):
        CDGTConfig(tail_decisions="mine")
    with pytest.raises(ValueError, match="tail_decisions_metric"):
        CDGTConfig(tail_decisions_metric="p_at_5")
