"""Beam sources for the line-based formats (ARFF, XMC, CSV): which files, which split, and a DoFn that
streams each file through its pure parser. Rejects go to a tagged output, or raise with `on_error="fail"`.

File convention: a SOURCE is a folder or explicit files; a data file's split comes from its name
(`train`, `test`, `valid`/`validation`/`val`/`dev`); an ARFF set also needs its MULAN `.xml` label file.
Where no validation file exists, md5("validation:" + id) < `validation_fraction` moves a training example to
validation (ids are `<file name without compression suffix>:<line>`, so the carve is stable).

Example:
    >>> src = make_source("arff", ["../shared/data/yeast"])  # doctest: +SKIP
    >>> src.num_features, len(src.label_names)  # doctest: +SKIP
    (103, 14)
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from cdgt.components.formats import arff, csv_format, xmc
from cdgt.components.formats.errors import RecordError, SourceError
from cdgt.components.formats.record import Record
from cdgt.components.formats.splits import carve_validation, split_hint
from cdgt.components.formats.textio import numbered_lines, open_binary, strip_compression
from cdgt.components.formats.values import first_repeat

FORMATS = ("arff", "xmc", "csv", "debian")
_IGNORED = ("readme", ".md", ".json", ".sha256", ".txt.sha")


@dataclass(frozen=True)
class SourceFile:
    """One input data file and the split its examples start in."""

    path: str
    split: str


def expand_paths(paths: Sequence[str]) -> list[str]:
    """Folders become their (non-hidden, non-README) files, sorted; files stay; a missing path is an error."""
    files: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            names = sorted(n for n in os.listdir(path) if not n.startswith("."))
            files += [
                os.path.join(path, n)
                for n in names
                if not n.lower().startswith(_IGNORED[0])
                and not n.lower().endswith(_IGNORED[1:])
                and os.path.isfile(os.path.join(path, n))
            ]
        elif os.path.isfile(path) or "://" in path:
            files.append(path)
        else:
            raise FileNotFoundError(f"no such file or folder: {path}")
    return files


def data_files(files: Sequence[str], suffixes: tuple[str, ...]) -> list[SourceFile]:
    """The files whose uncompressed name ends with one of `suffixes`, each with its name's split."""
    chosen = [f for f in files if strip_compression(os.path.basename(f)).lower().endswith(suffixes)]
    result = []
    for path in chosen:
        split = split_hint(strip_compression(os.path.basename(path)))
        if split is None:
            raise SourceError(f"{path}: cannot tell the split from the name (use train / valid / test in it)")
        result.append(SourceFile(path, split))
    if not any(f.split == "train" for f in result):
        raise SourceError(f"no training file among {list(files)} (expected a name containing 'train')")
    if not any(f.split == "test" for f in result):
        raise SourceError(f"no test file among {list(files)} (expected a name containing 'test'): "
                          "a build needs a test split")
    return result


@dataclass
class LineSource:
    """Shared machinery: files, the validation carve, and the per-file record iterator (in subclasses)."""

    files: list[SourceFile]
    validation_fraction: float = 0.1
    format: str = ""
    kind: str = "dense"
    num_features: int | None = None
    label_names: list[str] | None = None  # None: labels are names (or ids) whose vocabulary comes from data
    label_ids_open: bool = False  # ids with no known L: L = max id + 1
    extra: dict[str, Any] = field(default_factory=dict)
    feature_names: list[str] | None = None  # what each feature id stands for (a word), when the format says

    @property
    def carve(self) -> float:
        """The validation fraction carved from train; 0 when a validation file exists."""
        return 0.0 if any(f.split == "validation" for f in self.files) else self.validation_fraction

    @property
    def input_paths(self) -> list[str]:
        return [f.path for f in self.files] + list(self.extra.get("label_files", []))

    def records(self, source: SourceFile) -> Iterator[Record | RecordError]:
        """Every record of one file, with its split; bad records come out as RecordError values."""
        for item in self.parse_file(source.path):
            if isinstance(item, Record):
                item = item.with_split(carve_validation(source.split, item.id, self.carve))
            yield item

    def parse_file(self, path: str) -> Iterator[Record | RecordError]:
        raise NotImplementedError

    def expand(self, pipeline: Any, label: str, labels_only: bool = False) -> tuple[Any, Any, Any]:
        """(records, rejects, notes) PCollections of every file (`labels_only` is ignored)."""
        from cdgt.components.formats.beam_io import read_line_source

        return read_line_source(pipeline, self, label)


def record_key(path: str, number: int) -> str:
    """'<file name without compression suffix>:<line>': the example id of a line-based record."""
    return f"{strip_compression(os.path.basename(path))}:{number}"


def _guard(parse: Any, *args: Any) -> Record | RecordError:
    """parse(*args), or the RecordError it raised, as a value."""
    try:
        return parse(*args)
    except RecordError as err:
        return err


class ArffSource(LineSource):
    def parse_file(self, path: str) -> Iterator[Record | RecordError]:
        header: arff.ArffHeader = self.extra["header"]
        for number, line in numbered_lines(path, start=self.extra["data_lines"][path] + 1):
            if arff.is_data_line(line):
                yield _guard(arff.parse_line, line, header, path, number, record_key(path, number))


class XmcSource(LineSource):
    def parse_file(self, path: str) -> Iterator[Record | RecordError]:
        header: xmc.XmcHeader = self.extra["headers"][path]
        seen = 0
        for number, line in numbered_lines(path, start=2):
            seen += 1
            yield _guard(xmc.parse_line, line, header, path, number, record_key(path, number))
        mismatch = xmc.count_mismatch(path, header, seen)
        if mismatch:
            yield mismatch


