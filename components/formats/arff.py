"""MULAN ARFF: dense (`v,v,...`) and sparse (`{i v,...}`, 0-based attribute ids) data lines; labels are the
last L attributes, L = the number of labels in the MULAN `.xml` file.

Label ids follow ARFF column order (label j = attribute F + j) and take the ARFF attribute names; the XML only
gives L and must name the same set of labels (yeast's XML lists them in another order than its columns).

Example:
    >>> h = ArffHeader(attributes=("a", "b", "L1", "L2"), num_labels=2, file="t.arff", data_line=6)
    >>> parse_line("{0 0.5,3 1}", h, "t.arff", 7).labels
    (1,)
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass

from cdgt.components.formats.errors import RecordError, SourceError
from cdgt.components.formats.record import Record
from cdgt.components.formats.values import finite_float, first_repeat, index, unique

_ATTRIBUTE = re.compile(r"@attribute\s+(?:'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"|(\S+))\s*(.*)$", re.I)


@dataclass(frozen=True)
class ArffHeader:
    """Attribute names in column order, how many trailing ones are labels, and where `@data` starts."""

    attributes: tuple[str, ...]
    num_labels: int
    file: str
    data_line: int  # line number of the `@data` line

    @property
    def num_features(self) -> int:
        return len(self.attributes) - self.num_labels

    @property
    def label_names(self) -> tuple[str, ...]:
        return self.attributes[self.num_features :]


def parse_label_xml(text: str, file: str = "<xml>") -> list[str]:
    """Label names of a MULAN labels file (every `<label name=...>`, nested ones included), in file order."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as err:
        raise SourceError(f"{file}: not a MULAN labels XML file ({err})") from None
    names = [el.get("name", "") for el in root.iter() if el.tag.rsplit("}", 1)[-1] == "label"]
    if not names or "" in names:
        raise SourceError(f"{file}: no <label name=...> elements (or one without a name)")
    repeat = first_repeat(names)
    if repeat:
        raise SourceError(f"{file}: label {repeat[0]!r} is named twice (labels {repeat[1]} and {repeat[2]}); "
                          "label names must be unique")
    return names


def parse_header(lines: Iterable[tuple[int, str]], label_names: list[str], file: str) -> ArffHeader:
    """Read `@attribute` lines up to `@data`; check the last L attributes are the XML's labels."""
    attributes: list[str] = []
    for number, line in lines:
        stripped = line.strip()
        if not stripped or stripped.startswith("%"):
            continue
        lowered = stripped.lower()
        if lowered.startswith("@attribute"):
            match = _ATTRIBUTE.match(stripped)
            if not match:
                raise RecordError(file, number, "bad_header", f"cannot read attribute line {stripped[:60]!r}")
            attributes.append(next(g for g in match.groups()[:3] if g is not None))
        elif lowered.startswith("@data"):
            return _checked_header(attributes, label_names, file, number)
        elif not lowered.startswith("@relation"):
            raise RecordError(file, number, "bad_header", f"unexpected header line {stripped[:60]!r}")
    raise SourceError(f"{file}: no @data line (truncated header?)")


def _checked_header(attributes: list[str], label_names: list[str], file: str, data_line: int) -> ArffHeader:
    num_labels = len(label_names)
    _check_unique(attributes, len(attributes) - num_labels, file)
    if num_labels > len(attributes):
        raise SourceError(f"{file}: {num_labels} labels in the XML but only {len(attributes)} attributes")
    trailing = attributes[len(attributes) - num_labels :]
    if sorted(trailing) != sorted(label_names):
        missing = sorted(set(label_names) - set(trailing))[:5]
        raise SourceError(
            f"{file}: the last {num_labels} attributes are not the XML's labels (e.g. {missing})"
        )
    return ArffHeader(tuple(attributes), num_labels, file, data_line)


def _check_unique(attributes: list[str], num_features: int, file: str) -> None:
    """A repeated attribute name is an error naming it: labels must be told apart, and so must features."""
    repeat = first_repeat(attributes)
    if repeat is None:
        return
    name, first, second = repeat
    what = "label" if second >= num_features else "attribute"
    raise SourceError(f"{file}: {what} {name!r} is declared twice (attributes {first} and {second}, 0-based); "
                      f"{what} names must be unique")


def parse_line(line: str, header: ArffHeader, file: str, number: int, key: str | None = None) -> Record:
    """One data line (dense or sparse) -> Record with dense or sparse features and label ids."""
    text = line.strip()
    record_id = key or f"{file}:{number}"
    if text.startswith("{"):
        ids, values, labels = _sparse(text, header, file, number)
        return Record(record_id, "", labels, feature_ids=ids, feature_values=values)
    dense, labels = _dense(text, header, file, number)
    return Record(record_id, "", labels, dense=dense)


def is_data_line(line: str) -> bool:
    """False for blank lines and `%` comments, which ARFF allows anywhere."""
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("%")


def _label_value(text: str, file: str, number: int, attribute: int, header: ArffHeader) -> bool:
    value = text.strip()
    if value not in ("0", "1", "0.0", "1.0"):
        name = header.attributes[attribute]
        raise RecordError(file, number, "bad_label_value", f"label {name!r} has value {value!r}, not 0 or 1")
    return value.startswith("1")


def _dense(
    text: str, header: ArffHeader, file: str, number: int
) -> tuple[tuple[float, ...], tuple[int, ...]]:
    fields = text.split(",")
    if len(fields) != len(header.attributes):
        raise RecordError(
            file, number, "wrong_field_count", f"expected {len(header.attributes)} values, got {len(fields)}"
        )
    f = header.num_features
    dense = tuple(finite_float(v, file, number, f"attribute {i}") for i, v in enumerate(fields[:f]))
    labels = tuple(j for j, v in enumerate(fields[f:]) if _label_value(v, file, number, f + j, header))
    return dense, labels


def _sparse(text: str, header: ArffHeader, file: str, number: int):
    if not text.endswith("}"):
        raise RecordError(file, number, "wrong_field_count", "sparse line does not end with '}'")
    body = text[1:-1].strip()
    pairs = [p.strip() for p in body.split(",")] if body else []
    width, f = len(header.attributes), header.num_features
    ids: list[int] = []
    values: list[float] = []
    labels: list[int] = []
    seen: set[int] = set()
    for pair in pairs:
        parts = pair.split()
        if len(parts) != 2:
            raise RecordError(
                file, number, "wrong_field_count", f"sparse entry {pair!r} is not 'index value'"
            )
        i = index(parts[0], width, file, number, "attribute id", "feature_id_out_of_range")
        if i in seen:
            raise RecordError(file, number, "duplicate_feature", f"attribute id {i} appears twice")
        seen.add(i)
        if i >= f:
            if _label_value(parts[1], file, number, i, header):
                labels.append(i - f)
        else:
            ids.append(i)
            values.append(finite_float(parts[1], file, number, f"attribute {i}"))
    return tuple(ids), tuple(values), unique(sorted(labels), file, number, "label")
