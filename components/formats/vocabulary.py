"""The label vocabulary of a build: which labels exist, their final ids and names, and the training counts
they are chosen by (`--min-label-count K` keeps labels with >= K training positives, in their order).

Fixed vocabularies (ARFF, XMC, a CSV vocabulary file) keep source order; open ones (Debian, CSV label names)
are all names seen in any split, sorted; open integer ids (CSV ids without L) become 0..max id.

Example:
    >>> v = build_vocabulary({"b": [2, 2], "a": [3, 1], "c": [1, 0]}, min_count=1)
    >>> v.names, v.remap_labels(("c", "a", "b"))
    (['a', 'b'], (0, 1))
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

Tally = dict[Hashable, list[int]]  # raw label -> [positives in all splits, positives in train]


@dataclass
class Vocabulary:
    """Final label names, raw -> final id map (None = identity), final training counts, rare labels."""

    names: list[str]
    remap: dict[Hashable, int] | None = None
    train_counts: list[int] | None = None
    dropped: int = 0
    rare: list[int] = field(default_factory=list)

    def remap_labels(self, labels: Iterable[Hashable]) -> tuple[int, ...]:
        """Raw labels -> final ids, leaving out labels that were dropped (below the minimum count)."""
        if self.remap is None:
            return tuple(labels)  # type: ignore[arg-type]
        return tuple(self.remap[label] for label in labels if label in self.remap)


def tally(pairs: Iterable[tuple[bool, Sequence[Hashable]]], into: Tally | None = None) -> Tally:
    """Add (is_train, raw labels) pairs to a tally."""
    result: Tally = {} if into is None else into
    for is_train, labels in pairs:
        for label in labels:
            entry = result.setdefault(label, [0, 0])
            entry[0] += 1
            entry[1] += int(is_train)
    return result


def merge_tallies(tallies: Iterable[Tally]) -> Tally:
    merged: Tally = {}
    for one in tallies:
        for label, (total, train) in one.items():
            entry = merged.setdefault(label, [0, 0])
            entry[0] += total
            entry[1] += train
    return merged


def build_vocabulary(
    counts: Mapping[Hashable, Sequence[int]],
    fixed_names: Sequence[str] | None = None,
    open_ids: bool = False,
    min_count: int = 0,
) -> Vocabulary:
    """Choose the labels and their ids from a tally (see the module docstring for the three cases)."""
    if fixed_names is not None:
        candidates: list[Hashable] = list(range(len(fixed_names)))
        name_of = {i: fixed_names[i] for i in range(len(fixed_names))}
    elif open_ids:
        top = max((int(k) for k in counts), default=-1)  # type: ignore[call-overload]
        candidates = list(range(top + 1))
        name_of = {i: str(i) for i in candidates}
    else:
        candidates = sorted(counts, key=str)
        name_of = {c: str(c) for c in candidates}
    kept = [c for c in candidates if counts.get(c, (0, 0))[1] >= min_count]
    identity = kept == candidates and all(isinstance(c, int) for c in candidates)
    return Vocabulary(
        names=[name_of[c] for c in kept],
        remap=None if identity else {c: i for i, c in enumerate(kept)},
        train_counts=[int(counts.get(c, (0, 0))[1]) for c in kept],
        dropped=len(candidates) - len(kept),
    )
