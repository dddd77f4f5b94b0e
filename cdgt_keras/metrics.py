"""Evaluation metrics with the conventions of SPEC §7 (pure numpy/scipy, sparse-friendly).

Truth and predictions are 0/1 matrices [n, L], dense or scipy-sparse. Ranking metrics take dense scores
[n, L] or a top-k pair `(indices [n, k'], scores [n, k'])`; ties in scores go to the lower label id.

Example:
    >>> precision_at_k(np.array([[0, 1, 1]]), np.array([[0.9, 0.8, 0.1]]), k=2)
    0.5
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import scipy.sparse as sp

from cdgt_keras.threads import map_rows

Matrix = np.ndarray | sp.spmatrix
Scores = np.ndarray | tuple[np.ndarray, np.ndarray]

_CHUNK_ELEMENTS = 1 << 22  # row/column chunks hold about 4M floats at a time

# The figures every summary leads with, in this order (keys of `report`'s rows, with their display names): the
# command line's result line, the trainer's epoch line, the Evaluator's artifact properties and the benchmark's
# summary and feature tables all read this one list.
HEADLINE_METRICS: dict[str, str] = {"p_at_1": "P@1", "p_at_5": "P@5", "psp_at_5": "PSP@5", "micro_f1": "Micro-F1",
                                    "macro_f1": "Macro-F1", "rare_f1": "Rare-F1"}


def _as_csr(y: Matrix) -> sp.csr_matrix:
    """Binary CSR copy of a 0/1 matrix (nonzero → 1), sorted indices, no explicit zeros."""
    m = sp.csr_matrix(y) if sp.issparse(y) else sp.csr_matrix(np.asarray(y) != 0)
    m = m.astype(np.int64)
    m.data = (m.data != 0).astype(np.int64)
    m.eliminate_zeros()
    m.sort_indices()
    return m


def _dense_topk(scores: np.ndarray, k: int) -> np.ndarray:
    """Top-k label ids per row of dense scores, best first, ties to the lower label id (row chunks, in threads).

    Candidates are the scores >= the smallest of k block maxima (a lower bound on the k-th largest, so
    usually a handful per row); an exact partition takes over when that bound lets too many through.
    """
    n, num_labels = scores.shape
    k = min(k, num_labels)
    blocks = np.arange(k) * num_labels // k

    def chunk(part: np.ndarray) -> np.ndarray:
        s = np.asarray(part)
        if not np.issubdtype(s.dtype, np.floating):
            s = s.astype(np.float64)
        elif np.isnan(s).any():
            s = np.where(np.isnan(s), -np.inf, s)  # NaN ranks last
        bound = np.maximum.reduceat(s, blocks, axis=1).min(axis=1, keepdims=True)
        rows, cols = np.nonzero(s >= bound)
        if rows.size * 16 > s.size:
            kth = np.partition(s, num_labels - k, axis=1)[:, num_labels - k, None]  # exact k-th largest
            tied = s == kth
            need = k - (s > kth).sum(axis=1, keepdims=True)
            if (tied.sum(axis=1, keepdims=True) > need).any():
                tied &= np.cumsum(tied, axis=1) <= need  # keep only the lowest ids among the ties
            rows, cols = np.nonzero((s > kth) | tied)
        order = np.lexsort((cols, -s[rows, cols], rows))  # by row, score descending, label id ascending
        rows, cols = rows[order], cols[order]
        rank = np.arange(rows.size) - np.searchsorted(rows, np.arange(s.shape[0]))[rows]
        return cols[rank < k].reshape(-1, k)

    if n == 0 or k == 0:
        return np.empty((n, k), dtype=np.int64)
    return np.concatenate(map_rows(chunk, scores, entries=_CHUNK_ELEMENTS)).astype(np.int64, copy=False)


def _topk(scores: Scores, k: int, num_labels: int) -> np.ndarray:
    """Top-k label ids [n, k] from dense scores or from an `(indices, scores)` pair; -1 marks no label.

    A pair must hold at least k entries per row unless it ranks all `num_labels` labels.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if isinstance(scores, tuple):
        ids, vals = (np.asarray(a) for a in scores)
        if ids.shape != vals.shape or ids.ndim != 2:
            raise ValueError(f"top-k indices and scores need one 2-D shape, got {ids.shape}, {vals.shape}")
        if ids.shape[1] < min(k, num_labels):
            raise ValueError(f"k={k} exceeds the {ids.shape[1]} ranked labels supplied per example")
        ids = ids.astype(np.int64)
        vals = np.where(ids < 0, -np.inf, vals.astype(np.float64))
        order = np.lexsort((ids, -vals), axis=1)  # by score descending, then label id ascending
        return np.take_along_axis(ids, order, axis=1)[:, :k]  # fewer columns only if all labels ranked
    return _dense_topk(np.asarray(scores), k)


