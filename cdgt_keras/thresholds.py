"""Decision thresholds tau_l for y_hat_l = 1{p_hat_l > tau_l} (SPEC §4), tuned on the validation split.

Modes: "fixed" (0.5), "global" (one tau maximising micro-F1), "per_label" (labels with at least
`min_positives` positives get the tau maximising their own F1; the others keep the tuned global tau), "grouped"
(as per_label, but the labels below `min_positives` share one tau maximising the micro-F1 pooled over those labels
only: the global tau is tuned for the frequent labels that dominate micro-F1 and leaves rare labels, whose
probabilities are small, never predicted), "shrunk" (every label gets the tau maximising its own F1 curve shrunk
toward the pooled micro-F1 curve: (n_l F1_l(tau) + k F1_micro(tau)) / (n_l + k), n_l its validation positives, k =
`prior_positives`; a label with few positives follows the global tau, a well-supported one its own, with no cliff
at `min_positives`: per-label taus tuned on a few validation positives overfit, one global tau ignores the labels).
Under per_label, grouped and shrunk, the labels with at least `shared_positives` validation positives (0: none) take
the global tau instead of their own: a label's own best F1 asks for a different tau than micro-F1 does (on calibrated
scores, micro-F1 is best where every label predicts at the same score), and micro-F1 is made of the frequent labels'
decisions while macro-F1 is mostly the rare ones'. Ties between candidate taus go to the highest one: the fewest
predictions among equally good choices.

Example:
    >>> probs = np.array([[0.9, 0.2], [0.3, 0.6]])
    >>> apply_thresholds(probs, tune_thresholds(probs, np.eye(2), mode="fixed")).tolist()
    [[1, 0], [0, 1]]
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from cdgt_keras.threads import map_rows

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


class ThresholdCounts:
    """Per-label counts over the candidate grid, accumulated one chunk of rows at a time (no [n, L] matrix).

    predicted[l, j] = #rows with p_l > grid[j], true_pos[l, j] = #positives of l with p_l > grid[j], positives[l].

    Example:
        >>> counts = ThresholdCounts(2, grid=[0.5])
        >>> counts.add(np.array([[0.9, 0.2]]), sp.csr_matrix([[1, 1]]))
        >>> counts.predicted.ravel().tolist(), counts.true_pos.ravel().tolist(), counts.positives.tolist()
        ([1, 0], [1, 0], [1, 1])
    """

    def __init__(self, num_labels: int, grid: np.ndarray | None = None) -> None:
        cand = default_grid() if grid is None else np.asarray(grid, dtype=np.float64).ravel()
        self.grid = np.unique(cand.astype(np.float32)).astype(np.float64)  # float32: as apply_thresholds compares
        if self.grid.size == 0:
            raise ValueError("grid must hold at least one threshold")
        self.num_labels = num_labels
        self.predicted = np.zeros((num_labels, self.grid.size), dtype=np.int64)
        self.true_pos = np.zeros_like(self.predicted)
        self.positives = np.zeros(num_labels, dtype=np.int64)

    def add(self, probs: np.ndarray, labels: sp.spmatrix) -> None:
        """Count one chunk: probs [rows, L] and its 0/1 labels (csr, same rows)."""
        chunk = np.asarray(probs)
        truth = sp.coo_matrix(labels)
        truth = sp.coo_matrix((truth.data != 0, (truth.row, truth.col)), shape=truth.shape)
        truth.sum_duplicates()
        truth.eliminate_zeros()

        def above(block: np.ndarray) -> np.ndarray:  # counts are sums over rows: blocks add up exactly
            # Only a value above the lowest threshold counts anywhere (most of a large label space's scores are
            # not; NaN is kept, as searchsorted counts it). The grid is float32, so comparing in the block's own
            # precision decides as float64 would.
            block = np.asarray(block)
            kept = ~(block <= self.grid[0])
            _, cols = np.nonzero(kept)
            return _above_counts(np.asarray(block[kept], dtype=np.float64), cols, self.grid, self.num_labels)

        self.predicted += np.sum(map_rows(above, chunk), axis=0)
        col = truth.col.astype(np.int64)
        values = np.asarray(chunk[truth.row, col], dtype=np.float64)
        self.true_pos += _above_counts(values, col, self.grid, self.num_labels)
        self.positives += np.bincount(col, minlength=self.num_labels)

    def thresholds(self, mode: str, min_positives: int = 5, prior_positives: float = 10.0,
                   shared_positives: int = 0) -> np.ndarray:
        """Thresholds [L] (float32) for `mode` from the counts (see the module docstring).

        Example (label 0 has 3 positives and its own best tau is 0.25; label 1's many near misses make the pooled
        tau 0.5, which label 0 takes with `shared_positives=3`):
            >>> counts = ThresholdCounts(2, grid=[0.25, 0.5])
            >>> counts.add(np.array([[0.9, 0.5], [0.7, 0.4], [0.4, 0.45], [0.5, 0.35]]),
            ...            sp.csr_matrix([[1, 1], [1, 0], [1, 0], [0, 0]]))
            >>> counts.thresholds("per_label", 1).tolist()
            [0.25, 0.25]
            >>> counts.thresholds("per_label", 1, shared_positives=3).tolist()
            [0.5, 0.25]
        """
        cand, positives, predicted, true_pos = self.grid, self.positives, self.predicted, self.true_pos
        if mode == "fixed":
            return np.full(self.num_labels, 0.5, dtype=np.float32)
        pooled = _f1(true_pos.sum(0), positives.sum(), predicted.sum(0))
        if mode == "shrunk":
            own_f1 = _f1(true_pos, positives[:, None], predicted)
            support = positives[:, None].astype(np.float64)
            taus = _best((support * own_f1 + prior_positives * pooled) / (support + prior_positives), cand)
            return _shared(taus, positives, shared_positives, _best(pooled, cand))
        taus = np.full(self.num_labels, _best(pooled, cand), dtype=np.float64)
        if mode in ("per_label", "grouped"):
            own = positives >= min_positives
            if own.any():
                taus[own] = _best(_f1(true_pos[own], positives[own, None], predicted[own]), cand)
            rest = ~own
            if mode == "grouped" and positives[rest].sum() > 0:
                taus[rest] = _best(_f1(true_pos[rest].sum(0), positives[rest].sum(), predicted[rest].sum(0)), cand)
        return _shared(taus, positives, shared_positives, _best(pooled, cand))


def _shared(taus: np.ndarray, positives: np.ndarray, shared_positives: int, pooled_tau: float) -> np.ndarray:
    """`taus` (float32) with the pooled tau for every label of at least `shared_positives` positives (0: none)."""
    taus = np.array(taus, dtype=np.float64)
    if shared_positives > 0:
        taus[positives >= shared_positives] = pooled_tau
    return taus.astype(np.float32)


def _f1(tp: np.ndarray, t: np.ndarray, p: np.ndarray) -> np.ndarray:
    denom = t + p
    return np.divide(2.0 * tp, denom, out=np.zeros(np.shape(tp)), where=denom > 0)


def _check_mode(mode: str, prior_positives: float) -> None:
    if mode not in MODES:
        raise ValueError(f"unknown threshold mode {mode!r}; allowed: {', '.join(MODES)}")
    if not prior_positives > 0:
        raise ValueError(f"prior_positives must be > 0, got {prior_positives}")


def tune_thresholds(
    probs: np.ndarray,
    labels: np.ndarray | sp.spmatrix,
    mode: str = "per_label",
    min_positives: int = 5,
    grid: np.ndarray | None = None,
    prior_positives: float = 10.0,
    shared_positives: int = 0,
) -> np.ndarray:
    """Thresholds [L] (float32) for `mode`, tuned on (probs [n, L], 0/1 labels [n, L] dense or sparse).

    Candidates are `grid` (default 0.01..0.99), rounded to float32 so tuning and `apply_thresholds` agree.
    `min_positives` is for per_label / grouped, `prior_positives` (k > 0) for shrunk, `shared_positives` (the
    labels that take the global tau) for per_label, grouped and shrunk.
    """
    _check_mode(mode, prior_positives)
    probs = np.asarray(probs)
    if probs.ndim != 2:
        raise ValueError(f"probs must be 2-D [n, L], got shape {probs.shape}")
    n, num_labels = probs.shape
    if mode == "fixed":
        return np.full(num_labels, 0.5, dtype=np.float32)
    truth = sp.csr_matrix(labels) if sp.issparse(labels) else sp.csr_matrix(np.asarray(labels) != 0)
    if truth.shape != probs.shape:
        raise ValueError(f"labels {truth.shape} and probs {probs.shape} differ in shape")
    step = max(1, _CHUNK_ELEMENTS // max(num_labels, 1))
    return tune_thresholds_chunks((probs[i : i + step] for i in range(0, n, step)), truth, mode, min_positives,
                                  grid, prior_positives, shared_positives)


def tune_thresholds_chunks(
    chunks: Iterable[np.ndarray],
    labels: sp.spmatrix,
    mode: str = "per_label",
    min_positives: int = 5,
    grid: np.ndarray | None = None,
    prior_positives: float = 10.0,
    shared_positives: int = 0,
) -> np.ndarray:
    """`tune_thresholds` on probabilities that arrive as row chunks [rows, L], in order, covering `labels`' rows.

    Example:
        >>> chunks = iter([np.array([[0.9, 0.2]]), np.array([[0.3, 0.6]])])
        >>> tune_thresholds_chunks(chunks, sp.csr_matrix(np.eye(2)), mode="global", grid=[0.25, 0.5]).tolist()
        [0.5, 0.5]
    """
    _check_mode(mode, prior_positives)
    return threshold_counts(chunks, labels, grid).thresholds(mode, min_positives, prior_positives, shared_positives)


def threshold_counts(chunks: Iterable[np.ndarray], labels: sp.spmatrix,
                     grid: np.ndarray | None = None) -> ThresholdCounts:
    """The `ThresholdCounts` of probabilities that arrive as row chunks [rows, L], in order, covering `labels`'
    rows: every mode's thresholds from one pass (`.thresholds(mode, ...)`).

    Example:
        >>> counts = threshold_counts(iter([np.array([[0.9, 0.2]]), np.array([[0.3, 0.6]])]), sp.eye(2), [0.5])
        >>> counts.thresholds("global").tolist(), counts.true_pos.ravel().tolist()
        ([0.5, 0.5], [1, 1])
    """
    truth = sp.csr_matrix(labels)
    counts, start = ThresholdCounts(truth.shape[1], grid), 0
    for chunk in chunks:
        chunk = np.asarray(chunk)
        if chunk.ndim != 2 or chunk.shape[1] != truth.shape[1]:
            raise ValueError(f"a chunk of shape {chunk.shape} does not match labels {truth.shape}")
        counts.add(chunk, truth[start : start + chunk.shape[0]])
        start += chunk.shape[0]
    if start != truth.shape[0]:
        raise ValueError(f"the chunks cover {start} rows, labels have {truth.shape[0]}")
    return counts


def tuned_thresholds(probs: np.ndarray, labels: np.ndarray | sp.spmatrix, config: CDGTConfig) -> np.ndarray:
    """`tune_thresholds` with the config's rule: thresholds, min_threshold_positives, threshold_prior,
    threshold_shared_positives."""
    return tune_thresholds(probs, labels, **config_rule(config))


def config_rule(config: CDGTConfig) -> dict[str, object]:
    """The tuning options a config sets: {"mode", "min_positives", "prior_positives", "shared_positives"}."""
    return {"mode": config.thresholds, "min_positives": config.min_threshold_positives,
            "prior_positives": config.threshold_prior, "shared_positives": config.threshold_shared_positives}


def apply_thresholds(probs: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """0/1 decisions (uint8) y_hat = 1{p > tau}, tau broadcast over rows."""
    return (np.asarray(probs) > np.asarray(thresholds)[None, :]).astype(np.uint8)


def sparse_decisions(probs: np.ndarray, thresholds: np.ndarray) -> sp.csr_matrix:
    """`apply_thresholds` as a csr matrix (uint8): what a chunk of scores keeps of its decisions.

    Example:
        >>> sparse_decisions(np.array([[0.9, 0.2], [0.3, 0.6]]), np.full(2, 0.5, np.float32)).nnz
        2
    """
    return sp.csr_matrix(apply_thresholds(probs, thresholds))
