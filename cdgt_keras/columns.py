"""A batch times a static sparse table, column by column: the players' fusion and the game's selections in training.

`ColumnTable.from_entries(rows, cols, values, height, width)` holds a sparse [height, width] matrix S with a few
entries per column; `combine(x, table)` is x @ S for a dense batch x [B, height], with its gradient g @ S^T.

TensorFlow multiplies a dense matrix by a sparse one as (S^T x^T)^T: two transposed copies of the batch forward and
two more backward. At 18.6k labels the fusion's and the selections' products and their copies took a quarter of a
training step's CPU time (op statistics of the profiled step: bench/learner_notes.md, round 14). cdgt's
`CdgtColumnCombine` kernel (`cdgt_keras.kernels`) reads each row of the batch in place instead; it adds a column's
entries in row order from 0, as TensorFlow's product does, so both give the same bits. Without the kernel (no
compiler, `CDGT_FUSED_KERNELS=0`), or with `fused=False`, `combine` is TensorFlow's product: what a SavedModel is
exported with.

    >>> table = ColumnTable.from_entries([0, 2, 1], [0, 0, 1], [0.5, 0.5, 1.0], height=3, width=2)
    >>> combine(tf.constant([[2.0, 4.0, 6.0]]), table).numpy().tolist()   # [0.5 * 2 + 0.5 * 6, 4]
    [[4.0, 4.0]]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from cdgt_keras.kernels import column_combine


@dataclass(frozen=True)
class _Csr:
    """One direction of the table: output column order[i] takes weights[e] * x[:, cols[e]] for e in
    splits[i]:splits[i+1]; the columns in `order` are grouped by their number of entries (the kernel's loop over
    a column's entries then runs alike from one column to the next)."""

    splits: tf.Tensor  # int64 [J + 1]
    cols: tf.Tensor  # int32 [E]
    weights: tf.Tensor  # float32 [E]
    order: tf.Tensor  # int32 [J]


def _csr(out_index: np.ndarray, in_index: np.ndarray, values: np.ndarray, out_width: int) -> _Csr:
    """Entries grouped by output column, each group in increasing input column (the order TensorFlow adds in), the
    output columns ordered by their number of entries."""
    counts = np.bincount(out_index, minlength=out_width)
    columns = np.argsort(counts, kind="stable")
    rank = np.empty(out_width, np.int64)
    rank[columns] = np.arange(out_width)
    entries = np.lexsort((in_index, rank[out_index]))
    return _Csr(tf.constant(np.concatenate([[0], np.cumsum(counts[columns])]).astype(np.int64)),
                tf.constant(in_index[entries].astype(np.int32)), tf.constant(values[entries].astype(np.float32)),
                tf.constant(columns.astype(np.int32)))


class ColumnTable:
    """A static sparse [height, width] matrix, kept for `combine` in both directions and as a tf.SparseTensor."""

    def __init__(self, rows: np.ndarray, cols: np.ndarray, values: np.ndarray, height: int, width: int):
        rows, cols = np.asarray(rows, np.int64), np.asarray(cols, np.int64)
        values = np.asarray(values, np.float32)
        if rows.shape != cols.shape or rows.shape != values.shape or rows.ndim != 1:
            raise ValueError(f"rows, cols and values must be vectors of one length, got {rows.shape}, {cols.shape}, "
                             f"{values.shape}")
        if rows.size and (rows.min() < 0 or rows.max() >= height or cols.min() < 0 or cols.max() >= width):
            raise ValueError(f"an entry lies outside the [{height}, {width}] table")
        if np.unique(rows * width + cols).size != rows.size:
            raise ValueError("the table names an entry twice")
        self.height, self.width = int(height), int(width)
        indices = np.stack([rows, cols], axis=1).reshape(-1, 2)
        self.sparse = tf.sparse.reorder(tf.SparseTensor(indices, values, [self.height, self.width]))
        self.forward = _csr(cols, rows, values, self.width)  # x @ S: output column = the table's column
        self.backward = _csr(rows, cols, values, self.height)  # g @ S^T: output column = the table's row

    @classmethod
    def from_entries(cls, rows: list | np.ndarray, cols: list | np.ndarray, values: list | np.ndarray,
                     height: int, width: int) -> ColumnTable:
        """The table with values[e] at (rows[e], cols[e])."""
        return cls(np.asarray(rows), np.asarray(cols), np.asarray(values), height, width)


def _run(op: object, x: tf.Tensor, csr: _Csr) -> tf.Tensor:
    return op(x=x, splits=csr.splits, cols=csr.cols, weights=csr.weights, order=csr.order)


def combine(x: tf.Tensor, table: ColumnTable, fused: bool = True) -> tf.Tensor:
    """x [B, height] @ table [height, width] -> [B, width], differentiable in x; through cdgt's kernel when
    `fused` and it is built, else TensorFlow's sparse product (the same bits)."""
    op = column_combine() if fused else None
    if op is None:
        return tf.sparse.sparse_dense_matmul(x, table.sparse)

    @tf.custom_gradient
    @tf.autograph.experimental.do_not_convert
    def product(batch: tf.Tensor) -> tuple[tf.Tensor, object]:
        def gradient(upstream: tf.Tensor) -> tf.Tensor:
            return _run(op, upstream, table.backward)

        return _run(op, batch, table.forward), gradient

    return product(tf.convert_to_tensor(x, tf.float32))