def _hits(truth: sp.csr_matrix, top: np.ndarray) -> np.ndarray:
    """Boolean [n, k]: whether each ranked label is a positive of its example."""
    n, num_labels = truth.shape
    if top.shape[0] != n:
        raise ValueError(f"scores have {top.shape[0]} rows, truth has {n}")
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(truth.indptr))
    keys = rows * num_labels + truth.indices  # sorted, since indices are sorted within rows
    query = np.arange(n, dtype=np.int64)[:, None] * num_labels + top
    if keys.size == 0:
        return np.zeros(top.shape, dtype=bool)
    pos = np.minimum(np.searchsorted(keys, query), keys.size - 1)
    return (top >= 0) & (keys[pos] == query)


def precision_at_k(y_true: Matrix, scores: Scores, k: int) -> float:
    """P@k = mean over examples of (#positives among the top k) / k."""
    truth = _as_csr(y_true)
    if truth.shape[0] == 0:
        return 0.0
    return float(_hits(truth, _topk(scores, k, truth.shape[1])).sum() / (truth.shape[0] * k))


def ndcg_at_k(y_true: Matrix, scores: Scores, k: int) -> float:
    """nDCG@k = DCG@k / IDCG@k (IDCG over min(k, #positives) ranks); examples without positives count 0."""
    truth = _as_csr(y_true)
    if truth.shape[0] == 0:
        return 0.0
    return float(_ndcg_rows(truth, scores, k).mean())


def _ndcg_rows(truth: sp.csr_matrix, scores: Scores, k: int) -> np.ndarray:
    """Each example's nDCG@k (0 without positives)."""
    hits = _hits(truth, _topk(scores, k, truth.shape[1]))
    discount = 1.0 / np.log2(np.arange(2, k + 2))
    dcg = hits @ discount[: hits.shape[1]]
    ideal = np.concatenate([[0.0], np.cumsum(discount)])[np.minimum(np.diff(truth.indptr), k)]
    return np.divide(dcg, ideal, out=np.zeros_like(dcg), where=ideal > 0)


def propensities(train_counts: np.ndarray, num_train: int, a: float = 0.55, b: float = 1.5) -> np.ndarray:
    """Jain et al. (2016) propensities p_l = 1 / (1 + C·exp(-A·log(N_l + B))), C = (log M - 1)·(B + 1)^A."""
    counts = np.asarray(train_counts, dtype=np.float64)
    c = (np.log(num_train) - 1.0) * (b + 1.0) ** a
    return 1.0 / (1.0 + c * np.exp(-a * np.log(counts + b)))


def psp_at_k(y_true: Matrix, scores: Scores, k: int, propensities: np.ndarray) -> float:
    """PSP@k normalised over the whole test set (pyxclib): sum of y/p in the top k over the best possible."""
    truth = _as_csr(y_true)
    inv = 1.0 / np.asarray(propensities, dtype=np.float64)
    if inv.shape != (truth.shape[1],):
        raise ValueError(f"propensities must have shape [{truth.shape[1]}], got {inv.shape}")
    top = _topk(scores, k, truth.shape[1])
    gained = float((_hits(truth, top) * inv[np.maximum(top, 0)]).sum())
    best = float(best_psp_per_row(truth, inv, k).sum())
    return gained / best if best > 0 else 0.0


