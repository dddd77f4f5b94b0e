"""The tail labels' own memory weights (cdgt_keras/tail_memory.py, `tail_memory="own"`): the validation figures
the search reads against independent computations, the search against a brute force, the guard on P@5, and the
model's answer with the tail's weights, saved and loaded."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from memory_models import settled_model

from cdgt_keras.config import CDGTConfig
from cdgt_keras.metrics import precision_at_k, rare_f1
from cdgt_keras.tail_memory import TailView, blend_all, tune_tail, tune_tail_fold_mean
from cdgt_keras.thresholds import apply_thresholds, tune_thresholds

RULE = {"mode": "shrunk", "prior_positives": 10.0}


def _validation(seed: int = 0, n: int = 60, labels: int = 12):
    """The model's own scores, two layers' scores and labels; the last four labels are the tail, and the second
    layer knows them (it scores their positives high)."""
    rng = np.random.default_rng(seed)
    truth = (rng.random((n, labels)) < np.linspace(0.5, 0.05, labels)).astype(np.float32)
    bare = np.clip(0.6 * truth + rng.normal(0.2, 0.25, truth.shape), 0.001, 0.999)
    bare[:, -4:] = rng.random((n, 4)) * 0.3  # the model does not know the tail
    votes = rng.random(truth.shape) * 0.5
    knows = np.clip(0.8 * truth + rng.normal(0.0, 0.2, truth.shape), 0.0, 1.0)
    return bare, [votes, knows], sp.csr_matrix(truth), np.arange(labels - 4, labels)


def _chunks(bare, parts, truth, rows=25):
    return lambda: [(bare[i:i + rows], [p[i:i + rows] for p in parts], truth[i:i + rows])
                    for i in range(0, bare.shape[0], rows)]


def _full(bare, parts, shared, tail, tail_weights):
    """Every column with the shared weights, the tail's with its own: what the model answers."""
    full = blend_all(bare, parts, shared)
    full[:, tail] = blend_all(bare, parts, tail_weights)[:, tail]
    return full


def _tail_macro(truth, decisions, tail):
    """The mean of the tail labels' F1 (0 for a label with neither positives nor decisions), by numpy."""
    y, d = truth.toarray()[:, tail] != 0, np.asarray(decisions)[:, tail] != 0
    tp, denom = (y & d).sum(axis=0), y.sum(axis=0) + d.sum(axis=0)
    return float(np.mean([2 * t / n if n else 0.0 for t, n in zip(tp, denom)]))


def test_the_views_figures_equal_independent_computations():
    bare, parts, truth, tail = _validation()
    shared = [0.3, 0.1]
    view = TailView.of(_chunks(bare, parts, truth), shared, tail)
    for tail_weights in ([0.0, 0.0], [0.3, 0.1], [0.0, 0.7], [0.5, 0.9]):
        full = _full(bare, parts, shared, tail, tail_weights)
        scores = view.scores(tail_weights)
        np.testing.assert_array_equal(scores, full[:, tail])
        for k in (1, 3, 5):
            assert view.precision(scores, k) == pytest.approx(precision_at_k(truth, full, k), abs=1e-12)
        decisions = apply_thresholds(full, tune_thresholds(full, truth, **RULE))
        assert view.rare_f1(scores, RULE) == pytest.approx(rare_f1(truth, decisions, tail), abs=1e-12)
        assert view.tail_macro_f1(scores, RULE) == pytest.approx(_tail_macro(truth, decisions, tail), abs=1e-12)


@pytest.mark.parametrize("folds", [2, 3])
def test_cross_fitted_rare_f1_equals_each_folds_decisions_at_the_other_folds_thresholds(folds):
    """`folds` > 1: row i is in fold i mod folds (across chunks of 25 rows), and each fold's decisions are made at
    the thresholds tuned on every other row; Rare-F1 over the stacked decisions."""
    bare, parts, truth, tail = _validation(seed=4)
    shared = [0.3, 0.1]
    view = TailView.of(_chunks(bare, parts, truth), shared, tail, folds=folds)
    fold = np.arange(bare.shape[0]) % folds
    for tail_weights in ([0.0, 0.0], [0.0, 0.7], [0.5, 0.9]):
        full = _full(bare, parts, shared, tail, tail_weights)
        decisions = np.zeros(full.shape, np.uint8)
        for f in range(folds):
            taus = tune_thresholds(full[fold != f], truth[fold != f], **RULE)
            decisions[fold == f] = apply_thresholds(full[fold == f], taus)
        want = rare_f1(truth, decisions, tail)
        assert view.rare_f1(view.scores(tail_weights), RULE) == pytest.approx(want, abs=1e-12)
        assert view.tail_macro_f1(view.scores(tail_weights), RULE) == pytest.approx(
            _tail_macro(truth, decisions, tail), abs=1e-12)
    in_sample = TailView.of(_chunks(bare, parts, truth), shared, tail)
    scores = in_sample.scores([0.0, 0.0])  # the model alone: its tail's thresholds fit in-sample, not across folds
    assert in_sample.rare_f1(scores, RULE) > view.rare_f1(scores, RULE)


