"""The hits of a blend ranked among candidates equal the full ranking's (cdgt_keras.blend_hits), ties included."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from cdgt_keras import blend_hits as bh
from cdgt_keras.metrics import precision_at_k
from cdgt_keras.settling import tune_weight
from cdgt_keras.tail_memory import blend

GRID = (0.0, 0.1, 0.3, 0.5, 0.9, 1.0)


def full(scores: np.ndarray, extra: np.ndarray, truth: sp.csr_matrix, k: int) -> dict[float, int]:
    """What `precision_at_k` counts for each weight, ranked over every label."""
    n = scores.shape[0]
    return {w: round(n * k * precision_at_k(truth, blend(scores, extra, w), k)) for w in GRID}


def case(rng: np.random.Generator, n: int, labels: int, levels: int, density: float) -> tuple:
    scores = rng.random((n, labels)).astype(np.float32)
    if levels:  # few distinct values: ties everywhere, at the k-th place and in the blends
        scores = (np.round(scores * levels) / levels).astype(np.float32)
    extra = ((rng.random((n, labels)) < density) * np.round(rng.random((n, labels)) * 4) / 4).astype(np.float32)
    truth = sp.csr_matrix(rng.random((n, labels)) < 0.1)
    return scores, extra, truth


@pytest.mark.parametrize("levels", [0, 3, 50])
@pytest.mark.parametrize("density", [0.0, 0.02, 0.1])
def test_equals_the_full_ranking(levels: int, density: float) -> None:
    rng = np.random.default_rng(levels * 100 + int(density * 100))
    for _ in range(12):
        scores, extra, truth = case(rng, int(rng.integers(1, 30)), int(rng.integers(20, 120)), levels, density)
        k = int(rng.integers(1, 6))
        want = full(scores, extra, truth, k)
        assert bh.blend_hits(scores, sp.csr_matrix(extra), truth, GRID, k) == want
        assert bh.blend_hits(scores, extra, truth, GRID, k) == want


def test_rows_whose_candidates_do_not_decide_are_ranked_in_full(monkeypatch: pytest.MonkeyPatch) -> None:
    # row 0: every label ties and has no vote, so no candidate beats the ceiling; the full ranking takes the lowest
    # ids (labels 0-4), and only label 3 is a positive
    scores = np.full((2, 40), 0.5, np.float32)
    scores[1] = np.linspace(0.0, 1.0, 40)
    truth = sp.csr_matrix(([1, 1], ([0, 1], [3, 39])), shape=(2, 40))
    extra = np.zeros((2, 40), np.float32)
    extra[1, 0] = 1.0
    ranked_in_full = []
    real = bh._full_hits
    monkeypatch.setattr(bh, "_full_hits", lambda s, *a: ranked_in_full.append(s.shape[0]) or real(s, *a))
    got = bh.blend_hits(scores, sp.csr_matrix(extra), truth, GRID, k=5)
    assert got == full(scores, extra, truth, 5)
    assert got[0.0] == 2
    # row 0 alone, at every weight, but at w = 1, where only label 0's vote beats the labels without one (0) and
    # row 1 is ranked in full too
    assert ranked_in_full == [1] * (len(GRID) - 1) + [2]


def test_dense_memory_scores_take_their_own_top_labels_as_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    scores, _, truth = case(rng, 40, 300, 0, 0.0)
    extra = rng.random((40, 300)).astype(np.float32)  # no zeros: every label would be a vote's candidate
    extra[:, 7] = 2.0  # ... and one that beats everything, outside p's top labels
    ranked_in_full = []
    real = bh._full_hits
    monkeypatch.setattr(bh, "_full_hits", lambda s, *a: ranked_in_full.append(s.shape[0]) or real(s, *a))
    assert bh.blend_hits(scores, extra, truth, GRID, k=3) == full(scores, extra, truth, 3)
    assert sum(ranked_in_full) < 40 * len(GRID) // 2  # most rows decided among the candidates


def test_tune_weight_counts_sparse_and_dense_votes_alike() -> None:
    rng = np.random.default_rng(3)
    chunks = [case(rng, 25, 80, 20, 0.05) for _ in range(3)]
    dense = tune_weight(lambda: chunks, GRID)
    assert tune_weight(lambda: [(s, sp.csr_matrix(e), y) for s, e, y in chunks], GRID) == dense
    n = sum(s.shape[0] for s, _, _ in chunks)
    hits = {w: sum(round(s.shape[0] * 5 * precision_at_k(y, blend(s, e, w), 5)) for s, e, y in chunks)
            for w in GRID}
    assert dense[1] == {w: h / (5 * n) for w, h in hits.items()}


def weighted_full(scores: np.ndarray, extra: np.ndarray, truth: sp.csr_matrix, k: int,
                  weights: np.ndarray) -> dict[float, float]:
    """Each weight's top-k hits, each counted as its label's weight, by NumPy's full ranking (score descending,
    then the lower label id), independently of `cdgt_keras.metrics`."""
    dense = truth.toarray() > 0
    out = {}
    for w in GRID:
        b = blend(scores, extra, w)
        top = np.lexsort((np.broadcast_to(np.arange(b.shape[1]), b.shape), -b), axis=1)[:, :k]
        out[w] = float(sum(weights[label] for i, row in enumerate(top) for label in row if dense[i, label]))
    return out


@pytest.mark.parametrize("levels", [0, 3])
@pytest.mark.parametrize("density", [0.0, 0.1])
def test_weighted_hits_equal_the_full_rankings_weighted_sum(levels: int, density: float) -> None:
    """With label weights (1 / propensity: what the memories' PSP@k tuning counts) the candidates' sums are the
    full ranking's, ties included, on both the candidates' road and the full one."""
    rng = np.random.default_rng(7 + levels + int(density * 100))
    for _ in range(10):
        scores, extra, truth = case(rng, int(rng.integers(1, 30)), int(rng.integers(20, 120)), levels, density)
        k, weights = int(rng.integers(1, 6)), rng.uniform(1.0, 20.0, scores.shape[1])
        want = weighted_full(scores, extra, truth, k, weights)
        for v in (sp.csr_matrix(extra), extra):
            got = bh.blend_hits(scores, v, truth, GRID, k, label_weights=weights)
            assert got.keys() == want.keys()
            np.testing.assert_allclose([got[w] for w in GRID], [want[w] for w in GRID], rtol=1e-12)
        # unit weights count the hits
        ones = bh.blend_hits(scores, extra, truth, GRID, k, label_weights=np.ones(scores.shape[1]))
        plain = bh.blend_hits(scores, extra, truth, GRID, k)
        assert ones == {w: float(h) for w, h in plain.items()}
        # a column per weighting, from one ranking: the counts exactly, the weighted sums as the full ranking's
        for v in (sp.csr_matrix(extra), extra):
            both = bh.blend_hits(scores, v, truth, GRID, k, label_weights=np.column_stack([np.ones_like(weights),
                                                                                        weights]))
            assert [float(both[w][0]) for w in GRID] == [float(plain[w]) for w in GRID]
            np.testing.assert_allclose([both[w][1] for w in GRID], [want[w] for w in GRID], rtol=1e-12)


def test_tuning_on_psp_takes_the_weight_that_ranks_the_rare_label() -> None:
    """Two rows, label 0 frequent (weight 1), label 1 rare (weight 10); the votes name label 1. At w = 0 row 0's top
    label (0) is right, at w = 0.5 row 1's (1): P@1 ties (the smaller weight wins), PSP@1 takes 0.5."""
    p = np.array([[0.6, 0.4], [0.6, 0.4]], np.float32)
    v = np.array([[0.0, 1.0], [0.0, 1.0]], np.float32)
    truth = sp.csr_matrix([[1, 0], [0, 1]])
    assert tune_weight(lambda: [(p, v, truth)], (0.0, 0.5), k=1) == (0.0, {0.0: 0.5, 0.5: 0.5})
    best, table = tune_weight(lambda: [(p, v, truth)], (0.0, 0.5), k=1, label_weights=np.array([1.0, 10.0]))
    assert (best, table) == (0.5, {0.0: 0.5, 0.5: 5.0})


def test_tuning_on_p_then_psp_keeps_p_within_the_slack() -> None:
    """Three rows; label 0 frequent (weight 1), label 1 rare (weight 10). At w = 0 rows 0 and 2 rank label 0 first
    (2 hits of 3), at w = 0.5 the votes put label 1 first in every row (row 1's hit only: 1 of 3, but weighing 10).
    P@1 alone takes 0 (2/3 against 1/3); PSP alone takes 0.5 (10/3 against 2/3); P then PSP takes 0.5 only when the
    slack covers the third of a point of P@1 it costs."""
    p = np.array([[0.6, 0.4]] * 3, np.float32)
    v = np.array([[0.0, 1.0]] * 3, np.float32)
    truth = sp.csr_matrix([[1, 0], [0, 1], [1, 0]])
    chunks, weights = (lambda: [(p, v, truth)]), np.array([1.0, 10.0])
    p_table = {0.0: 2 / 3, 0.5: 1 / 3}
    assert tune_weight(chunks, (0.0, 0.5), k=1) == (0.0, p_table)
    assert tune_weight(chunks, (0.0, 0.5), k=1, label_weights=weights)[0] == 0.5
    assert tune_weight(chunks, (0.0, 0.5), k=1, label_weights=weights, slack=0.3) == (0.0, p_table)
    assert tune_weight(chunks, (0.0, 0.5), k=1, label_weights=weights, slack=0.34) == (0.5, p_table)
    # no slack: the best P@1 alone qualifies, and ties in P@1 go to the weighted hits (the docstring's example)
    assert tune_weight(chunks, (0.0, 0.5), k=1, label_weights=weights, slack=0.0) == (0.0, p_table)
