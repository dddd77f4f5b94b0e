"""TF Serving's model layout, `<base>/<model_name>/<integer version>/saved_model.pb`, without TensorFlow.

TF Serving watches `<base>/<model_name>/` and serves the highest integer version it finds there.

Example:
    >>> new_version_dir("serving/models", "debtags")     # doctest: +SKIP
    PosixPath('serving/models/debtags/1')
    >>> resolve_saved_model("serving/models/debtags")     # doctest: +SKIP
    PosixPath('serving/models/debtags/1')
"""

from __future__ import annotations

import re
from pathlib import Path

SAVED_MODEL = "saved_model.pb"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def check_model_name(name: str) -> str:
    """A model name TF Serving and a URL path accept: letters, digits, `_ . -`."""
    if not _NAME.match(name):
        raise ValueError(f"model name {name!r} must be letters, digits, '_', '.', '-' (and start with a letter "
                         "or digit)")
    return name


def versions(model_dir: str | Path) -> list[int]:
    """The integer versions under `<base>/<model_name>/` that hold a SavedModel, ascending."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        return []
    return sorted(int(p.name) for p in model_dir.iterdir() if p.name.isdigit() and (p / SAVED_MODEL).is_file())


def new_version_dir(base: str | Path, name: str, version: int | None = None) -> Path:
    """`<base>/<name>/<version>` for a new export: `version`, or one above the highest present (1 if none).
    Refuses to overwrite an existing version: TF Serving may be serving it."""
    model_dir = Path(base) / check_model_name(name)
    if version is None:
        version = (versions(model_dir) or [0])[-1] + 1
    if version < 1:
        raise ValueError(f"version must be a positive integer, got {version}")
    target = model_dir / str(version)
    if target.exists():
        raise ValueError(f"{target} exists: TF Serving may be serving it; choose another --version")
    return target


def resolve_saved_model(path: str | Path) -> Path:
    """A SavedModel directory from a version directory, or `<base>/<name>/` (its highest version)."""
    path = Path(path)
    if (path / SAVED_MODEL).is_file():
        return path
    found = versions(path)
    if found:
        return path / str(found[-1])
    raise FileNotFoundError(f"{path} holds no {SAVED_MODEL}, directly or in an integer version directory; "
                            "export one with `cdgt export`")


def find_pipeline_model(run_dir: str | Path) -> Path:
    """The newest model a `cdgt run` directory holds: the Pusher's highest version under serving/, else the
    newest Trainer export (…/Format-Serving)."""
    run_dir = Path(run_dir)
    pushed = [p.parent for p in run_dir.glob(f"serving/*/*/{SAVED_MODEL}") if p.parent.name.isdigit()]
    if pushed:
        return max(pushed, key=lambda p: int(p.name))
    trained = [p.parent for p in run_dir.glob(f"**/Format-Serving/{SAVED_MODEL}")]
    if trained:
        return max(trained, key=lambda p: p.stat().st_mtime)
    raise FileNotFoundError(f"no pushed or trained SavedModel under {run_dir} (looked for serving/*/<version>/ and "
                            "**/Format-Serving/)")
