"""Posting lists: a query's products with a remembered sparse matrix that read only the query's features' entries.

The neighbour votes (cdgt_keras.neighbours) and the label centroids (cdgt_keras.centroids) keep a sparse matrix
[F, N] ordered by feature (N: training rows or labels) and score a query row x by x^T M. A sparse-dense product
reads every one of M's entries for every chunk of queries: millions at 10^4-10^5 labels or rows, whatever the query.
A document has tens of features, and the entries of those features (their posting lists, `splits[f]` to
`splits[f + 1]`) are what its answer needs; reading those alone makes a one-row query cost what its features' lists
hold. For a chunk of many rows, with common features, the lists can hold most of M, and the plain product (one
pass, no gathers) is the cheaper road: `product` takes the posting lists when they hold fewer than
`nnz / READ_RATIO` entries in all, the plain product otherwise. Both roads run the same kernel over M's entries in
the same order, so they give the same scores to the bit (a test holds them equal).

A cap on the lists' length (`cap_lists`, config.memory_list_cap) bounds what a query reads: each feature keeps its
`cap` largest entries, so a common word's list (tens of thousands of training rows, each with a small TF-IDF
weight) is cut to the rows where it weighs most. The scores are then partial sums, an approximation measured in
the bench; with no cap (0) nothing changes.

Example (M [3 features, 2 columns]; the query has feature 2 only, so only its one entry is read):
    >>> entries = tf.constant([[0, 0], [1, 1], [2, 0]], tf.int64); values = tf.constant([1.0, 2.0, 3.0])
    >>> splits = tf.constant([0, 1, 2, 3], tf.int64)
    >>> query = tf.sparse.from_dense(tf.constant([[0.0, 0.0, 2.0]]))
    >>> posting_product(query, splits, entries, values, num_columns=2).numpy().tolist()
    [[6.0, 0.0]]
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
import tensorflow as tf

# the posting lists are read when they hold fewer than nnz / READ_RATIO entries: cutting the lists out costs about
# half what multiplying their entries costs (a probe of queries against deps-all's neighbour memory, 3.2M entries:
# a row's 65k in 3.0 ms against 27 ms for all; 32 rows' 0.97M in 42 ms against 68 ms; 128 rows' 1.5M in 176 ms
# against 249 ms)
READ_RATIO = 1.5
# `column_counts` counts this many entries at a time (a bounded int64 copy: 8 MB, not 8 bytes an entry of all)
COUNT_CHUNK = 1 << 20


def unit_rows(query: tf.SparseTensor) -> tf.SparseTensor:
    """The query's rows scaled to unit length (rows of zeros stay zero)."""
    rows = query.indices[:, 0]
    squares = tf.math.unsorted_segment_sum(tf.square(query.values), rows, query.dense_shape[0])
    scale = tf.math.rsqrt(tf.maximum(squares, 1e-12))  # as tf.math.l2_normalize does
    return tf.SparseTensor(query.indices, query.values * tf.gather(scale, rows), query.dense_shape)


def posting_product(query: tf.SparseTensor, splits: tf.Tensor, entries: tf.Tensor, values: tf.Tensor,
                    num_columns: int | tf.Tensor) -> tf.Tensor:
    """query [B, F] times the matrix M [F, num_columns] whose entries are (`entries` [nnz, 2] of (feature, column),
    `values` [nnz]) in feature order, feature f's at `splits[f]:splits[f + 1]`: a dense [B, num_columns], reading
    the query's features' entries only.

    The lists of the chunk's features (each once, in feature order) are cut out by their positions (one RaggedRange
    and two gathers) and multiplied as the plain product multiplies all of M: the same kernel over a subset of its
    entries in the same order, so every score is the plain product's to the bit (the skipped entries only ever
    added 0). RaggedGather of the lists took three to six times as long (deps-all, one row of real text)."""
    features = tf.sort(tf.unique(query.indices[:, 1])[0])
    at = tf.ragged.range(tf.gather(splits, features), tf.gather(splits, features + 1)).flat_values
    table = tf.SparseTensor(tf.gather(entries, at), tf.gather(values, at),
                            tf.stack([query.dense_shape[1], tf.cast(num_columns, tf.int64)]))
    dense = tf.sparse.to_dense(query)
    return tf.transpose(tf.sparse.sparse_dense_matmul(table, dense, adjoint_a=True, adjoint_b=True))


def plain_product(query: tf.SparseTensor, entries: tf.Tensor, values: tf.Tensor, num_features: int | tf.Tensor,
                  num_columns: int | tf.Tensor) -> tf.Tensor:
    """The same product by a sparse-dense matmul over every entry of M (the query rows made dense)."""
    table = tf.SparseTensor(entries, values, tf.cast(tf.stack([num_features, num_columns]), tf.int64))
    dense = tf.sparse.to_dense(query)
    return tf.transpose(tf.sparse.sparse_dense_matmul(table, dense, adjoint_a=True, adjoint_b=True))


def product(query: tf.SparseTensor, splits: tf.Tensor, entries: tf.Tensor, values: tf.Tensor,
            num_features: int, num_columns: int) -> tf.Tensor:
    """query [B, F] times M [F, num_columns] by the cheaper road for this query (module docstring)."""
    features = tf.unique(query.indices[:, 1])[0]
    read = tf.cast(tf.reduce_sum(tf.gather(splits, features + 1) - tf.gather(splits, features)), tf.float64)
    return tf.cond(read * READ_RATIO < tf.cast(tf.shape(values, out_type=tf.int64)[0], tf.float64),
                   lambda: posting_product(query, splits, entries, values, num_columns),
                   lambda: plain_product(query, entries, values, num_features, num_columns))


