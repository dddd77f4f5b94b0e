"""Checked conversions of text fields to numbers, raising RecordError with file and line.

Example:
    >>> finite_float("0.25", "f.csv", 2, "column 'x'")
    0.25
    >>> index("7", 10, "f.txt", 3, "feature id", "feature_id_out_of_range")
    7
    >>> first_repeat(["a", "b", "a"])
    ('a', 0, 2)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from cdgt.components.formats.errors import RecordError


def finite_float(text: str, file: str, line: int, what: str) -> float:
    """float(text), rejecting non-numbers (non_numeric) and NaN / inf (non_finite)."""
    try:
        value = float(text)
    except ValueError:
        raise RecordError(file, line, "non_numeric", f"{what}: {text.strip()!r} is not a number") from None
    if not math.isfinite(value):
        raise RecordError(file, line, "non_finite", f"{what}: {text.strip()!r} is NaN or infinite")
    return value


def index(text: str, limit: int | None, file: str, line: int, what: str, reason: str) -> int:
    """int(text) in [0, limit) (no upper bound when limit is None); `reason` names an out-of-range id."""
    try:
        value = int(text)
    except ValueError:
        raise RecordError(file, line, "non_numeric", f"{what} {text.strip()!r} is not an integer") from None
    if value < 0 or (limit is not None and value >= limit):
        bound = f"[0, {limit})" if limit is not None else ">= 0"
        raise RecordError(file, line, reason, f"{what} {value} out of range {bound}")
    return value


def unique(items: list, file: str, line: int, what: str, reason: str = "duplicate_label") -> tuple:
    """`items` as a tuple, rejecting repeats: 'duplicate label 3'."""
    seen: set = set()
    for item in items:
        if item in seen:
            raise RecordError(file, line, reason, f"duplicate {what} {item!r}")
        seen.add(item)
    return tuple(items)


def first_repeat(names: Sequence[str]) -> tuple[str, int, int] | None:
    """(name, first position, second position) of the first name that occurs twice, else None."""
    seen: dict[str, int] = {}
    for position, name in enumerate(names):
        if name in seen:
            return name, seen[name], position
        seen[name] = position
    return None
