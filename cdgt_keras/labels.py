"""Label statistics and the frequency-based overlapping partition (SPEC §1-2).

Example:
    >>> counts, freq = label_frequencies([[0, 1], [0], [2]], num_labels=4)
    >>> [a.tolist() for a in partition_labels(freq, n_players=2, overlap=0.0)]
    [[0, 1], [2, 3]]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import scipy.sparse as sp

LabelMatrix = np.ndarray | sp.spmatrix | Iterable[Sequence[int]]


def label_frequencies(labels: LabelMatrix, num_labels: int) -> tuple[np.ndarray, np.ndarray]:
    """Count positives per label and freq(l) = count / M, M the number of examples (SPEC §1).

    `labels` is a 0/1 matrix [M, L] (dense or scipy-sparse) or an iterable of label-id lists.
    """
    if num_labels < 1:
        raise ValueError(f"num_labels must be >= 1, got {num_labels}")
    if isinstance(labels, np.ndarray) or sp.issparse(labels):
        if labels.ndim != 2 or labels.shape[1] != num_labels:
            raise ValueError(f"labels must have shape [M, {num_labels}], got {labels.shape}")
        num_examples = labels.shape[0]
        counts = np.asarray((labels != 0).sum(axis=0)).ravel().astype(np.int64)
    else:
        counts = np.zeros(num_labels, dtype=np.int64)
        num_examples = 0
        for row, ids in enumerate(labels):
            num_examples += 1
            ids = np.asarray(ids, dtype=np.int64)
            if ids.size and (ids.min() < 0 or ids.max() >= num_labels):
                raise ValueError(f"example {row}: label id out of range [0, {num_labels}): {ids.tolist()}")
            counts[np.unique(ids)] += 1
    freq = counts / max(num_examples, 1)
    return counts, freq


def label_order(freq: np.ndarray) -> np.ndarray:
    """Label ids sorted by frequency descending, ties broken by label id ascending (SPEC §1)."""
    freq = np.asarray(freq, dtype=np.float64)
    return np.lexsort((np.arange(freq.size), -freq))


def _fraction_count(fraction: float, total: int) -> int:
    """ceil(fraction * total), robust to float noise (0.2 * 15 is 3, not 4)."""
    return min(total, math.ceil(round(fraction * total, 9)))


def head_tail_split(
    freq: np.ndarray, head_fraction: float = 0.2, tail_fraction: float = 0.2
) -> tuple[np.ndarray, np.ndarray]:
    """Head = the top `head_fraction` of labels in frequency order, tail = the bottom `tail_fraction`.

    Counts are ceil(fraction * L). Labels with no training positive always belong to the tail.
    Returns two sorted int64 arrays of label ids.
    """
    for name, value in (("head_fraction", head_fraction), ("tail_fraction", tail_fraction)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {value}")
    freq = np.asarray(freq, dtype=np.float64)
    order = label_order(freq)
    n_head = _fraction_count(head_fraction, freq.size)
    n_tail = _fraction_count(tail_fraction, freq.size)
    head = order[:n_head]
    tail = np.union1d(order[freq.size - n_tail :], np.flatnonzero(freq == 0))
    head = np.setdiff1d(head, tail)
    return np.sort(head).astype(np.int64), tail.astype(np.int64)


def partition_bounds(num_labels: int, n_players: int, overlap: float) -> list[tuple[int, int]]:
    """Each player's [start, end) range of sorted positions: core block plus O on each side (SPEC §2).

    S = floor(L / N), O = floor(S * rho / 2); the last player's core runs to L - 1 so every label is covered.
    """
    if n_players < 1:
        raise ValueError(f"n_players must be >= 1, got {n_players}")
    if not 0.0 <= overlap < 1.0:
        raise ValueError(f"overlap must be in [0, 1), got {overlap}")
    if num_labels < n_players:
        raise ValueError(f"need at least one label per player: {num_labels} labels < n_players={n_players}")
    size = num_labels // n_players
    extra = math.floor(round(size * overlap / 2, 9))  # 100 * 0.58 / 2 is 29, not 28.999999999999996
    bounds = []
    for i in range(n_players):
        core_start, core_end = i * size, (num_labels if i == n_players - 1 else (i + 1) * size)
        bounds.append((max(0, core_start - extra), min(num_labels, core_end + extra)))
    return bounds


def partition_labels(freq: np.ndarray, n_players: int, overlap: float) -> list[np.ndarray]:
    """Split the frequency-sorted labels into N overlapping blocks, one per player.

    Returns N sorted int64 arrays of label ids; together they cover every label.
    """
    order = label_order(freq)
    return [np.sort(order[a:b]).astype(np.int64) for a, b in partition_bounds(order.size, n_players, overlap)]


def core_labels(freq: np.ndarray, n_players: int) -> list[np.ndarray]:
    """Each player's core block (the partition with no overlap): the labels a player 'owns'."""
    return partition_labels(freq, n_players, 0.0)
