"""CSV: a header row, numeric feature columns, one label column holding a delimiter-separated label list
(names, or integer ids), and optionally an id column.

Example:
    >>> layout = CsvLayout.from_header(["x1", "x2", "labels"], "t.csv")
    >>> parse_row(["0.5", "1", "cat|dog"], layout, "t.csv", 2).labels
    ('cat', 'dog')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cdgt.components.formats.errors import RecordError, SourceError
from cdgt.components.formats.record import Record
from cdgt.components.formats.values import finite_float, first_repeat, index, unique


@dataclass(frozen=True)
class CsvLayout:
    """Which column is what; labels are names unless `label_ids`, then ids < num_labels (if given)."""

    columns: tuple[str, ...]
    label_column: int
    id_column: int | None = None
    delimiter: str = "|"
    label_ids: bool = False
    num_labels: int | None = None

    @classmethod
    def from_header(
        cls,
        header: Sequence[str],
        file: str,
        label_column: str = "labels",
        id_column: str | None = None,
        **options,
    ) -> CsvLayout:
        columns = tuple(c.strip() for c in header)
        repeat = first_repeat(columns)
        if repeat:
            raise SourceError(f"{file}: column {repeat[0]!r} appears twice in the header (columns {repeat[1] + 1} "
                              f"and {repeat[2] + 1}); column names must be unique")
        if label_column not in columns:
            raise SourceError(f"{file}: no label column {label_column!r} in header {list(columns)[:10]}")
        if id_column is not None and id_column not in columns:
            raise SourceError(f"{file}: no id column {id_column!r} in header {list(columns)[:10]}")
        ident = columns.index(id_column) if id_column is not None else None
        return cls(columns, columns.index(label_column), ident, **options)

    @property
    def feature_columns(self) -> tuple[int, ...]:
        return tuple(i for i in range(len(self.columns)) if i not in (self.label_column, self.id_column))


def parse_row(
    row: Sequence[str],
    layout: CsvLayout,
    file: str,
    number: int,
    vocabulary: Mapping[str, int] | None = None,
    key: str | None = None,
) -> Record:
    """One CSV row -> Record with dense features; labels are ids (`vocabulary`, `label_ids`) or names."""
    if len(row) != len(layout.columns):
        raise RecordError(
            file, number, "wrong_field_count", f"expected {len(layout.columns)} fields, got {len(row)}"
        )
    dense = tuple(
        finite_float(row[i], file, number, f"column {layout.columns[i]!r}") for i in layout.feature_columns
    )
    tokens = [t.strip() for t in row[layout.label_column].split(layout.delimiter) if t.strip()]
    labels: list = tokens
    if layout.label_ids:
        labels = [
            index(t, layout.num_labels, file, number, "label id", "label_id_out_of_range") for t in tokens
        ]
    elif vocabulary is not None:
        for token in tokens:
            if token not in vocabulary:
                raise RecordError(file, number, "unknown_label", f"unknown label name {token!r}")
        labels = [vocabulary[t] for t in tokens]
    if layout.id_column is not None:
        key = row[layout.id_column].strip()
    return Record(key or f"{file}:{number}", "", unique(labels, file, number, "label"), dense=dense)
