"""The propensity re-ranking (config `rerank_slack`): its TensorFlow and numpy forms agree, the first label stays
first, the exponent's pick against P@k and PSP@k computed by cdgt_keras.metrics, and a settled model that ranks
re-ranked and decides on its plain scores, saved and loaded and exported."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from memory_models import settled_model

from cdgt_keras.config import CDGTConfig
from cdgt_keras.inputs import to_sparse_tensor
from cdgt_keras.metrics import precision_at_k, propensities, psp_at_k
from cdgt_keras.reranking import pick_exponent, rerank_log_weights, reranked, reranked_np


def _scores(seed: int = 0, n: int = 50, labels: int = 12) -> tuple[np.ndarray, sp.csr_matrix, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = sp.csr_matrix((rng.random((n, labels)) < np.linspace(0.6, 0.05, labels)).astype(np.float32))
    scores = (0.3 * truth.toarray() + 0.7 * rng.random((n, labels))).astype(np.float32)  # a model that knows a bit
    props = propensities(np.asarray(truth.sum(0)).ravel() * 4, n * 4)
    return scores, truth, props


def test_tensorflow_and_numpy_rerank_alike_and_keep_the_first_label():
    import tensorflow as tf

    scores, _, props = _scores()
    log_w = rerank_log_weights(props)
    assert log_w.max() == 0.0 and np.all(log_w <= 0.0)
    for a in (0.0, 0.1, 0.5, 2.0):
        want = reranked_np(scores, log_w, a)
        got = reranked(tf.constant(scores), tf.constant(log_w.astype(np.float32)), tf.constant(a)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6)
        np.testing.assert_array_equal(np.argmax(got, 1), np.argmax(scores, 1))     # P@1 is the model's own
        assert np.all(got <= scores + 1e-7)
    np.testing.assert_array_equal(reranked(tf.constant(scores), tf.constant(log_w.astype(np.float32)),
                                           tf.constant(0.0)).numpy(), scores)      # 0: the scores, to the bit
    # the rest of the row is ordered by p x (p_min / propensity)^a
    a, row = 0.7, scores[3]
    factor = (props.min() / props) ** a
    rest = [label for label in np.argsort(-(row * factor)) if label != np.argmax(row)]
    assert np.argsort(-reranked_np(scores, log_w, a)[3])[1:].tolist() == rest


def test_the_pick_tables_p_at_k_and_psp_at_k_as_the_metrics_do_and_keeps_to_the_slack():
    scores, truth, props = _scores(1, n=200)
    log_w = rerank_log_weights(props)
    chunks = lambda: [(scores[:90], truth[:90]), (scores[90:], truth[90:])]  # noqa: E731
    grid = (0.05, 0.2, 0.5, 1.0, 2.0)
    _, table = pick_exponent(chunks, grid, slack=1.0, k=3, propensities=props)
    for a in (0.0, *grid):
        ranked = reranked_np(scores, log_w, a)
        assert table[a][0] == pytest.approx(precision_at_k(truth, ranked, 3))
        # PSP@k = weighted hits / the best ranking's (the same for every a): the table holds the numerator
        ratio = table[a][1] / table[0.0][1]
        assert ratio == pytest.approx(psp_at_k(truth, ranked, 3, props) / psp_at_k(truth, scores, 3, props))
    for slack in (0.0, 0.01, 0.05, 1.0):
        a, _ = pick_exponent(chunks, grid, slack=slack, k=3, propensities=props)
        allowed = [b for b in (0.0, *grid) if table[b][0] >= table[0.0][0] - slack - 1e-12]
        assert a in allowed and table[a][1] == max(table[b][1] for b in allowed)
    assert pick_exponent(chunks, grid, slack=1.0, k=3, propensities=props)[0] > 0.0
    # a ranking that cannot gain (every label equally rare) stays off
    assert pick_exponent(chunks, grid, slack=1.0, k=3, propensities=np.full(12, 0.5))[0] == 0.0


def _reranking_model(slack: float = 1.0):
    config = CDGTConfig(n_players=2, encoder_hidden=(8,), head_hidden=(), neighbours=5, tail_fraction=0.3,
                        rerank_slack=slack, rerank_exponents=(0.5, 1.0, 2.0))
    return settled_model(config)


def test_a_settled_model_ranks_re_ranked_and_decides_on_its_plain_scores_saved_and_loaded(tmp_path):
    import keras

    model, x, _ = _reranking_model()
    exponent = float(model.rerank_exponent.numpy())
    assert exponent in (0.5, 1.0, 2.0) and model.reranks() and model.decides_apart()
    assert set(model.rerank_tuning) == {0.0, 0.5, 1.0, 2.0}
    q = to_sparse_tensor(x[:20])
    plain = np.asarray(model(q, deciding=True))
    ranked, decided = (np.asarray(t) for t in model.answers(q))
    np.testing.assert_array_equal(decided, plain)
    props = propensities(model.label_freq * model.num_train, model.num_train)
    np.testing.assert_allclose(ranked, reranked_np(plain, rerank_log_weights(props), exponent), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(model(q)), ranked, rtol=1e-6)
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert float(loaded.rerank_exponent.numpy()) == exponent and loaded.decides_apart()
    np.testing.assert_allclose(np.asarray(loaded(q)), ranked, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(loaded(q, deciding=True)), plain, rtol=1e-6)


def test_settle_tunes_the_exponent_on_the_answers_the_model_gives():
    """settle picks the exponent on answers blended from the scores it holds: they are the model's own (every
    memory at its share, the tail's own weights, before any re-ranking), and the table the model's answers give."""
    from cdgt_keras.reranking import tune_reranking
    from cdgt_keras.settling import settled_answers

    config = CDGTConfig(n_players=2, encoder_hidden=(8,), head_hidden=(), neighbours=5, neighbour_space="both",
                        centroid_features=6, tail_fraction=0.3, tail_memory="own", tail_memory_slack=1.0,
                        rerank_slack=1.0, rerank_exponents=(0.5, 1.0, 2.0))
    model, x, y = settled_model(config)
    layers = [layer for layer, _ in model.memory_layers()]
    assert len(layers) == 3 and all(float(layer.weight.numpy()) > 0.0 for layer in layers)
    assert any(float(layer.tail_weight.numpy()) >= 0.0 for layer in layers)  # the tail's own shares are in play
    held, exponent = model.rerank_tuning, float(model.rerank_exponent.numpy())
    model.rerank_exponent.assign(0.0)
    asked = np.asarray(model(to_sparse_tensor(x)))
    own = np.asarray(model.fused_probs(to_sparse_tensor(x)))
    parts = [np.asarray(layer(to_sparse_tensor(x) if space == "input" else model.shared_encoder(to_sparse_tensor(x)))
                        ) for layer, space in model.memory_layers()]
    [(blended, labels)] = list(settled_answers(model, layers, lambda: [(own, parts, y)]))
    assert labels is y and not np.array_equal(blended, own)
    np.testing.assert_allclose(blended, asked, rtol=1e-6, atol=1e-7)
    assert tune_reranking(model, x, y, batch_size=16, rows=32) == held  # the model asked: the same table
    assert float(model.rerank_exponent.numpy()) == exponent


def test_without_a_slack_the_model_has_no_re_ranking_and_the_paper_preset_none():
    assert CDGTConfig.preset("paper").rerank_slack == 0.0
    model = settled_model(CDGTConfig(n_players=2, encoder_hidden=(8,), head_hidden=(), neighbours=5))[0]
    assert model.rerank_exponent is None and not model.reranks() and not model.decides_apart()
    with pytest.raises(ValueError, match="rerank_slack"):
        CDGTConfig(rerank_slack=-0.1)
    with pytest.raises(ValueError, match="rerank_exponents"):
        CDGTConfig(rerank_exponents=(0.0, 1.0))


def test_an_export_lists_the_re_ranked_top_k_and_decides_on_the_plain_scores(tmp_path):
    import tensorflow as tf

    from cdgt.serving.export import export_keras_model, read_metadata

    model, x, _ = _reranking_model()
    q = to_sparse_tensor(x[:6])
    ranked, plain = np.asarray(model(q)), np.asarray(model(q, deciding=True))
    assert not np.array_equal(np.argsort(-ranked, 1)[:, :5], np.argsort(-plain, 1)[:, :5])
    thresholds = np.full(10, 0.4, np.float32)
    path = export_keras_model(model, str(tmp_path / "export"), [f"l{i}" for i in range(10)], thresholds,
                              feature_kind="sparse", input_width=x.shape[1])
    assert read_metadata(path)["decisions_apart"] is True
    served = tf.saved_model.load(path)
    for i in range(6):
        row = x[i]
        out = served.signatures["predict"](feature_ids=tf.constant(row.indices[None].astype(np.int64)),
                                           feature_values=tf.constant(row.data[None].astype(np.float32)))
        np.testing.assert_allclose(out["scores"].numpy()[0], ranked[i], rtol=1e-5, atol=1e-7)
        np.testing.assert_array_equal(out["top_k_ids"].numpy()[0], np.argsort(-ranked[i], kind="stable")[:5])
        assert out["top_k_ids"].numpy()[0, 0] == np.argmax(plain[i])
        np.testing.assert_array_equal(out["decisions"].numpy()[0], (plain[i] > thresholds).astype(np.int32))
