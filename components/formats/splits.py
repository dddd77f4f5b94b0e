"""Deterministic split assignment from a stable hash (md5) of a key, never Python's salted hash().

Example:
    >>> unit_hash("0ad") < 1.0
    True
    >>> catalogue_split("0ad") in ("train", "validation", "test")
    True
"""

from __future__ import annotations

import hashlib


def unit_hash(key: str, salt: str = "") -> float:
    """A number in [0, 1) from md5(salt + key): stable across machines, runs and Python versions."""
    digest = hashlib.md5((salt + key).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def catalogue_split(name: str, train: float = 0.8, validation: float = 0.1) -> str:
    """80/10/10 split by md5 of the package name: u < 0.8 train, u < 0.9 validation, else test."""
    u = unit_hash(name)
    return "train" if u < train else "validation" if u < train + validation else "test"


def carve_validation(split: str, key: str, fraction: float) -> str:
    """Move a 'train' example to 'validation' when md5("validation:" + key) < fraction; else keep split."""
    if split == "train" and fraction > 0 and unit_hash(key, salt="validation:") < fraction:
        return "validation"
    return split


def split_hint(file_name: str) -> str | None:
    """The split a file name announces: 'train', 'validation' ('valid', 'val', 'dev') or 'test', else None."""
    import re

    words = set(re.split(r"[^a-z]+", file_name.lower()))
    if words & {"validation", "valid", "val", "dev"}:
        return "validation"
    if words & {"train", "training", "trn"}:
        return "train"
    if words & {"test", "testing", "tst"}:
        return "test"
    return None
