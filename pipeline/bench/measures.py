"""What a benchmark run records beyond cdgt_keras.metrics.report: curves and the players' specialisation.

All inputs are test-split arrays; outputs are small JSON-ready dicts (tens of numbers, never [n, L]).

Example:
    >>> y = sp.csr_matrix(np.array([[1, 0], [0, 1]]))
    >>> tail_pr_curve(y, np.array([[0.9, 0.2], [0.1, 0.8]]), np.array([1]), grid=np.array([0.5]))["precision"]
    [1.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from cdgt_keras.labels import label_order
from cdgt_keras.metrics import micro_f1


def tail_pr_curve(y_true: sp.spmatrix, scores: np.ndarray, tail: np.ndarray,
                  grid: np.ndarray | None = None) -> dict[str, list[float]]:
    """Micro precision and recall over the tail labels when one threshold t sweeps `grid` (default 0.02..0.98)."""
    grid = np.linspace(0.02, 0.98, 49) if grid is None else np.asarray(grid, dtype=np.float64)
    truth = sp.csr_matrix(y_true)[:, tail].toarray() > 0
    s = np.asarray(scores)[:, tail]
    precision, recall = [], []
    for t in grid:
        pred = s > t
        tp = float((pred & truth).sum())
        precision.append(tp / pred.sum() if pred.sum() else 1.0)
        recall.append(tp / truth.sum() if truth.sum() else 0.0)
    return {"threshold": [round(float(t), 4) for t in grid], "precision": precision, "recall": recall}


def long_tail_curve(y_true: sp.spmatrix, y_pred: np.ndarray | sp.spmatrix, train_counts: np.ndarray,
                    bins: int = 10) -> dict[str, list[float]]:
    """Micro-F1 in `bins` groups of labels of equal size, from the most to the least frequent (SPEC §1 order)."""
    order = label_order(np.asarray(train_counts, dtype=np.float64))
    groups = [g for g in np.array_split(order, min(bins, order.size)) if g.size]
    truth, pred = sp.csr_matrix(y_true), sp.csr_matrix(y_pred)
    return {
        "bin": list(range(1, len(groups) + 1)),
        "mean_train_count": [float(np.mean(np.asarray(train_counts)[g])) for g in groups],
        "f1": [micro_f1(truth[:, g], pred[:, g]) for g in groups],
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
    rank among the players covering any such label (1 = best; None where it covers none)."""
    truth = sp.csr_matrix(y_true)
    rows = []
    for probs, labels in zip(players, player_labels):
        labels = np.asarray(labels)
        row: dict[str, Any] = {"labels": int(labels.size)}
        for name, subset in (("head", head), ("tail", tail)):
            cols = np.flatnonzero(np.isin(labels, subset))
            row[f"{name}_labels"] = int(cols.size)
            pred = probs[:, cols] > np.asarray(thresholds)[labels[cols]][None, :]
            row[f"{name}_f1"] = micro_f1(truth[:, labels[cols]], pred) if cols.size else None
        rows.append(row)
    for name in ("head", "tail"):
        ranked = sorted((r[f"{name}_f1"], -i) for i, r in enumerate(rows) if r[f"{name}_f1"] is not None)[::-1]
        for rank, (_, neg) in enumerate(ranked, start=1):
            rows[-neg][f"{name}_rank"] = rank
        for r in rows:
            r.setdefault(f"{name}_rank", None)
    return rows