def test_a_view_without_a_fold_gives_the_figures_of_the_other_rows():
    bare, parts, truth, tail = _validation(seed=5)
    shared, folds = [0.3, 0.1], 3
    view = TailView.of(_chunks(bare, parts, truth), shared, tail, folds=folds)
    for f in range(folds):
        keep = np.arange(bare.shape[0]) % folds != f
        alone = TailView.of(_chunks(bare[keep], [p[keep] for p in parts], truth[keep]), shared, tail)
        part = view.without(f)
        for tail_weights in ([0.0, 0.0], [0.5, 0.9]):
            scores = part.scores(tail_weights)
            np.testing.assert_array_equal(scores, alone.scores(tail_weights))
            assert part.precisions(scores) == alone.precisions(scores)
            assert part.rare_f1(scores, RULE) == alone.rare_f1(scores, RULE)


def test_the_fold_mean_is_the_mean_of_each_folds_pick_and_keeps_the_guard():
    bare, parts, truth, tail = _validation(seed=1)
    shared, grids, slack, folds = [0.2, 0.0], [(0.0, 0.3, 0.6, 0.9), (0.0, 0.5, 1.0)], 0.01, 3
    view = TailView.of(_chunks(bare, parts, truth), shared, tail, folds=folds)
    picks = [tune_tail(view.without(f), grids, RULE, slack, shared).weights or shared for f in range(folds)]
    choice = tune_tail_fold_mean(view, grids, RULE, slack, shared)
    assert choice.weights == pytest.approx(np.mean(picks, axis=0).tolist())
    assert all(choice.precision[k] >= choice.shared_precision[k] - slack for k in (1, 5))
    with pytest.raises(ValueError, match="2 folds"):
        tune_tail_fold_mean(TailView.of(_chunks(bare, parts, truth), shared, tail), grids, RULE, slack, shared)


def test_the_search_picks_the_best_rare_f1_coordinate_by_coordinate_within_the_guard():
    bare, parts, truth, tail = _validation(seed=1)
    shared, grids, slack = [0.2, 0.0], [(0.0, 0.3, 0.6, 0.9), (0.0, 0.5, 1.0)], 0.01
    view = TailView.of(_chunks(bare, parts, truth), shared, tail)
    choice = tune_tail(view, grids, RULE, slack, shared)

    def figures(weights):
        full = _full(bare, parts, shared, tail, weights)
        return [precision_at_k(truth, full, k) for k in (1, 5)], rare_f1(truth, apply_thresholds(
            full, tune_thresholds(full, truth, **RULE)), tail)

    base_p, base_f1 = figures(shared)
    weights = [0.0, 0.0]  # by hand: the same coordinate search over the independent figures
    for i, grid in enumerate(grids):
        allowed = []
        for w in grid:
            p, f1 = figures([*weights[:i], w, *weights[i + 1:]])
            if all(a >= b - slack for a, b in zip(p, base_p)):
                allowed.append((f1, -w))
        weights[i] = -max(allowed)[1] if allowed else weights[i]
    assert choice.weights == weights and choice.weights is not None
    assert choice.rare_f1 > base_f1 == pytest.approx(choice.shared_rare_f1)
    assert all(choice.precision[k] >= choice.shared_precision[k] - slack for k in (1, 5))
    assert choice.weights[1] > 0.0  # the layer that knows the tail gets a share


def test_the_shared_weights_stay_when_the_tail_gains_nothing_or_p_at_5_would_fall():
    bare, parts, truth, tail = _validation(seed=2)
    useless = [np.zeros_like(bare), np.zeros_like(bare)]  # no layer knows anything: nothing to gain
    view = TailView.of(_chunks(bare, useless, truth), [0.0, 0.0], tail)
    assert tune_tail(view, [(0.0, 0.5)] * 2, RULE, 0.0).weights is None
    # the tail's positives all at the top: any share lifts the tail above the head's positives in the top 5
    view = TailView.of(_chunks(bare, [parts[0], np.where(np.arange(12) >= 8, 1.0, 0.0) * np.ones_like(bare)], truth),
                       [0.0, 0.0], tail)
    choice = tune_tail(view, [(0.0,), (0.0, 0.5, 1.0)], RULE, 0.0)
    for w in (0.5, 1.0):
        assert view.precision(view.scores([0.0, w]), 5) < choice.shared_precision[5]  # what the guard refuses
    assert choice.weights is None or choice.weights[1] == 0.0


