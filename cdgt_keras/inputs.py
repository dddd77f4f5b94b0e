"""tf.data input functions: in-memory splits (dense or scipy-sparse) to (features, labels) batches.

Sparse features become tf.SparseTensor batches (never densified); labels travel as a tf.SparseTensor and
are made dense one batch at a time inside the train step, so a 40,000-label set never exists densely.

Example:
    >>> import numpy as np, scipy.sparse as sp
    >>> x, y = sp.random(10, 50, density=0.1, format="csr"), sp.csr_matrix(np.eye(10, 3))
    >>> features, labels = next(iter(make_dataset(x, y, batch_size=4, shuffle=True, seed=0)))
    >>> type(features).__name__, labels.dense_shape.numpy().tolist()   # sparse all the way: [4, 50] and [4, 3]
    ('SparseTensor', [4, 3])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
import tensorflow as tf


def to_sparse_tensor(matrix: sp.spmatrix, dtype: tf.DType = tf.float32) -> tf.SparseTensor:
    """A scipy-sparse matrix as a tf.SparseTensor in canonical row-major order, duplicates summed. A CSR matrix in
    canonical form (sorted columns, no duplicates; a slice of one is) is in that order already and is not sorted
    again: 0.2 ms for 256 rows of debtags, where sorting took 1.6-2 ms, paid by every batch a ranking scores."""
    if sp.isspmatrix_csr(matrix) and matrix.has_canonical_format:
        coo = matrix.tocoo()
    else:
        coo = sp.coo_matrix(matrix, copy=True)  # sum_duplicates sorts in place: never the caller's arrays
        coo.sum_duplicates()  # sorted by row, then column
    indices = np.stack([coo.row, coo.col], axis=1).astype(np.int64)
    return tf.SparseTensor(indices, tf.constant(coo.data, dtype=dtype), dense_shape=coo.shape)


def _features_tensor(features: np.ndarray | sp.spmatrix) -> tf.Tensor | tf.SparseTensor:
    if sp.issparse(features):
        return to_sparse_tensor(features)
    return tf.constant(np.asarray(features, dtype=np.float32))


def without_autotuning(ds: tf.data.Dataset, buffer: int = 2) -> tf.data.Dataset:
    """`ds` prefetching `buffer` batches, with tf.data's autotuning off. The autotuner's thread sleeps up to a
    minute between its optimisations, and deleting an iterator waits for it to wake: on debtags model.fit returned
    up to 40 s after its last epoch (a 50 s training), in most runs. Batches sliced from memory need no tuning.

        >>> ds = without_autotuning(tf.data.Dataset.range(5).batch(2))
        >>> [b.tolist() for b in ds.as_numpy_iterator()], ds.options().autotune.enabled
        ([[0, 1], [2, 3], [4]], False)
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    return ds.prefetch(buffer).with_options(options)


def make_dataset(features: np.ndarray | sp.spmatrix, labels: sp.spmatrix | np.ndarray | None = None, *,
                 batch_size: int = 256, shuffle: bool = False, seed: int = 0) -> tf.data.Dataset:
    """Batches of `features` (or of `(features, labels)`), reshuffled each epoch when `shuffle`."""
    x = _features_tensor(features)
    if labels is None:
        ds = tf.data.Dataset.from_tensor_slices(x)
    else:
        ds = tf.data.Dataset.from_tensor_slices((x, to_sparse_tensor(sp.csr_matrix(labels))))
    if shuffle:
        ds = ds.shuffle(int(np.shape(features)[0]), seed=seed, reshuffle_each_iteration=True)
    return without_autotuning(ds.batch(batch_size))


def batch_scorer(fn: Callable[[tf.Tensor | tf.SparseTensor], Any]) -> Callable[[np.ndarray | sp.spmatrix, int], Any]:
    """`score(x, batch_size)`: `fn`'s output for the rows of `x` (a scipy-sparse or numpy matrix), `batch_size` rows
    at a time, concatenated; `fn` is traced once, for batches of any size (a last, shorter batch does not trace it
    again). What the training's validation ranking and `settle` score rows with. A `fn` answering with a tuple
    of tensors (`CDGTModel.answers`) gives a tuple of matrices.

        >>> score = batch_scorer(lambda x: tf.sparse.reduce_sum(x, axis=1, keepdims=True))
        >>> score(sp.csr_matrix(np.arange(6.0).reshape(3, 2)), 2).ravel().tolist()
        [1.0, 5.0, 9.0]
        >>> pair = batch_scorer(lambda x: (tf.sparse.reduce_sum(x, axis=1), -tf.sparse.reduce_sum(x, axis=1)))
        >>> [part.tolist() for part in pair(sp.csr_matrix(np.arange(6.0).reshape(3, 2)), 2)]
        [[1.0, 5.0, 9.0], [-1.0, -5.0, -9.0]]
    """
    traced = tf.function(lambda x: fn(x), autograph=False)  # one argument: `fn` may have optional ones (fused_probs)
    concrete: list[Callable] = []

    def score(x: np.ndarray | sp.spmatrix, batch_size: int) -> np.ndarray | tuple[np.ndarray, ...]:
        parts: list[Any] = []
        for i in range(0, max(x.shape[0], 1), batch_size):  # no rows: one empty batch, for the answer's width
            batch = _features_tensor(x[i:i + batch_size])
            if not concrete:
                spec = tf.type_spec_from_value(batch)
                wide = (tf.SparseTensorSpec if isinstance(batch, tf.SparseTensor) else tf.TensorSpec)(
                    [None, *spec.shape[1:]], spec.dtype)
                concrete.append(traced.get_concrete_function(wide))
            out = concrete[0](batch)
            parts.append(tuple(t.numpy() for t in out) if isinstance(out, tuple) else out.numpy())
        return tuple(map(np.concatenate, zip(*parts))) if isinstance(parts[0], tuple) else np.concatenate(parts)

    return score
