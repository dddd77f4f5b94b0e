"""The CombineFns of the ingestion job: label tallies, per-split counts, and the first bad record.

Example:
    >>> fn = SplitCountsFn()
    >>> from cdgt.components.formats.record import Record
    >>> fn.add_input(fn.create_accumulator(), Record("a", "train", (1, 2)))
    {'train': {'examples': 1, 'no_labels': 0, 'positives': 2}}
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import apache_beam as beam

from cdgt.components.formats.errors import RecordError
from cdgt.components.formats.record import Record
from cdgt.components.formats.vocabulary import merge_tallies, tally


class TallyFn(beam.CombineFn):
    """(is_train, raw labels) -> {raw label: [positives, training positives]}."""

    def create_accumulator(self) -> dict:
        return {}

    def add_input(self, acc: dict, pair: tuple[bool, Sequence[Any]]) -> dict:
        return tally([pair], acc)

    def merge_accumulators(self, accs: Iterable[dict]) -> dict:
        return merge_tallies(accs)

    def extract_output(self, acc: dict) -> dict:
        return acc


class SplitCountsFn(beam.CombineFn):
    """Records -> {split: {examples, no_labels, positives}}."""

    def create_accumulator(self) -> dict:
        return {}

    def add_input(self, acc: dict, record: Record) -> dict:
        entry = acc.setdefault(record.split, {"examples": 0, "no_labels": 0, "positives": 0})
        entry["examples"] += 1
        entry["no_labels"] += int(not record.labels)
        entry["positives"] += len(record.labels)
        return acc

    def merge_accumulators(self, accs: Iterable[dict]) -> dict:
        merged: dict = {}
        for acc in accs:
            for split, entry in acc.items():
                target = merged.setdefault(split, {"examples": 0, "no_labels": 0, "positives": 0})
                for key, value in entry.items():
                    target[key] += value
        return merged

    def extract_output(self, acc: dict) -> dict:
        return acc


def _position(error: RecordError) -> tuple[str, int, int | str]:
    """Sort key of a bad record: file, then line (numbers before package names)."""
    where = error.where
    return (error.file, 0, where) if isinstance(where, int) else (error.file, 1, str(where))


class FirstRejectFn(beam.CombineFn):
    """RecordErrors -> the first by file and line (None when there are none): the same one on every run."""

    def create_accumulator(self) -> RecordError | None:
        return None

    def add_input(self, acc: RecordError | None, error: RecordError) -> RecordError | None:
        return error if acc is None or _position(error) < _position(acc) else acc

    def merge_accumulators(self, accs: Iterable[RecordError | None]) -> RecordError | None:
        found = [a for a in accs if a is not None]
        return min(found, key=_position) if found else None

    def extract_output(self, acc: RecordError | None) -> RecordError | None:
        return acc
