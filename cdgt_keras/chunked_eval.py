"""The report of `cdgt_keras.metrics.report` from score chunks, without a dense [n, L] score matrix.

Scores arrive as row chunks [rows, L], in order (a model predicting a few hundred rows at a time, or slices of an
array). Each chunk leaves behind only what the metrics need: per row the top-k label ids and scores overall, among
the head labels and among the tail labels (each group ranks within its own labels, as `report` does); the per-label
F1 counts of the thresholded decisions (a csr per chunk); the scores of the true positives. MAP needs, for every
positive, how many examples score at least as high on its label, which is only known once every positive's score
is: a second pass over the chunks (the scores are produced twice, never held) counts that, exactly. Memory: one
chunk plus O(n·k + nnz(truth) + L).

Example:
    >>> from cdgt_keras.metrics import report
    >>> from cdgt_keras.thresholds import apply_thresholds
    >>> y = sp.csr_matrix(np.array([[1, 0, 0], [0, 1, 1], [0, 0, 1]]))
    >>> s = np.array([[0.9, 0.2, 0.1], [0.3, 0.8, 0.6], [0.5, 0.4, 0.7]])
    >>> tau = np.full(3, 0.5, dtype=np.float32)
    >>> chunked = chunked_report(y, array_chunks(s, rows=2), tau, head_labels=[0], tail_labels=[1, 2], ks=(1, 2))
    >>> chunked == report(y, s, apply_thresholds(s, tau), head_labels=[0], tail_labels=[1, 2], ks=(1, 2))
    True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from cdgt_keras.metrics import Counts, _as_csr, _dense_topk, group_row, grouped_report
from cdgt_keras.thresholds import sparse_decisions

ScoreChunks = Callable[[], Iterable[np.ndarray]]  # each call yields the row chunks [rows, L] again, in order
CHUNK_ELEMENTS = 1 << 22  # about 4M scores per chunk


def chunk_rows(num_labels: int, multiple: int = 1, elements: int = CHUNK_ELEMENTS) -> int:
    """Rows per chunk: about `elements` scores, a multiple of `multiple` (a batch size), at least one multiple.

    Example:
        >>> chunk_rows(1000, multiple=256), chunk_rows(10, multiple=256)
        (4096, 419328)
    """
    return max(1, elements // max(num_labels, 1) // multiple) * multiple


def array_chunks(scores: np.ndarray, rows: int | None = None) -> ScoreChunks:
    """Re-iterable row chunks of an array (views, no copies); default `chunk_rows(L)` rows.

    Example:
        >>> [c.shape for c in array_chunks(np.zeros((5, 2)), rows=2)()]
        [(2, 2), (2, 2), (1, 2)]
    """
    step = rows or chunk_rows(np.shape(scores)[1])
    return lambda: (scores[i : i + step] for i in range(0, np.shape(scores)[0], step))


def matrix_chunks(scores: np.ndarray | sp.spmatrix, rows: int | None = None) -> ScoreChunks:
    """`array_chunks` of a dense array, or of a sparse score matrix made dense one chunk at a time (a peer that
    scores only the labels its beam reaches: absent entries score 0).

    Example:
        >>> [c.tolist() for c in matrix_chunks(sp.csr_matrix(np.eye(3)), rows=2)()]
        [[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], [[0.0, 0.0, 1.0]]]
    """
    if not sp.issparse(scores):
        return array_chunks(scores, rows)
    matrix = sp.csr_matrix(scores)
    step = rows or chunk_rows(matrix.shape[1])
    return lambda: (matrix[i : i + step].toarray() for i in range(0, matrix.shape[0], step))


def _offsets(chunks: ScoreChunks, n: int, num_labels: int) -> Iterator[tuple[int, np.ndarray]]:
    """(first row, chunk as an ndarray) for each chunk, checking shapes and that the chunks cover n rows."""
    start = 0
    for chunk in chunks():
        chunk = np.asarray(chunk)
        if chunk.ndim != 2 or chunk.shape[1] != num_labels:
            raise ValueError(f"a score chunk of shape {chunk.shape} does not match {num_labels} labels")
        yield start, chunk
        start += chunk.shape[0]
    if start != n:
        raise ValueError(f"the score chunks cover {start} rows, the truth has {n}")


def _topk_pair(chunk: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids, scores) of the top k of each row (ties to the lower id; NaN scores as -inf, ranking last)."""
    ids = _dense_topk(chunk, k)
    vals = np.take_along_axis(chunk, ids, axis=1).astype(np.float64)
    return ids, np.where(np.isnan(vals), -np.inf, vals)


