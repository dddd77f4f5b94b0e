"""Row blocks of one numpy array worked on in threads, one per core.

numpy's partitions, searches and element-wise kernels release the GIL, so blocks of rows run side by side; and a
block's temporaries stay small (a pass over a [6k, 4k] float array's copies is slower than the same pass in
blocks of a million entries). Each row's result is the one a single call on the whole array gives.

    >>> import numpy as np
    >>> parts = map_rows(lambda block: block.sum(axis=1), np.arange(12.0).reshape(4, 3), entries=3)
    >>> np.concatenate(parts).tolist()      # four blocks of one row each, in order
    [3.0, 12.0, 21.0, 30.0]
    >>> elementwise(lambda a, b: 2 * a + b, np.ones((4, 3)), np.arange(12.0).reshape(4, 3), entries=3)[:, 0].tolist()
    [2.0, 5.0, 8.0, 11.0]
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

BLOCK_ENTRIES = 1 << 20  # entries of a row block (8 MB of float64)
_pool: dict[str, ThreadPoolExecutor] = {}


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _blocks(array: np.ndarray, entries: int | None) -> list[slice]:
    """Slices of `array`'s rows of about `entries` entries each (default `BLOCK_ENTRIES`, at least one row)."""
    entries = BLOCK_ENTRIES if entries is None else entries
    width = int(np.prod(array.shape[1:])) if array.ndim > 1 else 1
    step = max(1, entries // max(width, 1))
    return [slice(start, start + step) for start in range(0, array.shape[0], step)] or [slice(0, 0)]


def _run(fn: Callable[[slice], Any], blocks: list[slice]) -> list[Any]:
    if len(blocks) == 1 or cores() == 1:
        return [fn(block) for block in blocks]
    if "pool" not in _pool:
        _pool["pool"] = ThreadPoolExecutor(cores(), thread_name_prefix="cdgt-rows")
    return list(_pool["pool"].map(fn, blocks))


def map_rows(fn: Callable[[np.ndarray], Any], array: np.ndarray, entries: int | None = None) -> list[Any]:
    """`fn` of each block of `array`'s rows (about `entries` entries a block, default `BLOCK_ENTRIES`, at least one
    row), in row order."""
    return _run(lambda rows: fn(array[rows]), _blocks(array, entries))


def elementwise(fn: Callable[..., np.ndarray], *arrays: np.ndarray, entries: int | None = None) -> np.ndarray:
    """`fn(*arrays)` for an element-wise `fn` of arrays with the same rows, computed block by block of rows into one
    result: the same values, without whole-array temporaries."""
    blocks = _blocks(arrays[0], entries)
    first = np.asarray(fn(*(a[blocks[0]] for a in arrays)))
    out = np.empty((arrays[0].shape[0], *first.shape[1:]), dtype=first.dtype)
    out[blocks[0]] = first

    def fill(rows: slice) -> None:
        out[rows] = fn(*(a[rows] for a in arrays))

    _run(fill, blocks[1:])
    return out
