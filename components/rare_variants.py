"""Rare-focused "-R" variants (a harder long tail): remove a seeded fraction of the training positives of the k rarest
labels; validation and test are untouched.

Which labels: the last k of the frequency order (most frequent first) among labels with at least one training positive
(a label with none has nothing to remove). Which positives: for each such label, its round(fraction · n)
positives with the smallest md5("rare:<seed>:<label>:<example id>"), so the choice is exact, seeded and
independent of the runner's ordering.

Example:
    >>> rare_labels([5, 1, 0, 2], k=2).tolist()
    [1, 3]
    >>> chosen([(0.9, "a"), (0.1, "b"), (0.5, "c")], fraction=0.5)
    ['b', 'c']
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from cdgt.components.formats.record import Record
from cdgt.components.formats.splits import unit_hash
from cdgt_keras.labels import label_order


def rare_labels(train_counts: Iterable[int], k: int) -> np.ndarray:
    """The k rarest labels with >= 1 training positive (frequency order, ties to the higher id), sorted."""
    counts = np.asarray(list(train_counts), dtype=np.int64)
    order = label_order(counts.astype(np.float64))
    present = order[counts[order] > 0]
    return np.sort(present[max(0, present.size - k) :]).astype(np.int64)


def removal_rank(seed: int, label: int, example_id: str) -> float:
    """The seeded rank of one positive; the smallest ranks of a label are removed."""
    return unit_hash(f"{seed}:{label}:{example_id}", salt="rare:")


def chosen(entries: Iterable[tuple[float, str]], fraction: float) -> list[str]:
    """Ids of the round(fraction · n) entries with the smallest rank (round half up)."""
    ranked = sorted(entries)
    count = min(len(ranked), math.floor(fraction * len(ranked) + 0.5))
    return [example_id for _, example_id in ranked[:count]]


def without_removed(record: Record, removals: Mapping[str, Iterable[int]]) -> Record:
    """The record minus its removed positives (training records only)."""
    if record.split != "train" or record.id not in removals:
        return record
    drop = set(removals[record.id])
    return record.with_labels(tuple(label for label in record.labels if label not in drop))


def removal_plan(train_records: Any, rare_view: Any, seed: int, fraction: float) -> Any:
    """Beam: remapped training records -> singleton {example id: [labels to remove]}."""
    import apache_beam as beam

    def positives(record: Record, rare: Any) -> Iterable[tuple[int, tuple[float, str]]]:
        wanted = set(rare)
        for label in record.labels:
            if label in wanted:
                yield label, (removal_rank(seed, label, record.id), record.id)

    def pick(item: tuple[int, Iterable[tuple[float, str]]]) -> Iterable[tuple[str, int]]:
        label, entries = item
        return [(example_id, label) for example_id in chosen(entries, fraction)]

    return (
        train_records
        | "RarePositives" >> beam.FlatMap(positives, rare_view)
        | "RareByLabel" >> beam.GroupByKey()
        | "RareChoose" >> beam.FlatMap(pick)
        | "RareList" >> beam.combiners.ToList()  # small: about fraction · (positives of k labels) pairs
        | "RarePlan" >> beam.Map(_plan)
    )


def _plan(pairs: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    """[(id, label), ...] -> {id: sorted labels}."""
    plan: dict[str, list[int]] = {}
    for example_id, label in pairs:
        plan.setdefault(example_id, []).append(label)
    return {example_id: sorted(labels) for example_id, labels in plan.items()}