def column_counts(matrix: Any) -> np.ndarray:
    """Each column's entries in `matrix` (duplicates summed, zeros not counted), read off its row-major indices:
    no column-major copy (on debtags' 24k training rows of 20.7M entries, 0.1 s where one took 1.3 s).

        >>> column_counts(sp.csr_matrix([[1.0, 2.0], [3.0, 0.0], [5.0, 0.0]])).tolist()
        [3, 1]
    """
    m = sp.csr_matrix(matrix)
    if not m.has_canonical_format:
        m = m.copy()  # the caller's arrays may be read-only
        m.sum_duplicates()
    ids = m.indices if np.count_nonzero(m.data) == m.nnz else m.indices[m.data != 0]
    counts = np.zeros(m.shape[1], dtype=np.int64)
    for start in range(0, ids.size, COUNT_CHUNK):  # bincount copies its input to int64: a chunk at a time
        counts += np.bincount(ids[start:start + COUNT_CHUNK], minlength=m.shape[1])
    return counts


def capped_nnz(matrix: Any, cap: int, first: int = 0) -> int:
    """The entries `cap_lists(matrix, cap)` keeps in the columns from `first` on: per column (feature), at most
    `cap` (0: no cap).

        >>> capped_nnz(sp.csr_matrix([[1.0, 2.0], [3.0, 0.0], [5.0, 0.0]]), 2)   # column 0 keeps 2 of its 3
        3
        >>> capped_nnz(sp.csr_matrix([[1.0, 2.0], [3.0, 0.0], [5.0, 0.0]]), 2, first=1)
        1
    """
    counts = column_counts(matrix)[int(first):]
    return int(np.minimum(counts, int(cap)).sum()) if cap else int(counts.sum())


def cap_lists(matrix: Any, cap: int) -> Any:
    """[N, F] `matrix` with each column (a feature's posting list) kept to its `cap` largest entries (ties: the
    lower row); `matrix` itself when no list is longer (or `cap` is 0), so that the uncapped road is unchanged.

        >>> m = sp.csr_matrix([[1.0, 2.0], [3.0, 0.0], [3.0, 0.0]])
        >>> cap_lists(m, 1).toarray().tolist()   # column 0: a tie of 3s, the lower row kept
        [[0.0, 2.0], [3.0, 0.0], [0.0, 0.0]]
    """
    if not cap or column_counts(matrix).max(initial=0) <= cap:
        return matrix
    return sp.csr_matrix(capped_columns(matrix, cap), dtype=sp.csr_matrix(matrix).dtype)


def capped_columns(matrix: Any, cap: int) -> sp.csc_matrix:
    """`cap_lists(matrix, cap)` in column-major order (a csc matrix with sorted indices, duplicates summed and
    zeros dropped): what a posting-list memory stores, made with one conversion instead of three.

        >>> capped_columns(sp.csr_matrix([[1.0, 2.0], [3.0, 0.0], [3.0, 0.0]]), 1).toarray().tolist()
        [[0.0, 2.0], [3.0, 0.0], [0.0, 0.0]]
    """
    m = sp.csc_matrix(matrix, copy=True)  # the caller's arrays may be read-only
    m.sum_duplicates()
    m.eliminate_zeros()
    if cap and np.diff(m.indptr).max(initial=0) > cap:
        m = largest_per_row(m.T, int(cap)).T  # a csc matrix's transpose is the csr of its columns, no copy
    m.sort_indices()
    return m


def largest_per_row(m: sp.csr_matrix, keep: int) -> sp.csr_matrix:
    """`m` with each row's `keep` largest entries (ties: the lower column id): a label centroid's features
    (cdgt_keras.centroids), a feature's posting list (`cap_lists`, on the transposed matrix). A row longer
    than `keep` is cut at its keep-th largest value t by a partition, not a sort: its entries above t stay, and of
    those equal to t the ones of the lowest columns (on debtags' label centroids, 0.03 s where a sort of every
    entry took 0.4-0.6 s).

        >>> largest_per_row(sp.csr_matrix([[1.0, 3.0, 3.0]]), 1).toarray().tolist()
        [[0.0, 3.0, 0.0]]
    """
    if keep < 1:
        return sp.csr_matrix(m.shape, dtype=m.dtype)
    m.sort_indices()
    lengths = np.diff(m.indptr)
    kept = np.ones(m.nnz, dtype=bool)
    for row in np.flatnonzero(lengths > keep):  # only these rows lose entries
        start, stop = m.indptr[row], m.indptr[row + 1]
        values = m.data[start:stop]
        cut = np.partition(values, values.size - keep)[values.size - keep]  # the keep-th largest
        row_kept = values > cut
        row_kept[np.flatnonzero(values == cut)[:keep - np.count_nonzero(row_kept)]] = True  # columns ascend
        kept[start:stop] = row_kept
    # a longer row keeps exactly `keep`, in place: the rows' ends without a pass over every entry, nor a re-sort
    indptr = np.concatenate([[0], np.cumsum(np.minimum(lengths, keep))])
    if np.count_nonzero(kept) != indptr[-1]:  # a NaN is neither above nor equal to the cut
        raise ValueError("largest_per_row: the matrix holds non-finite values")
    return sp.csr_matrix((m.data[kept], m.indices[kept], indptr), shape=m.shape)
