"""The one error type for bad input: it names the file, the line (or package) and what was wrong; and the Note a
source yields for what it counts but does not reject.

Example:
    >>> str(RecordError("yeast-train.arff", 130, "non_numeric", "value 'x' in column 3 is not a number"))
    "yeast-train.arff:130: value 'x' in column 3 is not a number [non_numeric]"
"""

from __future__ import annotations

import re
from typing import Any

# A message as RecordError formats it, found again inside an exception text wrapped by a Beam runner.
_MESSAGE = re.compile(r"(\S+:(?:\d+|[^\s:]+): [^\n]*? \[[a-z_]+\])")


class RecordError(ValueError):
    """A malformed record. `where` is a line number or, for catalogue records, a package name."""

    def __init__(self, file: str, where: int | str, reason: str, detail: str) -> None:
        self.file, self.where, self.reason, self.detail = str(file), where, reason, detail
        super().__init__(f"{self.file}:{where}: {detail} [{reason}]")

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across Beam worker processes
        return (RecordError, (self.file, self.where, self.reason, self.detail))

    def to_reject(self) -> dict[str, Any]:
        """The JSON-lines form written to the rejects file."""
        return {"file": self.file, "line": self.where, "reason": self.reason, "message": self.detail}


class SourceError(ValueError):
    """A whole-file problem: truncated compressed stream, missing file, inconsistent headers."""


class Note(str):
    """A counted event that drops nothing: e.g. 'excluded_no_labels', 'missing_long_description' (a source yields
    it among its records; the Beam job counts it)."""


class BuildFailed(ValueError):
    """A build that must not produce a data set: bad records in fail mode (the first one and the count),
    or an empty split. Its message is one line."""


_INPUT_ERRORS = (RecordError, SourceError, BuildFailed)
_WRAPPED = re.compile(r"(?:RecordError|SourceError|BuildFailed): ([^\n]*?)(?: \[while running '[^']*'\])?$", re.M)
_OS_ERROR = re.compile(r"\b\w*Error: (\[Errno \d+\][^\n]*?)(?: \[while running '[^']*'\])?$", re.M)


def root_input_error(error: BaseException) -> BaseException | None:
    """The input error (RecordError, SourceError, BuildFailed) or OSError that a runner's exception wraps
    (through __cause__ / __context__), else None."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, (*_INPUT_ERRORS, OSError)):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def without_step(message: str) -> str:
    """`message` without the " [while running 'Step']" a Beam runner appends to a worker's exception."""
    return re.sub(r"(?: \[while running '[^']*'\])+$", "", message.rstrip())


def find_error_message(text: str) -> str | None:
    """The message of an input error or an OSError (`[Errno N] ...`) inside `text` (a worker's traceback as text),
    else None."""
    match = _WRAPPED.search(text) or _OS_ERROR.search(text)
    return match.group(1) if match else find_record_message(text)


def find_record_message(text: str) -> str | None:
    """The first RecordError message inside `text` (e.g. a runner's wrapped traceback), or None."""
    match = _MESSAGE.search(text)
    return match.group(1) if match else None
