"""Beam DoFns that run the pure parsers: one input file per element, records out, rejects to a side output.

Imported only when a pipeline is built (it imports apache_beam at module level).

Example:
    records, rejects, notes = read_line_source(pipeline, make_source("arff", ["yeast/"]), "Main")
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import apache_beam as beam

from cdgt.components.build_progress import count
from cdgt.components.formats.errors import Note, RecordError, SourceError


def _rejected(error: RecordError, stage: str) -> Any:
    """A bad record to the 'rejects' output, counted as rejected in `stage`."""
    count(stage, "rejected")
    return beam.pvalue.TaggedOutput("rejects", error)


class ParseFiles(beam.DoFn):
    """SourceFile -> its records (main output) and RecordErrors (output 'rejects'), counted as stage `stage`."""

    def __init__(self, source: Any, stage: str = "Read") -> None:
        self.source, self.stage = source, stage

    def process(self, item: Any) -> Iterator[Any]:
        try:
            for out in self.source.records(item):
                if isinstance(out, RecordError):
                    yield _rejected(out, self.stage)
                else:
                    count(self.stage, "records")
                    yield out
        except SourceError as err:
            yield _rejected(unreadable(err, item.path), self.stage)


def unreadable(error: SourceError, path: str) -> RecordError:
    """A file that stops being readable part-way (truncated, not UTF-8) as a bad record: fail mode reports it from
    the driver in one line, skip mode counts it (the file's later lines are lost) instead of a worker crashing."""
    match = re.match(rf"{re.escape(path)}(?::(\d+))?: (.*)$", str(error), re.S)
    line, detail = (int(match.group(1) or 0), match.group(2)) if match else (0, str(error))
    return RecordError(path, line, "unreadable_file", detail)


def read_line_source(pipeline: Any, source: Any, label: str) -> tuple[Any, Any, Any]:
    """(records, rejects, notes) of a line-based source; `label` keeps step names unique per read."""
    files = pipeline | f"{label}Files" >> beam.Create(source.files, reshuffle=False)
    out = files | f"{label}Parse" >> beam.ParDo(ParseFiles(source, label)).with_outputs("rejects", main="records")
    notes = pipeline | f"{label}NoNotes" >> beam.Create([])
    return out.records, out.rejects, notes


class _Route(beam.DoFn):
    """Items of a generator -> main output, RecordErrors -> 'rejects', Notes -> 'notes'; entries and rejects
    counted as stage `stage`."""

    def __init__(self, entries: Any, stage: str) -> None:
        self.entries, self.stage = entries, stage

    def process(self, path: str) -> Iterator[Any]:
        try:
            for out in self.entries(path):
                if isinstance(out, RecordError):
                    yield _rejected(out, self.stage)
                elif isinstance(out, Note):
                    yield beam.pvalue.TaggedOutput("notes", str(out))
                else:
                    count(self.stage, "records")
                    yield out
        except SourceError as err:
            yield _rejected(unreadable(err, path), self.stage)


def _join(item: tuple[Any, dict[str, list[Any]]], make_record: Any) -> Iterator[Any]:
    """One join key -> its packages' records; unmatched sides become notes."""
    _, groups = item
    translations = groups["translations"]
    if not groups["packages"]:
        yield from (beam.pvalue.TaggedOutput("notes", "translation_without_example") for _ in translations)
    for entry in groups["packages"]:
        long = entry.long or (translations[0] if translations else "")
        if not entry.long and not translations:
            yield beam.pvalue.TaggedOutput("notes", "missing_long_description")
        yield make_record(entry, long)


def _duplicate_names(entries: Any, label: str) -> Any:
    """One 'duplicate_package_stanza' note per extra stanza of a package name (every stanza is kept)."""
    return (
        entries
        | f"{label}PackageNames" >> beam.Map(lambda kv: (kv[1].name, 1))
        | f"{label}PackageCounts" >> beam.CombinePerKey(sum)
        | f"{label}Duplicates" >> beam.FlatMap(lambda kv: ["duplicate_package_stanza"] * (kv[1] - 1))
    )


def _routed(pipeline: Any, files: list[str], entries: Any, step: str, stage: str, files_step: str | None = None) -> Any:
    """Each file's `entries` through _Route: the tagged outputs `entries`, `rejects` and `notes`. Beam steps
    `files_step` (default `step` + "Files") and `step`."""
    return (
        pipeline
        | (files_step or f"{step}Files") >> beam.Create(files, reshuffle=False)
        | step >> beam.ParDo(_Route(entries, stage)).with_outputs("rejects", "notes", main="entries")
    )


def read_debian(pipeline: Any, source: Any, label: str, labels_only: bool) -> tuple[Any, Any, Any]:
    """(records, rejects, notes) of the catalogue: Packages joined to Translation-en by CoGroupByKey."""
    packages = _routed(pipeline, source.packages, source.package_entries, f"{label}Packages", f"{label} Packages")
    rejects, notes = [packages.rejects], [packages.notes, _duplicate_names(packages.entries, label)]
    if labels_only:
        records = packages.entries | f"{label}LabelsOnly" >> beam.Map(lambda kv: source.record(kv[1], None))
    else:
        translations = _routed(pipeline, source.translations, source.translation_entries, f"{label}Translations",
                               f"{label} Translation-en", files_step=f"{label}TranslationFiles")
        rejects.append(translations.rejects)
        joined = (
            {"packages": packages.entries, "translations": translations.entries}
            | f"{label}Join" >> beam.CoGroupByKey()
            | f"{label}Records" >> beam.FlatMap(_join, source.record).with_outputs("notes", main="records")
        )
        records = joined.records
        notes.append(joined.notes)
    return (
        records,
        rejects | f"{label}AllRejects" >> beam.Flatten(),
        notes | f"{label}AllNotes" >> beam.Flatten(),
    )