def ranking_rows(y_true: Matrix, scores: Scores, name: str, propensities: np.ndarray | None = None) -> np.ndarray:
    """Each example's share of ranking metric `name` (p_at_k, psp_at_k or ndcg_at_k, k a digit): a float64 [n]
    whose mean is the metric, as the functions above compute it (PSP@k's one normaliser over the whole set spread
    evenly). What a paired test of two rankings of the same examples reads (cdgt_keras.stopping.paired_z).

        >>> ranking_rows(np.array([[0, 1, 1], [1, 0, 0]]), np.array([[0.9, 0.8, 0.1], [0.1, 0.2, 0.3]]), "p_at_2")
        array([0.5, 0. ])
    """
    truth, k = _as_csr(y_true), int(name[-1])
    if name.startswith("ndcg"):
        return _ndcg_rows(truth, scores, k)
    top = _topk(scores, k, truth.shape[1])
    hits = _hits(truth, top).astype(np.float64)
    if name.startswith("p_at"):
        return hits.sum(axis=1) / k
    if not name.startswith("psp") or propensities is None:
        raise ValueError(f"ranking_rows: {name!r} is not p_at_k, psp_at_k or ndcg_at_k (psp_at_k needs propensities)")
    inv = 1.0 / np.asarray(propensities, dtype=np.float64)
    best = float(best_psp_per_row(truth, inv, k).sum())
    gained = (hits * inv[np.maximum(top, 0)]).sum(axis=1)
    return gained * truth.shape[0] / best if best > 0 else np.zeros(truth.shape[0])


def best_psp_per_row(truth: sp.csr_matrix, inv_propensity: np.ndarray, k: int) -> np.ndarray:
    """Per example, the largest PSP@k numerator any ranking attains: the sum of its k largest 1/p among its
    positives (PSP@k's normaliser, summed over the examples).

        >>> best_psp_per_row(sp.csr_matrix(np.array([[1, 1, 1], [0, 0, 0]])), np.array([2.0, 5.0, 3.0]), 2)
        array([8., 0.])
    """
    rows = np.repeat(np.arange(truth.shape[0]), np.diff(truth.indptr))
    w = np.asarray(inv_propensity, dtype=np.float64)[truth.indices]
    order = np.lexsort((-w, rows))
    rank = np.arange(order.size) - truth.indptr[rows[order]]
    keep = rank < k
    return np.bincount(rows[order][keep], weights=w[order][keep], minlength=truth.shape[0])


