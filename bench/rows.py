"""A run's test outcomes row by row, kept beside its result file for paired comparisons (`cdgt.bench.paired`).

A result file holds a run's metrics over the whole test split. Whether one method beats another by more than the
test split's own sampling noise needs what each method did on each row: its top `ROWS_K` label ids (P@k, PSP@k)
and its decisions under the shipped threshold rule (Micro-, Macro-, Rare-F1). These are derived from the data, so
they live in OUTPUT/rows/ (not committed; `.gitignore`), one compressed `.npz` per result file, same stem.

Example:
    >>> import tempfile
    >>> rows = RowOutcomes(np.array([[2, 0], [1, 2]]), sp.csr_matrix(np.array([[0, 0, 1], [1, 1, 0]])))
    >>> path = rows_path(Path(tempfile.mkdtemp()) / "results" / "yeast__cdgt__s0.json")
    >>> save_rows(path, rows)
    >>> back = load_rows(path)
    >>> back.top.tolist(), back.decided.toarray().tolist()
    ([[2, 0], [1, 2]], [[0, 0, 1], [1, 1, 0]])
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROWS_K = 5  # top-k ids kept per row: P@1..5 and PSP@1..5 can be recomputed


@dataclass(frozen=True)
class RowOutcomes:
    """top: [n, k] label ids, best first; decided: [n, L] 0/1, the shipped rule's decisions."""

    top: np.ndarray
    decided: sp.csr_matrix


def rows_path(result_path: Path) -> Path:
    """OUTPUT/rows/<the result file's stem>.npz for OUTPUT/results/<stem>.json."""
    result_path = Path(result_path)
    return result_path.parent.parent / "rows" / (result_path.stem + ".npz")


def save_rows(path: Path, rows: RowOutcomes) -> None:
    """Write atomically (a *.tmp.npz sibling, then rename), like the result file it belongs to."""
    path.parent.mkdir(parents=True, exist_ok=True)
    decided = sp.csr_matrix(rows.decided)
    tmp = path.with_name(path.stem + ".tmp.npz")
    np.savez_compressed(tmp, top=np.asarray(rows.top, np.int32), indptr=decided.indptr.astype(np.int64),
                        indices=decided.indices.astype(np.int32), shape=np.asarray(decided.shape, np.int64))
    tmp.replace(path)


def load_rows(path: Path) -> RowOutcomes:
    """The rows `save_rows` wrote; a missing file is a FileNotFoundError naming it."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path}: no test rows (runs made before rows were kept have none; rerun with "
                                "--force to write them)")
    with np.load(path) as f:
        shape = tuple(int(v) for v in f["shape"])
        indices = f["indices"]
        decided = sp.csr_matrix((np.ones(indices.size, np.int8), indices, f["indptr"]), shape=shape)
        return RowOutcomes(f["top"].astype(np.int64), decided)
