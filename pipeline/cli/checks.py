"""Checks of the path options every command shares, run before a command starts (so a bad path is one line, not a
traceback minutes later): `--config` must be a file, and `--output` / `--out` must be creatable as a folder.

Example:
    >>> import argparse
    >>> check_path_options(argparse.Namespace(command="train", config=None, output="/tmp/run"))
"""

from __future__ import annotations

import argparse
from pathlib import Path

# Commands whose --output names a file to write, not a folder.
_FILE_OUTPUT = ("kubeflow",)


def check_path_options(args: argparse.Namespace) -> None:
    """ValueError / FileNotFoundError naming the option, the path and what was expected."""
    config = getattr(args, "config", None)
    if config is not None:
        _check_config(Path(config))
    for option in ("output", "out"):
        value = getattr(args, option, None)
        if value is not None and "://" not in str(value):
            _check_output(f"--{option}", Path(value), folder=args.command not in _FILE_OUTPUT)


def _check_config(path: Path) -> None:
    if path.is_dir():
        raise ValueError(f"--config {path} is a directory; give a YAML or JSON file of config fields")
    if not path.exists():
        raise FileNotFoundError(f"--config {path}: no such file")


def _check_output(option: str, path: Path, folder: bool) -> None:
    if folder and path.exists() and not path.is_dir():
        raise ValueError(f"{option} {path} is a regular file; give a folder to write into")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(f"{option} {path}: {parent} is a regular file, not a folder")
            return