def mean_average_precision(y_true: Matrix, scores: np.ndarray) -> float:
    """Mean over labels with a positive of sklearn-style average precision (tied scores form one threshold).

    AP_l = (1/P_l) · sum over positives i of #positives with score >= s_i / #examples with score >= s_i.
    """
    if isinstance(scores, tuple):
        raise ValueError("mean_average_precision needs dense scores [n, L], not a top-k pair")
    truth = _as_csr(y_true).tocsc()
    truth.sort_indices()
    n = truth.shape[0]
    counts = np.diff(truth.indptr)
    labels = np.flatnonzero(counts)
    if labels.size == 0:
        return 0.0
    total = 0.0
    step = max(1, _CHUNK_ELEMENTS // max(n, 1))
    for start in range(0, labels.size, step):
        cols = labels[start : start + step]
        block = np.ascontiguousarray(np.asarray(scores[:, cols]).T)  # one label per row
        for col, column in zip(cols, block):
            pos = np.sort(column[truth.indices[truth.indptr[col] : truth.indptr[col + 1]]])
            # #examples with score >= pos[j] = #examples whose count of positives <= their score exceeds j
            hist = np.bincount(np.searchsorted(pos, column, side="right"), minlength=pos.size + 1)
            above_all = np.cumsum(hist[::-1])[::-1][1:]
            above_pos = pos.size - np.searchsorted(pos, pos, side="left")
            total += float(np.mean(above_pos / above_all))
    return total / labels.size


def _f1_counts(y_true: Matrix, y_pred: Matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-label (true positives, truth positives, predicted positives) from sparse products."""
    t, p = _as_csr(y_true), _as_csr(y_pred)
    if t.shape != p.shape:
        raise ValueError(f"y_true {t.shape} and y_pred {p.shape} differ in shape")
    col = lambda m: np.asarray(m.sum(axis=0)).ravel()  # noqa: E731
    return col(t.multiply(p)), col(t), col(p)


def _micro(tp: np.ndarray, t: np.ndarray, p: np.ndarray) -> float:
    denom = float(t.sum() + p.sum())
    return 2.0 * float(tp.sum()) / denom if denom > 0 else 0.0


def _macro(tp: np.ndarray, t: np.ndarray, p: np.ndarray) -> float:
    keep = (t + p) > 0
    return float(np.mean(2.0 * tp[keep] / (t[keep] + p[keep]))) if keep.any() else 0.0


def _hamming(tp: np.ndarray, t: np.ndarray, p: np.ndarray, n: int) -> float:
    size = t.size * n
    return float((t.sum() + p.sum() - 2 * tp.sum()) / size) if size else 0.0


def micro_f1(y_true: Matrix, y_pred: Matrix) -> float:
    """F1 from TP, FP, FN summed over all labels; 0.0 when there is nothing to count."""
    return _micro(*_f1_counts(y_true, y_pred))


def macro_f1(y_true: Matrix, y_pred: Matrix) -> float:
    """Mean per-label F1 over labels with a positive in truth or prediction (0.0 if there are none)."""
    return _macro(*_f1_counts(y_true, y_pred))


def rare_f1(y_true: Matrix, y_pred: Matrix, tail_labels: Sequence[int] | np.ndarray) -> float:
    """Micro-F1 restricted to the tail label ids (SPEC §7 Rare-F1)."""
    tp, t, p = _f1_counts(y_true, y_pred)
    tail = np.asarray(tail_labels, dtype=np.int64)
    return _micro(tp[tail], t[tail], p[tail])


def player_subset_f1(probs: np.ndarray, labels: np.ndarray, truth: Matrix, thresholds: np.ndarray,
                     subset: np.ndarray) -> tuple[int, int, float | None]:
    """One player's micro-F1 on those of its labels that lie in `subset` (L_i ∩ head, L_i ∩ tail), deciding
    p > each label's tuned threshold.

    `probs` [n, |labels|] are the player's probabilities for its labels `labels` (ids in [0, L)); `truth` [n, L] and
    `thresholds` [L] cover every label. Returns how many of its labels lie in `subset`, their positives in `truth`,
    and the F1 (None where none of its labels lies in `subset`).

    Example:
        >>> truth = sp.csr_matrix(np.array([[0, 1, 0, 1], [0, 0, 1, 0]]))
        >>> probs = np.array([[0.9, 0.2], [0.1, 0.8]])       # a player owning labels 1 and 2
        >>> player_subset_f1(probs, np.array([1, 2]), truth, np.full(4, 0.5), subset=np.array([0, 1]))
        (1, 1, 1.0)
        >>> player_subset_f1(probs, np.array([1, 2]), truth, np.full(4, 0.5), subset=np.array([3]))
        (0, 0, None)
    """
    labels = np.asarray(labels)
    cols = np.flatnonzero(np.isin(labels, subset))  # the player's columns whose label lies in `subset`
    if not cols.size:
        return 0, 0, None
    owned = labels[cols]
    sub = sp.csr_matrix(truth)[:, owned]
    pred = np.asarray(probs)[:, cols] > np.asarray(thresholds)[owned][None, :]
    return int(cols.size), int(sub.nnz), micro_f1(sub, pred)


def hamming_loss(y_true: Matrix, y_pred: Matrix) -> float:
    """Fraction of the n·L entries where prediction and truth differ."""
    return _hamming(*_f1_counts(y_true, y_pred), _as_csr(y_true).shape[0])


def _restrict_scores(scores: Scores, cols: np.ndarray, num_labels: int) -> Scores:
    """Scores over the label subset `cols` (renumbered 0..|cols|-1); a top-k pair keeps its entries in it."""
    if not isinstance(scores, tuple):
        return np.asarray(scores)[:, cols]
    ids, vals = np.asarray(scores[0], dtype=np.int64), np.asarray(scores[1], dtype=np.float64)
    remap = np.full(num_labels + 1, -1, dtype=np.int64)
    remap[cols] = np.arange(cols.size)
    new = remap[np.where(ids < 0, num_labels, ids)]
    return new, np.where(new < 0, -np.inf, vals)


Counts = tuple[np.ndarray, np.ndarray, np.ndarray]  # per label: true positives, truth positives, predicted


def group_row(truth: sp.csr_matrix, scores: Scores, counts: Counts, average_precision: float,
              props: np.ndarray | None, ks: Sequence[int]) -> dict[str, float]:
    """One report row from a group's truth [n, |group|], its scores (dense or top-k pair), F1 counts and MAP."""
    row = {"micro_f1": _micro(*counts), "macro_f1": _macro(*counts),
           "hamming_loss": _hamming(*counts, truth.shape[0]), "map": average_precision}
    row.update({f"p_at_{k}": precision_at_k(truth, scores, k) for k in ks})
    row.update({f"ndcg_at_{k}": ndcg_at_k(truth, scores, k) for k in ks})
    if props is not None:
        row.update({f"psp_at_{k}": psp_at_k(truth, scores, k, props) for k in ks})
    return row


def grouped_report(row_of: Callable[[str, np.ndarray | None], dict[str, float]], counts: Counts,
                   head_labels: Sequence[int] | np.ndarray,
                   tail_labels: Sequence[int] | np.ndarray) -> dict[str, dict[str, float]]:
    """{"overall", "head", "tail"} rows from `row_of(name, cols)` (cols None: every label), the overall Rare-F1."""
    out = {"overall": row_of("overall", None)}
    tail = np.asarray(tail_labels, dtype=np.int64)
    out["overall"]["rare_f1"] = _micro(*(c[tail] for c in counts))
    for name, labels in (("head", head_labels), ("tail", tail_labels)):
        cols = np.asarray(labels, dtype=np.int64)
        nan = {key: float("nan") for key in out["overall"] if key != "rare_f1"}
        out[name] = nan if cols.size == 0 else row_of(name, cols)
    return out


def report(
    y_true: Matrix,
    scores: Scores,
    y_pred: Matrix,
    *,
    head_labels: Sequence[int] | np.ndarray,
    tail_labels: Sequence[int] | np.ndarray,
    propensities: np.ndarray | None = None,
    ks: Sequence[int] = (1, 3, 5),
) -> dict[str, dict[str, float]]:
    """All SPEC §7 metrics overall and on the head / tail label subsets (ranked within each subset).

    With a top-k pair for `scores`, "map" is NaN (it needs full scores) and a subset ranks only the supplied
    entries that fall in it (missing ranks count as misses). `cdgt_keras.chunked_eval.chunked_report` gives the
    same figures, MAP included, from score chunks without holding [n, L] scores.
    """
    truth, pred = _as_csr(y_true), _as_csr(y_pred)
    num_labels = truth.shape[1]
    props = None if propensities is None else np.asarray(propensities, dtype=np.float64)
    counts = _f1_counts(truth, pred)

    def row_of(_: str, cols: np.ndarray | None) -> dict[str, float]:
        every = cols is None
        sub = truth if every else truth[:, cols]
        sub_scores = scores if every else _restrict_scores(scores, cols, num_labels)
        ap = float("nan") if isinstance(scores, tuple) else mean_average_precision(sub, sub_scores)
        return group_row(sub, sub_scores, counts if every else tuple(c[cols] for c in counts), ap,
                         props if every else None if props is None else props[cols], ks)

    return grouped_report(row_of, counts, head_labels, tail_labels)


def format_report(result: dict[str, dict[str, float]]) -> str:
    """Plain-text table: rows overall/head/tail, values in percent (2 decimals), hamming loss as is."""
    columns: list[str] = []
    for row in result.values():
        columns += [key for key in row if key not in columns]
    width = max(12, *(len(c) + 1 for c in columns))
    lines = ["".ljust(8) + "".join(c.rjust(width) for c in columns)]
    for name, row in result.items():
        cells = []
        for c in columns:
            if c not in row:
                cells.append("-".rjust(width))
            elif c == "hamming_loss":
                cells.append(f"{row[c]:.4f}".rjust(width))
            else:
                cells.append(f"{100 * row[c]:.2f}".rjust(width))
        lines.append(name.ljust(8) + "".join(cells))
    return "\n".join(lines)
