"""Files written whole or not at all: a run's JSON and model files go through a temporary name and a rename.

Example:
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "state.json"
    >>> write_json(path, {"epoch": 3})
    >>> json.loads(path.read_text())
    {'epoch': 3}
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def atomic_write(path: Path, write: Any, suffix: str = "") -> None:
    """Write `path` through `write(temporary path)` and a rename, so that a failure (a full disk) leaves no
    truncated file behind; the temporary file is removed and the error goes on."""
    tmp = path.with_name(f".{path.name}.partial{suffix}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json(path: Path, payload: dict[str, Any]) -> None:
    """`payload` as indented, key-sorted JSON in `path`, written atomically (numpy scalars as floats)."""
    text = json.dumps(payload, indent=2, sort_keys=True, default=float) + "\n"
    atomic_write(path, lambda tmp: tmp.write_text(text))
