"""Decision thresholds tau_l for y_hat_l = 1{p_hat_l > tau_l} (SPEC §4), tuned on the validation split.

Modes: "fixed" (0.5), "global" (one tau maximising micro-F1), "per_label" (labels with at least
`min_positives` positives get the tau maximising their own F1; the others keep the tuned global tau), "grouped"
(as per_label, but the labels below `min_positives` share one tau maximising the micro-F1 pooled over those labels
only: the global tau is tuned for the frequent labels that dominate micro-F1 and leaves rare labels, whose
probabilities are small, never predicted), "shrunk" (every label gets the tau maximising its own F1 curve shrunk
toward the pooled micro-F1 curve: (n_l F1_l(tau) + k F1_micro(tau)) / (n_l + k), n_l its validation positives, k =
`prior_positives`; a label with few positives follows the global tau, a well-supported one its own, with no cliff
at `min_positives`: per-label taus tuned on a few validation positives overfit, one global tau ignores the labels).
Ties between candidate taus go to the highest one: the fewest predictions among equally good choices.

Example:
    >>> probs = np.array([[0.9, 0.2], [0.3, 0.6]])
    >>> apply_thresholds(probs, tune_thresholds(probs, np.eye(2), mode="fixed")).tolist()
    [[1, 0], [0, 1]]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

if TYPE_CHECKING:
    from cdgt_keras.config import CDGTConfig

MODES = ("fixed", "global", "per_label", "grouped", "shrunk")
_CHUNK_ELEMENTS = 1 << 22


def default_grid() -> np.ndarray:
    """Candidate thresholds 0.01, 0.02, ..., 0.99."""
    return np.round(np.arange(1, 100) / 100.0, 2)


def _above_counts(values: np.ndarray, cols: np.ndarray, grid: np.ndarray, num_labels: int) -> np.ndarray:
    """counts[l, j] = #entries of label l with value > grid[j] (grid ascending)."""
    g = grid.size
    bucket = np.searchsorted(grid, values, side="left")  # = #grid values strictly below each value
    hist = np.bincount(cols * (g + 1) + bucket, minlength=num_labels * (g + 1)).reshape(num_labels, g + 1)
    # value > grid[j]  <=>  bucket > j, so counts[:, j] = sum of hist[:, j+1:]
    return np.cumsum(hist[:, ::-1], axis=1)[:, ::-1][:, 1:]


def _best(f1: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Per row, the highest grid value among those reaching the maximum F1."""
    last = f1.shape[-1] - 1 - np.argmax(f1[..., ::-1], axis=-1)
    return grid[last]


def tune_thresholds(
    probs: np.ndarray,
    labels: np.ndarray | sp.spmatrix,
    mode: str = "per_label",
    min_positives: int = 5,
    grid: np.ndarray | None = None,
    prior_positives: float = 10.0,
) -> np.ndarray:
    """Thresholds [L] (float32) for `mode`, tuned on (probs [n, L], 0/1 labels [n, L] dense or sparse).

    Candidates are `grid` (default 0.01..0.99), rounded to float32 so tuning and `apply_thresholds` agree.
    `min_positives` is for per_label / grouped, `prior_positives` (k > 0) for shrunk.
    """
    if mode not in MODES:
        raise ValueError(f"unknown threshold mode {mode!r}; allowed: {', '.join(MODES)}")
    if not prior_positives > 0:
        raise ValueError(f"prior_positives must be > 0, got {prior_positives}")
    probs = np.asarray(probs)
    if probs.ndim != 2:
        raise ValueError(f"probs must be 2-D [n, L], got shape {probs.shape}")
    n, num_labels = probs.shape
    if mode == "fixed":
        return np.full(num_labels, 0.5, dtype=np.float32)
    truth = sp.csr_matrix(labels, copy=True) if sp.issparse(labels) else sp.csr_matrix(np.asarray(labels) != 0)
    if truth.shape != probs.shape:
        raise ValueError(f"labels {truth.shape} and probs {probs.shape} differ in shape")
    truth.data = truth.data != 0
    truth.eliminate_zeros()
    cand = default_grid() if grid is None else np.asarray(grid, dtype=np.float64).ravel()
    cand = np.unique(cand.astype(np.float32)).astype(np.float64)
    if cand.size == 0:
        raise ValueError("grid must hold at least one threshold")

    predicted = np.zeros((num_labels, cand.size), dtype=np.int64)
    step = max(1, _CHUNK_ELEMENTS // max(num_labels, 1))
    for start in range(0, n, step):
        chunk = np.asarray(probs[start : start + step], dtype=np.float64)
        cols = np.broadcast_to(np.arange(num_labels), chunk.shape).ravel()
        predicted += _above_counts(chunk.ravel(), cols, cand, num_labels)
    truth = truth.tocoo()
    pos_probs = np.asarray(probs[truth.row, truth.col], dtype=np.float64)
    true_pos = _above_counts(pos_probs, truth.col.astype(np.int64), cand, num_labels)
    positives = np.bincount(truth.col, minlength=num_labels)

    def f1(tp: np.ndarray, t: np.ndarray, p: np.ndarray) -> np.ndarray:
        denom = t + p
        return np.divide(2.0 * tp, denom, out=np.zeros(tp.shape), where=denom > 0)

    pooled = f1(true_pos.sum(0), positives.sum(), predicted.sum(0))
    if mode == "shrunk":
        own_f1 = f1(true_pos, positives[:, None], predicted)
        support = positives[:, None].astype(np.float64)
        return _best((support * own_f1 + prior_positives * pooled) / (support + prior_positives), cand).astype(
            np.float32)
    global_tau = _best(pooled, cand)
    taus = np.full(num_labels, global_tau, dtype=np.float64)
    if mode in ("per_label", "grouped"):
        own = positives >= min_positives
        if own.any():
            taus[own] = _best(f1(true_pos[own], positives[own, None], predicted[own]), cand)
        rest = ~own
        if mode == "grouped" and positives[rest].sum() > 0:
            taus[rest] = _best(f1(true_pos[rest].sum(0), positives[rest].sum(), predicted[rest].sum(0)), cand)
    return taus.astype(np.float32)


def tuned_thresholds(probs: np.ndarray, labels: np.ndarray | sp.spmatrix, config: CDGTConfig) -> np.ndarray:
    """`tune_thresholds` with the config's rule: thresholds, min_threshold_positives, threshold_prior."""
    return tune_thresholds(probs, labels, mode=config.thresholds, min_positives=config.min_threshold_positives,
                           prior_positives=config.threshold_prior)


def apply_thresholds(probs: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """0/1 decisions (uint8) y_hat = 1{p > tau}, tau broadcast over rows."""
    return (np.asarray(probs) > np.asarray(thresholds)[None, :]).astype(np.uint8)
