"""Label centroids: each label's mean training document, scored by its cosine with an input, beside the players'.

A rare label's few training documents leave little trace in a 512-unit hidden layer, and the neighbour votes
(cdgt_keras.neighbours) reach it only when one of its documents is among an input's k nearest. A centroid
summarises all of a label's documents at once: c_l is the sum of the unit-length training rows that carry label l,
keeping its `max_features` largest entries (a label's summary, and a bound on the memory), scaled to unit length.
An input x scores label l by max(0, cos(x, c_l)), and the model answers (1 - mu) p + mu centroids, with mu tuned on
validation like the votes' weight (`cdgt_keras.settling.settle`). The centroids ride in the saved and exported
model as (non-trainable) weights, in the input's (featurized) space.

Example:
    >>> import scipy.sparse as sp
    >>> x = sp.csr_matrix([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 2.0]])
    >>> y = sp.csr_matrix([[1, 0], [1, 0], [0, 1]])
    >>> centroid_matrix(x, y).toarray().astype(float).round(3).tolist()   # label 0: rows 0 and 1; label 1: row 2
    [[0.707, 0.707, 0.0], [0.0, 0.0, 1.0]]
    >>> layer = LabelCentroids(num_features=3, num_labels=2, nnz=3)
    >>> layer.remember(x, y)
    >>> [round(float(v), 3) for v in layer(tf.constant([[1.0, 0.0, 1.0]]))[0]]
    [0.5, 0.707]
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import scipy.sparse as sp
import tensorflow as tf

from cdgt_keras import postings

CHUNK_ROWS = 32  # query rows scored at once (bounds a large batch's dense query rows: CHUNK_ROWS x features)


def centroid_matrix(features: Any, labels: Any, max_features: int = 0) -> sp.csr_matrix:
    """[L, F] unit-length label centroids: per label, the sum of its training rows (each scaled to unit length),
    kept to its `max_features` largest entries (0: all; ties go to the lower feature id), scaled to unit length.
    A label without training rows has an empty row.

    Example:
        >>> x, y = sp.csr_matrix([[3.0, 1.0, 2.0]]), sp.csr_matrix([[1]])
        >>> centroid_matrix(x, y, max_features=2).toarray().astype(float).round(3).tolist()  # 3 and 2 kept
        [[0.832, 0.0, 0.555]]
    """
    x = sp.csr_matrix(features, dtype=np.float64)
    y = sp.csr_matrix(labels, dtype=np.float64)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"features have {x.shape[0]} rows, labels {y.shape[0]}")
    norms = np.sqrt(np.asarray(x.multiply(x).sum(axis=1)).ravel())
    # row-major on both sides: y.T (csc) @ x converted all of x to csc first (2.5 s of debtags' 3.4); each sum
    # runs over the training rows in ascending order either way
    sums = sp.csr_matrix(y.T) @ (sp.diags(1.0 / np.maximum(norms, 1e-12)) @ x)
    sums.sum_duplicates()
    sums.eliminate_zeros()
    if max_features and sums.nnz:
        sums = postings.largest_per_row(sums, int(max_features))
    return unit_rows(sums)


def unit_rows(matrix: Any) -> sp.csr_matrix:
    """`matrix` as float32 csr with each non-empty row scaled to unit length (in float64) and explicit zeros
    dropped: what the layer's cosine assumes, whichever rows it holds (centroids, label texts).

        >>> unit_rows(sp.csr_matrix([[3.0, 0.0, 4.0], [0.0, 0.0, 0.0]])).toarray().astype(float).round(3).tolist()
        [[0.6, 0.0, 0.8], [0.0, 0.0, 0.0]]
    """
    m = sp.csr_matrix(matrix, dtype=np.float64, copy=True)  # the caller's arrays may be read-only
    m.eliminate_zeros()
    lengths = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
    out = sp.csr_matrix(sp.diags(1.0 / np.maximum(lengths, 1e-12)) @ m, dtype=np.float32)
    out.sort_indices()
    return out


def centroid_nnz(features: Any, labels: Any, max_features: int) -> int:
    """The number of entries `centroid_matrix(features, labels, max_features)` keeps (the layer's weight size)."""
    return int(centroid_matrix(features, labels, max_features).nnz)


@keras.saving.register_keras_serializable(package="cdgt")
class LabelCentroids(keras.layers.Layer):
    """Scores [B, L]: max(0, cos(input row, label centroid)) for the `nnz`-entry centroid matrix it remembers."""

    def __init__(self, num_features: int, num_labels: int, nnz: int, decides: bool = False, **kwargs: Any):
        super().__init__(**kwargs)
        self.decides = bool(decides)
        self.num_features, self.num_labels, self.nnz = int(num_features), int(num_labels), int(nnz)
        frozen = {"trainable": False, "initializer": "zeros"}
        # the centroids' entries ordered by feature, as (feature, label) index pairs of one SparseTensor [F, L]
        self.entries = self.add_weight(shape=(self.nnz, 2), dtype="int64", name="entries", **frozen)
        self.values = self.add_weight(shape=(self.nnz,), dtype="float32", name="values", **frozen)
        # where each feature's entries start (its posting list: cdgt_keras.postings), and the end
        self.splits = self.add_weight(shape=(self.num_features + 1,), dtype="int64", name="splits", **frozen)
        self.weight = self.add_weight(shape=(), dtype="float32", name="weight", **frozen)
        self.tuning: dict[float, float] = {}  # validation P@k per weight (k: memory_tuning_k), set by settle
        # the tail labels' own weight (config.tail_memory="own"; cdgt_keras.tail_memory); below 0, they take `weight`
        self.tail_weight = self.add_weight(shape=(), dtype="float32", name="tail_weight", trainable=False,
                                           initializer=keras.initializers.Constant(-1.0))
        # the tail labels' weight in the decisions alone (config.tail_decisions="own", `decides`); below 0, the
        # ranking's; None without `decides` (a model saved before it has no such variable)
        self.decision_weight = self.add_weight(shape=(), dtype="float32", name="decision_weight", trainable=False,
                                               initializer=keras.initializers.Constant(-1.0)) if decides else None
        self.built = True

    def remember(self, features: Any, labels: Any, max_features: int = 0) -> None:
        """Store the centroids of these training rows and labels; their size must be the layer's."""
        self.store(centroid_matrix(features, labels, max_features))

    def store(self, rows: sp.csr_matrix) -> None:
        """Store [L, F] rows of length at most 1 (unit, or empty, or a mean of unit rows) as the layer's table, e.g.
        the label texts (cdgt_keras.label_text); their size must be the layer's."""
        c = sp.csr_matrix(rows, dtype=np.float32)
        if c.shape != (self.num_labels, self.num_features) or c.nnz != self.nnz:
            raise ValueError(f"the layer {self.name!r} holds {self.nnz} entries of [{self.num_labels}, "
                             f"{self.num_features}] rows, got {c.nnz} of {list(c.shape)}")
        by_feature = sp.csc_matrix(c)
        by_feature.sort_indices()
        feature_ids = np.repeat(np.arange(self.num_features, dtype=np.int64), np.diff(by_feature.indptr))
        self.entries.assign(np.stack([feature_ids, by_feature.indices.astype(np.int64)], axis=1))
        self.values.assign(by_feature.data.astype(np.float32))
        self.splits.assign(by_feature.indptr.astype(np.int64))

    def call(self, inputs: Any) -> tf.Tensor:
        query = inputs if isinstance(inputs, tf.SparseTensor) else tf.sparse.from_dense(tf.convert_to_tensor(inputs))
        query = tf.sparse.SparseTensor(query.indices, tf.cast(query.values, tf.float32), query.dense_shape)
        batch, width = query.dense_shape[0], query.dense_shape[1]
        chunks = tf.maximum((batch + CHUNK_ROWS - 1) // CHUNK_ROWS, 1)  # one (empty) chunk for an empty batch

        def body(i: tf.Tensor, parts: tf.TensorArray) -> tuple:
            start = i * CHUNK_ROWS
            part = tf.sparse.slice(query, tf.stack([start, 0]), tf.stack([CHUNK_ROWS, width]))
            part = tf.SparseTensor(part.indices, part.values, tf.stack([tf.minimum(batch - start, CHUNK_ROWS), width]))
            scores = postings.product(postings.unit_rows(part), self.splits, self.entries, self.values,
                                      self.num_features, self.num_labels)
            return i + 1, parts.write(tf.cast(i, tf.int32), tf.maximum(scores, 0.0))

        parts = tf.TensorArray(tf.float32, size=tf.cast(chunks, tf.int32), infer_shape=False,
                               element_shape=tf.TensorShape([None, self.num_labels]))
        _, parts = tf.while_loop(lambda i, _: i < chunks, body, (tf.constant(0, tf.int64), parts))
        return tf.reshape(parts.concat(), [-1, self.num_labels])

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "num_features": self.num_features, "num_labels": self.num_labels,
                "nnz": self.nnz, "decides": self.decides}