def test_what_the_search_returns_is_allowed_and_at_most_the_exhaustive_best():
    """The search is greedy, not exhaustive: what it returns is on the grid, within the guard, better than the
    shared weights on validation Rare-F1, and no better than the best of every allowed combination."""
    bare, parts, truth, tail = _validation(seed=3)
    shared, grid, slack = [0.1, 0.2], (0.0, 0.4, 0.8), 0.005
    view = TailView.of(_chunks(bare, parts, truth), shared, tail)
    choice = tune_tail(view, [grid, grid], RULE, slack, shared)
    base = choice.shared_precision
    allowed = [list(w) for w in itertools.product(grid, grid)
               if all(p >= base[k] - slack for k, p in view.precisions(view.scores(list(w))).items())]
    assert choice.weights in allowed
    assert choice.rare_f1 == view.rare_f1(view.scores(choice.weights), RULE) > choice.shared_rare_f1
    assert choice.rare_f1 <= max(view.rare_f1(view.scores(w), RULE) for w in allowed)


def test_a_model_answers_with_the_tails_own_weights_after_settling_saved_and_loaded(tmp_path):
    import keras

    from cdgt_keras.inputs import to_sparse_tensor

    config = CDGTConfig(n_players=2, encoder_hidden=(8,), head_hidden=(), neighbours=5, neighbour_space="both",
                        centroid_features=10, tail_memory="own", tail_memory_slack=1.0, tail_fraction=0.3)
    model, x, _ = settled_model(config)
    layers = [model.neighbours, model.encoder_neighbours, model.centroids]
    tail = np.flatnonzero(model.tail_mask.numpy())
    assert tail.tolist() == [7, 8, 9]  # the rarest 30 %
    choice = model.tail_choice
    # the layers carry what the search chose (-1: the shared weights stayed; which wins depends on the untrained
    # model's answer, so this test checks the wiring and the tests above check the search)
    assert [float(layer.tail_weight.numpy()) for layer in layers] == pytest.approx(choice.weights or [-1.0] * 3)
    if choice.weights is not None:
        assert choice.rare_f1 > choice.shared_rare_f1
    shared = [float(layer.weight.numpy()) for layer in layers]
    tail_weights = [0.9 if w < 0.5 else 0.0 for w in shared]  # set by hand, each unlike its shared weight
    # by hand: the model's own answer and each layer's scores, blended per column
    for layer in layers:
        layer.weight.assign(0.0)
        layer.tail_weight.assign(-1.0)
    q = to_sparse_tensor(x[:12])
    own = np.asarray(model(q))
    encoded = model.shared_encoder(q, training=False)
    parts = [model.neighbours(q).numpy(), model.encoder_neighbours(encoded).numpy(), model.centroids(q).numpy()]
    want = _full(own, parts, shared, tail, tail_weights)
    for layer, w, tail_w in zip(layers, shared, tail_weights):
        layer.weight.assign(w)
        layer.tail_weight.assign(tail_w)
    np.testing.assert_allclose(np.asarray(model(q)), want, atol=1e-5)
    path = str(tmp_path / "m.keras")
    model.save(path)
    np.testing.assert_allclose(np.asarray(keras.saving.load_model(path)(q)), want, atol=1e-5)


def test_tail_memory_options_are_checked():
    with pytest.raises(ValueError, match="tail_memory"):
        CDGTConfig(tail_memory="mine")
    with pytest.raises(ValueError, match="tail_memory_slack"):
        CDGTConfig(tail_memory_slack=-0.1)
    with pytest.raises(ValueError, match="tail_memory_folds"):
        CDGTConfig(tail_memory_folds=0)
    with pytest.raises(ValueError, match="tail_memory_folds"):
        CDGTConfig(tail_memory_pick="fold_mean")
    with pytest.raises(ValueError, match="tail_memory_pick"):
        CDGTConfig(tail_memory_pick="best")
    with pytest.raises(ValueError, match="folds"):
        TailView.of(lambda: [], [0.0], tail=np.array([0]), folds=0)
