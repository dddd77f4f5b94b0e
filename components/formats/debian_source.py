"""The Debian catalogue as a source: `Packages` and `Translation-en` files (plain, .xz, .lz4, .gz; the
staged copy or a machine's `/var/lib/apt/lists`), parsed into join entries; split 80/10/10 by md5 of the name.

Example:
    >>> src = DebianSource.from_files(["Packages.lz4", "Translation-en.lz4"], "deps")  # doctest: +SKIP
    >>> next(src.package_entries("Packages.lz4"))  # doctest: +SKIP
    (('0ad', 'd94303...'), PackageEntry(name='0ad', ...))
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from cdgt.components.formats import debian
from cdgt.components.formats.errors import Note, RecordError, SourceError
from cdgt.components.formats.record import Record
from cdgt.components.formats.splits import catalogue_split
from cdgt.components.formats.textio import numbered_lines, strip_compression

JoinKey = tuple[str, str]


class PackageEntry(NamedTuple):
    """What a Packages record contributes to an example."""

    name: str
    short: str
    long: str  # the long description when `Description` carries it; else '' and Translation-en supplies it
    labels: tuple[str, ...]


@dataclass
class DebianSource:
    """Packages files, Translation-en files, the task, and the split (md5 of the name, 80/10/10)."""

    packages: list[str]
    translations: list[str]
    task: str = "debtags"
    format: str = "debian"
    kind: str = "text"
    num_features: int | None = None
    label_names: list[str] | None = None  # the vocabulary comes from the data
    label_ids_open: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_files(cls, files: Sequence[str], task: str = "debtags", **_: Any) -> DebianSource:
        if task not in debian.TASKS:
            raise ValueError(f"unknown Debian task {task!r}; expected one of {debian.TASKS}")
        names = {f: strip_compression(os.path.basename(f)) for f in files}
        packages = [f for f in files if names[f].endswith("Packages")]
        translations = [f for f in files if names[f].endswith("Translation-en")]
        if not packages:
            raise SourceError(f"no Packages file among {list(files)}")
        return cls(packages, translations, task)

    @property
    def input_paths(self) -> list[str]:
        return self.packages + self.translations

    def package_entries(self, path: str) -> Iterator[tuple[JoinKey, PackageEntry] | RecordError | Note]:
        """Join entries of one Packages file; records without labels for the task become Notes."""
        return _entries(path, self._package_entry)

    def _package_entry(self, record: dict[str, str], path: str, line: int) -> tuple[JoinKey, PackageEntry] | Note:
        try:
            key = debian.join_key(record, path, line)
            labels = debian.task_labels(record, self.task, path, line)
        except RecordError as err:
            name = record.get("Package", "?")
            raise RecordError(err.file, err.where, err.reason, f"package {name!r}: {err.detail}") from None
        if not labels:
            return Note("excluded_no_labels")
        short, long = debian.description_parts(record.get("Description", ""))
        return key, PackageEntry(key[0], short, long, labels)

    def translation_entries(self, path: str) -> Iterator[tuple[JoinKey, str] | RecordError]:
        """(Package, Description-md5) -> long description, from one Translation-en file."""
        return _entries(path, _translation_entry)

    @staticmethod
    def record(entry: PackageEntry, long: str | None) -> Record:
        """The example of a package: id = name, split by md5 of the name, text = name + descriptions."""
        text = None if long is None else debian.example_text(entry.name, entry.short, long)
        return Record(entry.name, catalogue_split(entry.name), entry.labels, text=text)

    def expand(self, pipeline: Any, label: str, labels_only: bool = False) -> tuple[Any, Any, Any]:
        """(records, rejects, notes); `labels_only` skips reading Translation-en (records have no text)."""
        from cdgt.components.formats.beam_io import read_debian

        return read_debian(pipeline, self, label, labels_only)


def _entries(path: str, entry: Callable[[dict[str, str], str, int], Any]) -> Iterator[Any]:
    """`entry(record, path, line)` of each stanza of one file; a malformed stanza's RecordError, or the one `entry`
    raises, takes its place."""
    for item in debian.stanzas(numbered_lines(path), path):
        if isinstance(item, RecordError):
            yield item
            continue
        line, record = item
        try:
            yield entry(record, path, line)
        except RecordError as err:
            yield err


def _translation_entry(record: dict[str, str], path: str, line: int) -> tuple[JoinKey, str]:
    key = debian.join_key(record, path, line)
    text = debian.require(record, "Description-en", path, line)
    return key, debian.description_parts(text)[1]