class CsvSource(LineSource):
    def parse_file(self, path: str) -> Iterator[Record | RecordError]:
        layout: csv_format.CsvLayout = self.extra["layout"]
        vocabulary = {n: i for i, n in enumerate(self.label_names)} if self.label_names else None
        lines = (line for _, line in numbered_lines(path))
        reader = csv.reader(lines)
        next(reader, None)
        for row in reader:
            number = reader.line_num
            vocab = None if layout.label_ids else vocabulary
            yield _guard(csv_format.parse_row, row, layout, path, number, vocab, record_key(path, number))


def make_source(fmt: str, paths: Sequence[str], **options: Any) -> Any:
    """The source object for `fmt` over SOURCE paths (folders or files)."""
    fraction = options.pop("validation_fraction", 0.1)
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"--validation-fraction must be in (0, 1), got {fraction}")
    files = expand_paths(paths)
    if fmt == "arff":
        return _arff_source(files, fraction)
    if fmt == "xmc":
        return _xmc_source(files, fraction)
    if fmt == "csv":
        return _csv_source(files, fraction, **options)
    if fmt == "debian":
        from cdgt.components.formats.debian_source import DebianSource

        return DebianSource.from_files(files, validation_fraction=fraction, **options)
    raise ValueError(f"unknown format {fmt!r}; expected one of {FORMATS}")


def _read_all(path: str) -> str:
    with open_binary(path) as handle:
        return handle.read().decode("utf-8")


def _arff_source(files: list[str], fraction: float) -> ArffSource:
    xml = [f for f in files if strip_compression(f).lower().endswith(".xml")]
    if len(xml) != 1:
        raise SourceError(f"need exactly one MULAN .xml label file among the inputs, found {len(xml)}: {xml}")
    names = arff.parse_label_xml(_read_all(xml[0]), xml[0])
    data = data_files(files, (".arff",))
    headers = {f.path: arff.parse_header(numbered_lines(f.path), names, f.path) for f in data}
    first = headers[data[0].path]
    for path, header in headers.items():
        if header.attributes != first.attributes:
            raise SourceError(f"{path}: its attributes differ from those of {data[0].path}")
    return ArffSource(
        data,
        fraction,
        "arff",
        "sparse" if _is_sparse(data[0].path, first) else "dense",
        first.num_features,
        list(first.label_names),
        extra={
            "header": first,
            "label_files": xml,
            "data_lines": {p: h.data_line for p, h in headers.items()},
        },
        feature_names=list(first.attributes[: first.num_features]),
    )


def _is_sparse(path: str, header: arff.ArffHeader) -> bool:
    for _, line in numbered_lines(path, start=header.data_line + 1):
        if arff.is_data_line(line):
            return line.strip().startswith("{")
    return False


def _xmc_source(files: list[str], fraction: float) -> XmcSource:
    data = data_files([f for f in files if not strip_compression(f).lower().endswith(".csv")], ("",))
    headers = {}
    for f in data:
        first_line = next(iter(numbered_lines(f.path)), (1, ""))[1]
        headers[f.path] = xmc.parse_header(first_line, f.path)
    dims = {(h.num_features, h.num_labels) for h in headers.values()}
    if len(dims) != 1:
        raise SourceError(
            f"XMC headers disagree on (features, labels): { {p: h for p, h in headers.items()} }"
        )
    num_features, num_labels = dims.pop()
    names = [str(i) for i in range(num_labels)]
    return XmcSource(data, fraction, "xmc", "sparse", num_features, names, extra={"headers": headers})


def _csv_source(
    files: list[str],
    fraction: float,
    label_column: str = "labels",
    id_column: str | None = None,
    delimiter: str = "|",
    label_ids: bool = False,
    num_labels: int | None = None,
    label_vocab: str | None = None,
) -> CsvSource:
    data = data_files(files, (".csv",))
    layouts = []
    for f in data:
        header = next(csv.reader(line for _, line in numbered_lines(f.path)), [])
        layouts.append(
            csv_format.CsvLayout.from_header(
                header,
                f.path,
                label_column,
                id_column,
                delimiter=delimiter,
                label_ids=label_ids,
                num_labels=num_labels,
            )
        )
    if any(layout.columns != layouts[0].columns for layout in layouts):
        raise SourceError(f"CSV headers differ between {[f.path for f in data]}")
    names: list[str] | None = None
    if label_vocab:
        names = _vocabulary_file(label_vocab)
    elif label_ids and num_labels is not None:
        names = [str(i) for i in range(num_labels)]
    layout = layouts[0]
    return CsvSource(
        data,
        fraction,
        "csv",
        "dense",
        len(layout.feature_columns),
        names,
        label_ids_open=label_ids and num_labels is None,
        extra={"layout": layout, "label_files": [label_vocab] if label_vocab else []},
    )


def _vocabulary_file(path: str) -> list[str]:
    """Label names, one per line (blank lines skipped); a name listed twice is an error naming both lines."""
    numbered = [(n, line.strip()) for n, line in numbered_lines(path) if line.strip()]
    repeat = first_repeat([name for _, name in numbered])
    if repeat:
        name, first, second = repeat
        raise SourceError(f"{path}:{numbered[second][0]}: label {name!r} is listed twice (lines "
                          f"{numbered[first][0]} and {numbered[second][0]}); label names must be unique")
    return [name for _, name in numbered]
