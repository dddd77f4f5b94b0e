"""The Debian catalogue: RFC-822 stanzas of `Packages` and `Translation-en`, joined on (Package,
Description-md5). Text = package name + short + long description. Tasks: `debtags` (labels = `Tag`) and `deps`
(labels = `Depends` + `Pre-Depends` + `Recommends` package names: first alternative of each `|` group,
versions and `:arch` dropped, each target once).

Example:
    >>> deps_labels({"Depends": "libc6 (>= 2.34), foo:any | bar", "Recommends": "libc6"}, "P", "x")
    ('libc6', 'foo')
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from cdgt.components.formats.errors import RecordError
from cdgt.components.formats.values import unique

TASKS = ("debtags", "deps")
DEPENDENCY_FIELDS = ("Depends", "Pre-Depends", "Recommends")
_PACKAGE_NAME = re.compile(r"^[a-z0-9][a-z0-9+.\-]*$")
_FIELD = re.compile(r"^([!-9;-~]+):(.*)$")  # RFC 822 field name: printable ASCII except ':'

Stanza = dict[str, str]


def stanzas(lines: Iterable[tuple[int, str]], file: str) -> Iterator[tuple[int, Stanza] | RecordError]:
    """Blank-line separated control records -> (first line number, {field: value}); continuation lines
    (starting with a space or tab) are kept, newline-joined, in the value. A malformed line comes out as a
    RecordError value (and is left out of its record), so a caller can skip it or raise it."""
    record: Stanza = {}
    start, last = 0, None
    for number, line in lines:
        if not line.strip():
            if record:
                yield start, record
            record, last = {}, None
            continue
        if line[0] in " \t":
            if last is None:
                yield RecordError(file, number, "bad_field", "continuation line before any field")
                continue
            record[last] += "\n" + line
            continue
        match = _FIELD.match(line)
        if not match:
            yield RecordError(file, number, "bad_field", f"not a 'Field: value' line: {line[:60]!r}")
            continue
        if not record:
            start = number
        last = match.group(1)
        record[last] = match.group(2).strip()
    if record:
        yield start, record


def require(record: Stanza, field: str, file: str, line: int) -> str:
    """record[field], or a missing_field error."""
    value = record.get(field, "").strip()
    if not value:
        raise RecordError(file, line, "missing_field", f"record has no {field!r} field")
    return value


def debtags_labels(record: Stanza, file: str, where: int | str) -> tuple[str, ...]:
    """The `Tag` values ('facet::value'), comma-separated over continuation lines; repeats are errors."""
    tags = [t.strip() for t in record.get("Tag", "").replace("\n", " ").split(",") if t.strip()]
    return unique(tags, file, where, "tag")


def deps_labels(record: Stanza, file: str, where: int | str) -> tuple[str, ...]:
    """Dependency targets: first alternative of each group, name only, first occurrence kept."""
    targets: dict[str, None] = {}
    for field in DEPENDENCY_FIELDS:
        for group in record.get(field, "").replace("\n", " ").split(","):
            if not group.strip():
                continue
            first = group.split("|", 1)[0].strip()
            name = re.split(r"[\s(\[<]", first, maxsplit=1)[0].split(":", 1)[0]
            if not _PACKAGE_NAME.match(name):
                raise RecordError(
                    file, where, "bad_dependency", f"{field}: cannot read a package in {group!r}"
                )
            targets.setdefault(name, None)
    return tuple(targets)


def task_labels(record: Stanza, task: str, file: str, where: int | str) -> tuple[str, ...]:
    """Labels of a Packages record for `task` ('debtags' or 'deps')."""
    if task == "debtags":
        return debtags_labels(record, file, where)
    if task == "deps":
        return deps_labels(record, file, where)
    raise ValueError(f"unknown task {task!r}; expected one of {TASKS}")


def description_parts(value: str) -> tuple[str, str]:
    """'short\\n long...' -> (short, long text), ' .' lines becoming paragraph breaks."""
    first, _, rest = value.partition("\n")
    lines = [line[1:] if line[:1] in " \t" else line for line in rest.split("\n")] if rest else []
    return first.strip(), "\n".join("" if line.strip() == "." else line for line in lines).strip()


def example_text(package: str, short: str, long: str) -> str:
    """The example text: name, short description, long description, one per line."""
    return "\n".join(part for part in (package, short, long) if part)


def join_key(record: Stanza, file: str, line: int) -> tuple[str, str]:
    """(Package, Description-md5), the join key of both files; '' md5 when the record carries none."""
    return require(record, "Package", file, line), record.get("Description-md5", "").strip()
