"""Open plain, .gz, .xz and .lz4 files alike, and turn a truncated compressed stream into a clear error.

Example:
    >>> for number, line in numbered_lines("yeast-train.arff.xz"):  # doctest: +SKIP
    ...     print(number, line)
"""

from __future__ import annotations

import gzip
import io
import lzma
from collections.abc import Iterator
from typing import IO

from cdgt.components.formats.errors import SourceError

COMPRESSED_SUFFIXES = (".xz", ".lz4", ".gz")


def strip_compression(name: str) -> str:
    """'yeast-train.arff.xz' -> 'yeast-train.arff' (any of .xz, .lz4, .gz)."""
    for suffix in COMPRESSED_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def open_binary(path: str) -> IO[bytes]:
    """A binary reader that decompresses by file suffix; local paths or any Beam filesystem (gs://...)."""
    if "://" in path:
        from apache_beam.io.filesystems import FileSystems

        raw: IO[bytes] = FileSystems.open(path, compression_type="uncompressed")
    else:
        raw = open(path, "rb")
    if path.endswith(".xz"):
        return lzma.open(raw)
    if path.endswith(".gz"):
        return gzip.open(raw)
    if path.endswith(".lz4"):
        import lz4.frame

        return lz4.frame.open(raw)
    return raw


def numbered_lines(path: str, start: int = 1) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, line without newline) from `path`, streaming, from line `start` on.

    A truncated or corrupt compressed stream raises SourceError naming the file and the last good line; so does
    text that is not UTF-8. A UTF-8 byte-order mark at the start is dropped (spreadsheet exports write one).
    """
    number = 0
    try:
        with open_binary(path) as raw, io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as text:
            for number, line in enumerate(text, 1):
                if number >= start:
                    yield number, line.rstrip("\r\n")
    except (EOFError, lzma.LZMAError, RuntimeError, OSError, UnicodeDecodeError) as err:
        if isinstance(err, FileNotFoundError):
            raise SourceError(f"{path}: file not found") from err
        if isinstance(err, UnicodeDecodeError):
            line, byte = first_non_utf8(path)
            raise SourceError(f"{path}:{line}: not UTF-8 text (byte {byte!r} cannot be decoded); "
                              "convert the file to UTF-8") from None
        raise SourceError(
            f"{path}: truncated or corrupt file after line {number} ({type(err).__name__}: {err})"
        ) from err


def first_non_utf8(path: str) -> tuple[int, bytes]:
    """(1-based line number, first bad byte) of the first line of `path` that is not UTF-8; (0, b"") if none."""
    with open_binary(path) as raw:
        for number, line in enumerate(raw, 1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as err:
                return number, line[err.start : err.start + 1]
    return 0, b""
