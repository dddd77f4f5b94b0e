"""What a benchmark run records beyond cdgt_keras.metrics.report: curves and the players' specialisation.

Inputs are what a chunked evaluation keeps of the test split's scores (per-label counts, top-k pairs, threshold
counts; cdgt_keras.chunked_eval), never [n, L]; outputs are small JSON-ready dicts (tens of numbers).

Example:
    >>> counts = ThresholdCounts(1, grid=[0.5])
    >>> counts.add(np.array([[0.9], [0.1]]), sp.csr_matrix(np.array([[1], [1]])))
    >>> tail_pr_curve(counts)["precision"], tail_pr_curve(counts)["recall"]
    ([1.0], [0.5])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from cdgt_keras.labels import label_order
from cdgt_keras.metrics import Counts, _as_csr, _hits, _micro, player_subset_f1
from cdgt_keras.thresholds import ThresholdCounts

TAIL_PR_GRID = np.linspace(0.02, 0.98, 49)  # the thresholds the tail precision-recall curve sweeps


def tail_pr_curve(counts: ThresholdCounts) -> dict[str, list[float]]:
    """Micro precision and recall over the labels `counts` holds (the tail's: a `ThresholdCounts` over the tail
    labels' scores, grid TAIL_PR_GRID) when one threshold t sweeps its grid; precision 1 where nothing is
    predicted."""
    tp, predicted = counts.true_pos.sum(axis=0), counts.predicted.sum(axis=0)
    positives = float(counts.positives.sum())
    precision = [float(t / p) if p else 1.0 for t, p in zip(tp, predicted)]
    recall = [float(t / positives) if positives else 0.0 for t in tp]
    return {"threshold": [round(float(t), 4) for t in counts.grid], "precision": precision, "recall": recall}


def frequency_buckets(y_true: sp.spmatrix, top: tuple[np.ndarray, np.ndarray], counts: Counts,
                      train_counts: np.ndarray, k: int = 5) -> dict[str, list]:
    """Quality by label frequency: the labels in buckets of their training count (0, 1, 2, 3-4, 5-8, 9-16, ...:
    powers of two), and per bucket its labels, its test positives, the micro-F1 of the decisions on its labels
    (`counts`: per-label true positives, truth positives, predicted, at the tuned thresholds) and R@k, the share
    of its test positives ranked in the top k of their example (`top`: the top-k ids and scores of every test
    row). Only buckets holding a label are listed.

    Example:
        >>> y = sp.csr_matrix(np.array([[1, 0, 1], [0, 1, 0]]))
        >>> top = (np.array([[0, 1], [2, 1]]), np.array([[0.9, 0.5], [0.8, 0.7]]))
        >>> counts = (np.array([1, 1, 0]), np.array([1, 1, 1]), np.array([1, 2, 1]))
        >>> out = frequency_buckets(y, top, counts, np.array([40, 2, 1]), k=2)
        >>> out["train_count"], out["recall_at_k"], out["f1"]
        (['1', '2', '33-64'], [0.0, 1.0, 1.0], [0.0, 0.6666666666666666, 1.0])
    """
    train_counts = np.asarray(train_counts, dtype=np.int64)
    bucket = np.where(train_counts > 0, np.ceil(np.log2(np.maximum(train_counts, 1))).astype(np.int64) + 1, 0)
    truth = sp.csr_matrix(y_true)
    ids = np.asarray(top[0])[:, :k]
    hits = _hits(_as_csr(truth), ids)
    found = np.bincount(bucket[ids[hits]], minlength=bucket.max() + 1)
    test_pos = np.bincount(bucket[truth.indices], minlength=bucket.max() + 1)
    tp, positives, predicted = (np.bincount(bucket, weights=c, minlength=bucket.max() + 1) for c in counts)
    rows: dict[str, list] = {"train_count": [], "labels": [], "test_positives": [], "f1": [], "recall_at_k": []}
    for b in np.unique(bucket):
        low, high = (0, 0) if b == 0 else (2 ** (b - 2) + 1 if b > 1 else 1, 2 ** (b - 1))
        rows["train_count"].append(str(low) if low == high else f"{low}-{high}")
        rows["labels"].append(int((bucket == b).sum()))
        rows["test_positives"].append(int(test_pos[b]))
        denom = positives[b] + predicted[b]
        rows["f1"].append(float(2 * tp[b] / denom) if denom else 0.0)
        rows["recall_at_k"].append(float(found[b] / test_pos[b]) if test_pos[b] else 0.0)
    return {"k": k, **rows}


def long_tail_curve(counts: Counts, train_counts: np.ndarray, bins: int = 10) -> dict[str, list[float]]:
    """Micro-F1 in `bins` groups of labels of equal size, from the most to the least frequent (SPEC §1 order), from
    the per-label counts of the decisions (true positives, truth positives, predicted)."""
    order = label_order(np.asarray(train_counts, dtype=np.float64))
    groups = [g for g in np.array_split(order, min(bins, order.size)) if g.size]
    tp, positives, predicted = (np.asarray(c) for c in counts)
    return {
        "bin": list(range(1, len(groups) + 1)),
        "mean_train_count": [float(np.mean(np.asarray(train_counts)[g])) for g in groups],
        "f1": [_micro(tp[g], positives[g], predicted[g]) for g in groups],
    }


def player_probs(model: Any, features: Any, batch_size: int) -> list[np.ndarray]:
    """Each player's probabilities [n, |L_i|] over model.layout.player_labels[i] (model(x, return_players=True))."""
    from cdgt_keras.inputs import make_dataset

    parts: list[list[np.ndarray]] = [[] for _ in model.layout.player_labels]
    for x in make_dataset(features, batch_size=batch_size):
        for i, p in enumerate(model(x, return_players=True)["players"]):
            parts[i].append(np.asarray(p))
    return [np.concatenate(p) for p in parts]


def specialisation(players: list[np.ndarray], player_labels: list[np.ndarray], y_true: sp.spmatrix,
                   thresholds: np.ndarray, head: np.ndarray, tail: np.ndarray) -> list[dict[str, Any]]:
    """Each player's micro-F1 on L_i ∩ L_H and L_i ∩ L_T (decisions at the tuned per-label thresholds) and its
    rank among the players covering any such label (1 = best; None where it covers none); the F1 is the library's
    (cdgt_keras.metrics.player_subset_f1), which the trainer's TensorBoard panel reads too."""
    truth = sp.csr_matrix(y_true)
    rows = []
    for probs, labels in zip(players, player_labels):
        labels = np.asarray(labels)
        row: dict[str, Any] = {"labels": int(labels.size)}
        for name, subset in (("head", head), ("tail", tail)):
            row[f"{name}_labels"], _, row[f"{name}_f1"] = player_subset_f1(probs, labels, truth, thresholds, subset)
        rows.append(row)
    for name in ("head", "tail"):
        ranked = sorted((r[f"{name}_f1"], -i) for i, r in enumerate(rows) if r[f"{name}_f1"] is not None)[::-1]
        for rank, (_, neg) in enumerate(ranked, start=1):
            rows[-neg][f"{name}_rank"] = rank
        for r in rows:
            r.setdefault(f"{name}_rank", None)
    return rows