def _positive_scores(truth: sp.csr_matrix, start: int, chunk: np.ndarray) -> np.ndarray:
    """Scores of the chunk's positives, in the truth's csr order."""
    part = truth[start : start + chunk.shape[0]]
    rows = np.repeat(np.arange(part.shape[0]), np.diff(part.indptr))
    return chunk[rows, part.indices].astype(np.float64)


class _Positives:
    """The positives sorted by (label, score): where each label's run starts, and its lowest score.

    A score x reaches a positive scoring v iff rank(x) >= rank(v), with rank = #distinct positive scores <= it;
    (label, rank) packs into one int64 key, so one `searchsorted` places every entry among its label's positives.
    """

    def __init__(self, truth: sp.csr_matrix, scores: np.ndarray) -> None:
        num_labels = truth.shape[1]
        self.values = np.unique(scores)  # the distinct positive scores
        self.width = self.values.size + 1
        keys = truth.indices.astype(np.int64) * self.width + np.searchsorted(self.values, scores, side="right")
        order = np.argsort(keys, kind="stable")
        self.keys, self.score = keys[order], scores[order]
        self.label = truth.indices[order].astype(np.int64)
        self.start = np.searchsorted(self.label, np.arange(num_labels + 1))  # label l: start[l] .. start[l+1]
        self.lowest = np.full(num_labels, np.inf)
        has = self.start[:-1] < self.start[1:]
        self.lowest[has] = self.score[self.start[:-1][has]]

    def buckets(self, cols: np.ndarray, values: np.ndarray) -> np.ndarray:
        """For each (label, score) entry, how many positives of that label score <= it."""
        keys = cols * self.width + np.searchsorted(self.values, values, side="right")
        return np.searchsorted(self.keys, keys, side="right") - self.start[cols]


def average_precisions(truth: sp.csr_matrix, chunks: ScoreChunks, positive_scores: np.ndarray) -> np.ndarray:
    """Per-label AP [L] as `metrics.mean_average_precision` defines it (NaN for labels without a positive).

    `positive_scores`: the scores of truth's positives in csr order (the first pass). This second pass counts,
    for each label, the examples by how many of its positives they reach; entries below a label's lowest positive
    count for none and are skipped.
    """
    n, num_labels = truth.shape
    pos = _Positives(truth, positive_scores)
    hist = np.zeros(pos.label.size + num_labels, dtype=np.int64)  # label l: cells start[l] + l .. start[l+1] + l
    for _, chunk in _offsets(chunks, n, num_labels):
        rows, cols = np.nonzero(chunk >= pos.lowest)
        cells = pos.start[cols] + cols + pos.buckets(cols, chunk[rows, cols].astype(np.float64))
        hist += np.bincount(cells, minlength=hist.size)
    suffix = np.r_[np.cumsum(hist[::-1])[::-1], 0]  # suffix[i] = sum of hist[i:]
    g = np.arange(pos.label.size)
    lab = pos.label
    # examples scoring >= the g-th positive = cells above its bucket within its label's run
    reach = suffix[g + lab + 1] - suffix[pos.start[lab + 1] + lab + 1]
    new = np.r_[True, (lab[1:] != lab[:-1]) | (pos.score[1:] != pos.score[:-1])]
    first_tied = np.maximum.accumulate(np.where(new, g, 0))
    ratio = (pos.start[lab + 1] - first_tied) / reach  # positives scoring >= it / examples scoring >= it
    out = np.full(num_labels, np.nan)
    has = pos.start[:-1] < pos.start[1:]
    counts = np.diff(pos.start)[has]
    out[has] = np.add.reduceat(ratio, pos.start[:-1][has]) / counts if has.any() else []
    return out


