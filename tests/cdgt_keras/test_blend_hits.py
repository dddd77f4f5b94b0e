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
