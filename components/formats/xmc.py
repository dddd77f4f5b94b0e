"""Extreme Classification Repository sparse text: a header `num_points num_features num_labels`, then one
line per point `l1,l2,... f:v f:v ...` (0-based ids; the label field may be empty, the line then starts with
a space).

Example:
    >>> h = parse_header("2 5 3", "train.txt")
    >>> parse_line("0,2 1:0.5 4:1", h, "train.txt", 2).labels
    (0, 2)
"""

from __future__ import annotations

from dataclasses import dataclass

from cdgt.components.formats.errors import RecordError
from cdgt.components.formats.record import Record
from cdgt.components.formats.values import finite_float, index, unique


@dataclass(frozen=True)
class XmcHeader:
    """The three counts of the first line."""

    num_points: int
    num_features: int
    num_labels: int


def parse_header(line: str, file: str) -> XmcHeader:
    """'num_points num_features num_labels' -> XmcHeader; anything else is a bad_header error on line 1."""
    fields = line.split()
    if len(fields) != 3:
        raise RecordError(file, 1, "bad_header", f"header must be 3 integers, got {line.strip()[:60]!r}")
    counts = [index(v, None, file, 1, "header count", "bad_header") for v in fields]
    return XmcHeader(*counts)


def parse_line(line: str, header: XmcHeader, file: str, number: int, key: str | None = None) -> Record:
    """One point -> Record with sparse features and label ids, every id and value checked."""
    if not line.strip():
        raise RecordError(file, number, "blank_line", "blank line where a data point was expected")
    if "\t" in line:
        raise RecordError(file, number, "tab_separator", "a tab in the line: tabs are not separators in XMC "
                          "files; put one space between the label list and each id:value")
    if line[0] == " ":
        label_field, rest = "", line
    else:
        label_field, _, rest = line.partition(" ")
        if ":" in label_field:  # 'f:v' first: the label field is empty and the line lacks its leading space
            label_field, rest = "", line
    labels = [
        index(v, header.num_labels, file, number, "label id", "label_id_out_of_range")
        for v in label_field.split(",")
        if label_field
    ]
    ids: list[int] = []
    values: list[float] = []
    for token in rest.split():
        feature, sep, value = token.partition(":")
        if not sep:
            raise RecordError(file, number, "wrong_field_count", f"feature {token!r} is not 'id:value'")
        ids.append(index(feature, header.num_features, file, number, "feature id", "feature_id_out_of_range"))
        values.append(finite_float(value, file, number, f"feature {feature}"))
    unique(ids, file, number, "feature id", "duplicate_feature")
    return Record(
        key or f"{file}:{number}",
        "",
        unique(labels, file, number, "label"),
        feature_ids=tuple(ids),
        feature_values=tuple(values),
    )


def count_mismatch(file: str, header: XmcHeader, seen: int) -> RecordError | None:
    """The header_count_mismatch error when the body holds another number of points than the header says."""
    if seen == header.num_points:
        return None
    return RecordError(
        file, 1, "header_count_mismatch", f"header says {header.num_points} points, the file has {seen}"
    )
