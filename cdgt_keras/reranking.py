"""Propensity re-ranking: the ranking's order leant towards PSP@k, the first label kept, its exponent tuned on
validation.

Ranking each row's labels by their probability p maximises P@k; ranking them by p / propensity maximises PSP@k,
whose hits weigh 1 / propensity (Wydmuch et al. 2021, "Propensity-scored probabilistic label trees"). Between the
two, `reranked` orders the labels by p x (propensity_min / propensity)^a, each factor in (0, 1] and 1 for the rarest
label, except the row's most probable label, which keeps its score p and so its first place: P@1 stays the model's
own, and the other slots lean towards rarer labels that are nearly as probable. `pick_exponent` takes the a of a
grid with the best validation PSP@k among those whose validation P@k is at most `slack` below the model's own
(a = 0), so the re-ranking never costs validation P@k more than the user allows (config `rerank_slack`).

Example:
    >>> p = np.array([[0.9, 0.6, 0.5]])
    >>> log_w = rerank_log_weights(np.array([0.9, 0.8, 0.2]))        # propensities: label 2 is rare
    >>> np.round(reranked_np(p, log_w, 1.0), 3)                       # label 0 stays first, label 2 passes label 1
    array([[0.9 , 0.15, 0.5 ]])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["pick_exponent", "rerank_log_weights", "reranked", "reranked_np", "tune_reranking"]


def rerank_log_weights(propensities: np.ndarray) -> np.ndarray:
    """log(propensity_min / propensity) per label, <= 0 (0 for the rarest): the re-ranking's factor is its exp x a.

        >>> rerank_log_weights(np.array([0.5, 0.25])).round(4).tolist()
        [-0.6931, 0.0]
    """
    logs = np.log(np.asarray(propensities, dtype=np.float64))
    if logs.size == 0 or not np.all(np.isfinite(logs)):
        raise ValueError("rerank_log_weights needs finite propensities > 0 for every label")
    return logs.min() - logs


def reranked_np(scores: np.ndarray, log_weights: np.ndarray, exponent: float) -> np.ndarray:
    """`scores` [n, L] x exp(exponent x log_weights), each row's highest score kept as it is (numpy; `reranked` is
    the same in TensorFlow). Exponent 0: the scores themselves.

        >>> reranked_np(np.array([[0.2, 0.8]]), np.array([0.0, -1.0]), 0.5).round(4).tolist()   # 0.8 stays
        [[0.2, 0.8]]
    """
    scores = np.asarray(scores)
    if exponent == 0.0:
        return scores
    out = scores * np.exp(exponent * np.asarray(log_weights)).astype(scores.dtype)[None, :]
    rows, top = np.arange(scores.shape[0]), np.argmax(scores, axis=1)
    out[rows, top] = scores[rows, top]
    return out


def reranked(scores: Any, log_weights: Any, exponent: Any) -> Any:
    """`reranked_np` in TensorFlow ops ([B, L] scores, [L] log weights, a scalar exponent), for the model's ranking
    answer and the exported SavedModel: the row's first label (argmax; ties to the lower id, as in `tf.math.top_k`)
    keeps its score.

        >>> import tensorflow as tf
        >>> out = reranked(tf.constant([[0.9, 0.6, 0.5]]), tf.constant([-1.5, -1.386, 0.0]), tf.constant(1.0))
        >>> [round(float(v), 3) for v in out.numpy()[0]]
        [0.9, 0.15, 0.5]
    """
    import tensorflow as tf

    factor = tf.exp(tf.cast(exponent, scores.dtype) * tf.cast(log_weights, scores.dtype))
    first = tf.one_hot(tf.argmax(scores, axis=1), tf.shape(scores)[1], on_value=True, off_value=False)
    return tf.where(first, scores, scores * factor[tf.newaxis, :])


def pick_exponent(chunks: Callable[[], Iterable[tuple[np.ndarray, Any]]], grid: Iterable[float], slack: float,
                  k: int, propensities: np.ndarray) -> tuple[float, dict[float, tuple[float, float]]]:
    """(the exponent, {exponent: (validation P@k, PSP@k numerator per row and slot)}) over 0 and `grid`.

    `chunks()` yields (the model's ranking scores [n, L], labels [n, L]) chunk by chunk of validation. The exponent
    is the one with the most propensity-weighted hits in the top k (PSP@k's numerator: its denominator does not
    depend on the ranking) among those whose P@k is at least the model's own (exponent 0) minus `slack` (a fraction:
    0.003 = 0.3 points); ties go to the smaller exponent, so a re-ranking that adds nothing stays off.

        >>> s = np.array([[0.9, 0.5, 0.4], [0.8, 0.6, 0.5]])
        >>> y = sp.csr_matrix([[1, 0, 1], [1, 1, 0]])             # label 2 is rare: its hit weighs 4
        >>> a, table = pick_exponent(lambda: [(s, y)], [1.0], slack=0.0, k=2,
        ...                          propensities=np.array([1.0, 1.0, 0.25]))
        >>> a, table[0.0], table[1.0]      # a = 1 puts label 2 second in both rows: P@2 the same, more weight
        (1.0, (0.75, 0.75), (0.75, 1.5))
    """
    grid = sorted({0.0, *(float(a) for a in grid)})
    inverse = 1.0 / np.asarray(propensities, dtype=np.float64)
    log_weights = rerank_log_weights(propensities)
    hits, weighted, total = dict.fromkeys(grid, 0), dict.fromkeys(grid, 0.0), 0
    for scores, labels in chunks():
        truth = sp.csr_matrix(labels).toarray() > 0
        total += scores.shape[0]
        for a in grid:
            ranked = reranked_np(scores, log_weights, a)
            top = np.argpartition(-ranked, k - 1, axis=1)[:, :k] if k < ranked.shape[1] else \
                np.tile(np.arange(ranked.shape[1]), (ranked.shape[0], 1))
            found = np.take_along_axis(truth, top, axis=1)
            hits[a] += int(found.sum())
            weighted[a] += float((found * inverse[top]).sum())
    slots = k * max(total, 1)
    table = {a: (hits[a] / slots, weighted[a] / slots) for a in grid}
    floor = table[0.0][0] - float(slack)
    allowed = [a for a in grid if table[a][0] >= floor - 1e-12]
    best = max(table[a][1] for a in allowed)
    return min(a for a in allowed if table[a][1] >= best * (1 - 1e-9)), table


def tune_reranking(model: Any, val_x: Any, val_y: Any, batch_size: int = 256, rows: int = 2048,
                   answers: Callable[[], Iterable[tuple[np.ndarray, Any]]] | None = None
                   ) -> dict[float, tuple[float, float]]:
    """Set `model.rerank_exponent` (config rerank_slack > 0; else nothing) by `pick_exponent` on the model's
    ranking answer over validation, chunks of `rows`, k the config's `memory_tuning_k`; returns (and keeps in
    `model.rerank_tuning`) the table. Run last, once the memories' weights are set (`settle` calls it, with
    `answers`: (the model's answer, labels) chunk by chunk, blended from the scores it holds, so that the memories
    are not asked again; without it the model answers validation here)."""
    config = model.cdgt_config
    if getattr(model, "rerank_exponent", None) is None or config.rerank_slack <= 0:
        return {}
    from cdgt_keras.inputs import batch_scorer
    from cdgt_keras.metrics import propensities

    model.rerank_exponent.assign(0.0)
    if answers is None:
        score = batch_scorer(lambda x: model(x, training=False))
        starts = range(0, val_x.shape[0], rows)
        answers = lambda: ((score(val_x[s:s + rows], batch_size), val_y[s:s + rows]) for s in starts)  # noqa: E731
    props = propensities(model.label_freq * model.num_train, model.num_train, config.psp_a, config.psp_b)
    exponent, table = pick_exponent(answers, config.rerank_exponents, config.rerank_slack, config.memory_tuning_k,
                                    props)
    model.rerank_exponent.assign(exponent)
    model.rerank_tuning = table
    return table
