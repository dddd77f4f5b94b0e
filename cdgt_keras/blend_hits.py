"""Hits of a blend's top k over a grid of weights, ranked among a few candidate labels per row: the full ranking's
hits exactly, ties included.

`settle` tunes a memory layer's weight w by the validation P@5 of the blend (1 - w) p + w v, for each w of a grid
(cdgt_keras.settling). Ranked in full, every weight costs a blend and a top k over the dense [n, L] scores: on deps
(5.9k rows, 18.6k labels, 34 weights in all) that was about half of `settle`'s tuning. Most of that work is not
needed. A label outside the top m of p and the top m of v scores at most the blend of the m-th largest p and the
m-th largest v (rounding is monotone), and where v is sparse (the neighbour votes name the labels of k documents
only) a label without a vote scores (1 - w) p. So the blend's top k lies among those candidates, provided k of
them score strictly above that ceiling; the proviso is checked row by row for every weight, and a row where it
fails is ranked in full. Candidates are ranked by the rule of `cdgt_keras.metrics` (score descending, then the
lower label id), so the hits are the full ranking's to the last one.

Example (label 2 has no vote, and p ranks it first; w = 0.5 lets the votes for label 1 win the top 1):
    >>> p = np.array([[0.2, 0.5, 0.6]], np.float32); v = sp.csr_matrix(np.array([[0.0, 1.0, 0.0]], np.float32))
    >>> blend_hits(p, v, sp.csr_matrix([[0, 1, 0]]), (0.0, 0.5), k=1)
    {0.0: 0, 0.5: 1}
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import scipy.sparse as sp

from cdgt_keras.metrics import _dense_topk, _hits
from cdgt_keras.tail_memory import blend

MARGIN = 8  # the top k + MARGIN labels of p (and of a dense v) are candidates
SPARSE_SHARE = 0.125  # v with at most this share of non-zeros: every non-zero label is a candidate


def blend_hits(scores: np.ndarray, extra: Any, truth: sp.csr_matrix, grid: Iterable[float], k: int = 5,
               label_weights: np.ndarray | None = None) -> dict:
    """For each weight w of `grid`, how many of the top `k` labels of `blend(scores, extra, w)` are positives of
    `truth` (summed over the rows). `scores` [n, L] dense; `extra` [n, L] dense or scipy sparse. With
    `label_weights` [L] each hit counts its label's weight (float64, summed row by row in order; 1 / propensity
    gives PSP@k's numerator) instead of 1; with [L, c], one such sum per column (an array [c]), from one ranking."""
    scores = np.asarray(scores)
    truth = sp.csr_matrix(truth)
    truth.sort_indices()
    grid = [float(w) for w in grid]
    n, num_labels = scores.shape
    k = min(k, num_labels)
    if not sp.issparse(extra) and np.count_nonzero(extra) <= SPARSE_SHARE * max(np.size(extra), 1):
        extra = sp.csr_matrix(np.asarray(extra))
    if n == 0 or num_labels <= 2 * (k + MARGIN):
        dense = extra.toarray() if sp.issparse(extra) else np.asarray(extra)
        return {w: _full_hits(scores, dense, truth, w, k, label_weights) for w in grid}
    return _candidate_hits(scores, extra, truth, grid, k, label_weights)


def _counted(found: np.ndarray, labels: np.ndarray, label_weights: np.ndarray | None) -> int | float | np.ndarray:
    """The hits [n, k] of ranked `labels` [n, k]: counted (an int), or each weighted by its label's weight ([L]: a
    float; [L, c]: a sum per column)."""
    if label_weights is None:
        return int(found.sum())
    weights = np.asarray(label_weights, np.float64)[np.maximum(labels, 0)]
    if weights.ndim == 2:
        return float((found * weights).sum())
    return (found[..., None] * weights).sum(axis=(0, 1))


def _full_hits(scores: np.ndarray, extra: np.ndarray, truth: sp.csr_matrix, w: float, k: int,
               label_weights: np.ndarray | None = None) -> int | float:
    """The hits of the blend ranked over every label (what `precision_at_k` counts)."""
    top = _dense_topk(blend(scores, extra, w), k)
    return _counted(_hits(truth, top), top, label_weights)


def _top_keys(values: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's m best labels as keys (row * L + label) [n * m], and each row's m-th best value [n]: what every
    other label of the row scores at most."""
    n, num_labels = values.shape
    top = _dense_topk(values, m)
    return (np.arange(n, dtype=np.int64)[:, None] * num_labels + top).ravel(), values[np.arange(n), top[:, -1]]


def _candidate_hits(scores: np.ndarray, extra: Any, truth: sp.csr_matrix, grid: list[float], k: int,
                    label_weights: np.ndarray | None = None) -> dict:
    n, num_labels = scores.shape
    m = k + MARGIN
    score_keys, score_ceiling = _top_keys(scores, m)
    if sp.issparse(extra):  # every label with a non-zero is a candidate: the others' extra is 0
        extra = sp.csr_matrix(extra)
        extra.sum_duplicates()
        extra_keys = np.repeat(np.arange(n, dtype=np.int64), np.diff(extra.indptr)) * num_labels + extra.indices
        extra_ceiling = np.zeros(n, dtype=extra.dtype)
    else:  # the top m of extra too: the others' extra is at most the m-th
        extra = np.asarray(extra)
        extra_keys, extra_ceiling = _top_keys(extra, m)
    keys = np.unique(np.concatenate([score_keys, extra_keys]))  # sorted: by row, then label id
    rows, labels = keys // num_labels, keys % num_labels
    s = scores.reshape(-1)[keys]
    if sp.issparse(extra):
        e = np.zeros(keys.size, dtype=extra.dtype)
        e[np.searchsorted(keys, extra_keys)] = extra.data
    else:
        e = extra.reshape(-1)[keys]
    counts = np.bincount(rows, minlength=n)
    starts = np.cumsum(counts) - counts
    slot = np.arange(keys.size) - np.repeat(starts, counts)  # a candidate's place in its row
    hits = {}
    for w in grid:
        b = blend(s, e, w)
        limit = blend(score_ceiling, extra_ceiling, w)  # the most any label that is no candidate can score
        ranked = np.full((n, int(counts.max())), -np.inf, dtype=b.dtype)
        ranked[rows, slot] = b
        place = _dense_topk(ranked, k)  # slots in label id order, so ties go to the lower id as in the full ranking
        top = labels[starts[:, None] + place]
        found = _hits(truth, top)
        safe = np.bincount(rows, weights=b > limit[rows], minlength=n) >= k
        total = _counted(found[safe], top[safe], label_weights)
        if not safe.all():  # fewer than k candidates beat the ceiling: those rows ranked over every label
            bad = np.flatnonzero(~safe)
            rest = extra[bad].toarray() if sp.issparse(extra) else extra[bad]
            total += _full_hits(scores[bad], rest, truth[bad], w, k, label_weights)
        hits[w] = total
    return hits