@dataclass(frozen=True)
class ChunkedResult:
    """What `chunked_reports` computes: a report per decision rule, and what the curves need beside it.

    reports: {rule: {"overall"|"head"|"tail": {metric: value}}}; counts: {rule: per-label (true positives, truth
    positives, predicted positives)}; top: the overall top-k (ids [n, k], scores [n, k]) of every row."""

    reports: dict[str, dict[str, dict[str, float]]]
    counts: dict[str, Counts]
    top: tuple[np.ndarray, np.ndarray]


def _first_pass(truth: sp.csr_matrix, chunks: ScoreChunks, thresholds: Mapping[str, np.ndarray],
                groups: dict[str, np.ndarray | None], k: int,
                observers: Sequence[Callable[[int, np.ndarray], None]],
                decision_chunks: ScoreChunks | None = None) -> tuple[dict, dict, np.ndarray]:
    """Top-k pairs per group, F1 counts per rule (tp, truth, predicted per label), the positives' scores."""
    n, num_labels = truth.shape
    tops: dict[str, list] = {name: [] for name in groups}
    tp = {rule: np.zeros(num_labels, np.int64) for rule in thresholds}
    predicted = {rule: np.zeros(num_labels, np.int64) for rule in thresholds}
    positive_scores = []
    deciding = None if decision_chunks is None else _offsets(decision_chunks, n, num_labels)
    for start, chunk in _offsets(chunks, n, num_labels):
        part = truth[start : start + chunk.shape[0]]
        decide = chunk if deciding is None else _matching(deciding, start, chunk.shape)
        for name, cols in groups.items():
            if cols is None or cols.size:
                tops[name].append(_topk_pair(chunk if cols is None else chunk[:, cols], k))
        for rule, tau in thresholds.items():
            decisions = sparse_decisions(decide, tau)
            tp[rule] += np.asarray(part.multiply(decisions).sum(axis=0)).ravel()
            predicted[rule] += np.bincount(decisions.indices, minlength=num_labels)
        positive_scores.append(_positive_scores(truth, start, chunk))
        for observe in observers:
            observe(start, decide)
    if deciding is not None and next(deciding, None) is not None:
        raise ValueError(f"the decision chunks cover more rows than the score chunks' {n}")
    pairs = {name: tuple(np.concatenate(p) for p in zip(*parts)) if parts else
             (np.zeros((0, k), np.int64), np.zeros((0, k))) for name, parts in tops.items()}
    positives = np.bincount(truth.indices, minlength=num_labels)
    counts = {rule: (tp[rule], positives, predicted[rule]) for rule in thresholds}
    return pairs, counts, np.concatenate(positive_scores) if positive_scores else np.zeros(0)


def _matching(deciding: Iterator[tuple[int, np.ndarray]], start: int, shape: tuple[int, ...]) -> np.ndarray:
    """The next decision chunk, which must cover the ranking chunk's rows (from `start`, `shape`)."""
    found = next(deciding, None)
    if found is None or found[0] != start or found[1].shape != shape:
        got = "none" if found is None else f"rows from {found[0]}, shape {found[1].shape}"
        raise ValueError(f"the decision chunks do not follow the score chunks: at row {start} (shape {shape}) "
                         f"the decisions' chunk is {got}")
    return found[1]


def chunked_reports(
    y_true: sp.spmatrix | np.ndarray,
    chunks: ScoreChunks,
    thresholds: Mapping[str, np.ndarray],
    *,
    head_labels: Sequence[int] | np.ndarray,
    tail_labels: Sequence[int] | np.ndarray,
    propensities: np.ndarray | None = None,
    ks: Sequence[int] = (1, 3, 5),
    with_map: bool = True,
    observers: Sequence[Callable[[int, np.ndarray], None]] = (),
    decision_chunks: ScoreChunks | None = None,
) -> ChunkedResult:
    """`chunked_report` under several decision rules at once ({rule: thresholds [L]}): the rankings, MAP and the
    top-k are computed once (they do not depend on the thresholds), the F1 counts once per rule. `observers`
    see every chunk of the scores the decisions are read from as (first row, chunk): e.g. a `ThresholdCounts` of
    the test scores. `decision_chunks`: those scores, chunk for chunk with `chunks`, when they are not the
    ranking's (a model whose tail decides apart: `CDGTModel.decides_apart`).

    Example:
        >>> y = sp.csr_matrix(np.array([[1, 0], [0, 1]]))
        >>> s = np.array([[0.9, 0.2], [0.3, 0.6]])
        >>> out = chunked_reports(y, array_chunks(s), {"low": np.full(2, 0.25), "high": np.full(2, 0.95)},
        ...                       head_labels=[0], tail_labels=[1], ks=(1,))
        >>> out.reports["low"]["overall"]["micro_f1"], out.reports["high"]["overall"]["micro_f1"]
        (0.8, 0.0)
    """
    truth = _as_csr(y_true)
    props = None if propensities is None else np.asarray(propensities, dtype=np.float64)
    groups = {"overall": None, "head": np.asarray(head_labels, np.int64), "tail": np.asarray(tail_labels, np.int64)}
    rules = {rule: np.asarray(tau) for rule, tau in thresholds.items()}
    pairs, counts, positive_scores = _first_pass(truth, chunks, rules, groups, max(ks), observers, decision_chunks)
    ap = average_precisions(truth, chunks, positive_scores) if with_map else np.full(truth.shape[1], np.nan)

    def report_of(rule_counts: Counts) -> dict[str, dict[str, float]]:
        def row_of(name: str, cols: np.ndarray | None) -> dict[str, float]:
            every = cols is None
            sub_ap = ap if every else ap[cols]
            has = ~np.isnan(sub_ap) if with_map else np.zeros(sub_ap.size, bool)
            mean_ap = float(np.mean(sub_ap[has])) if has.any() else 0.0 if with_map else float("nan")
            return group_row(truth if every else truth[:, cols], pairs[name],
                             rule_counts if every else tuple(c[cols] for c in rule_counts), mean_ap,
                             props if every or props is None else props[cols], ks)

        return grouped_report(row_of, rule_counts, groups["head"], groups["tail"])

    return ChunkedResult({rule: report_of(c) for rule, c in counts.items()}, counts, pairs["overall"])


def chunked_report(
    y_true: sp.spmatrix | np.ndarray,
    chunks: ScoreChunks,
    thresholds: np.ndarray,
    *,
    head_labels: Sequence[int] | np.ndarray,
    tail_labels: Sequence[int] | np.ndarray,
    propensities: np.ndarray | None = None,
    ks: Sequence[int] = (1, 3, 5),
    with_map: bool = True,
    decision_chunks: ScoreChunks | None = None,
) -> dict[str, dict[str, float]]:
    """`report(y_true, scores, apply_thresholds(scores, thresholds), ...)` from the score chunks, same values
    (with `decision_chunks`, `apply_thresholds` of those).

    `with_map=False` skips MAP's second pass over the chunks ("map" is then NaN).
    """
    return chunked_reports(y_true, chunks, {"": thresholds}, head_labels=head_labels, tail_labels=tail_labels,
                           propensities=propensities, ks=ks, with_map=with_map,
                           decision_chunks=decision_chunks).reports[""]


def top_k_chunks(chunks: ScoreChunks, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The top k (ids [n, k], scores [n, k]) of every row of the chunks, one pass: what P@k, PSP@k and nDCG@k
    read (`metrics.precision_at_k(y, pair, k)` equals the dense figure), without an [n, L] matrix.

    Example:
        >>> ids, _ = top_k_chunks(array_chunks(np.array([[0.1, 0.9, 0.5], [0.7, 0.2, 0.3]]), rows=1), 2)
        >>> ids.tolist()
        [[1, 2], [0, 2]]
    """
    parts = [_topk_pair(np.asarray(chunk), k) for chunk in chunks()]
    if not parts:
        return np.zeros((0, k), np.int64), np.zeros((0, k))
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
