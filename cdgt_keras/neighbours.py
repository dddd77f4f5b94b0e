"""Neighbour votes: the labels of the k training documents nearest to an input, as scores beside the players'.

A deep model over 10^5 sparse inputs generalises through its hidden layer, and a label with two or three training
documents leaves almost no trace there: on the 18.6k-label dependency task the players rank no test positive of a
label with at most 8 training documents in their top 5. The training documents themselves remember those labels.
`NeighbourVotes` keeps the featurized training rows (unit length) and their label lists as the model's
(non-trainable) weights, so the votes travel inside the saved and the exported model: for an input x it takes the k
training rows of highest cosine similarity and scores label l by sum_j s_j y_jl / sum_j s_j (similarities below 0
count as 0). The model answers (1 - w) p_hat + w votes, with w tuned on validation (`cdgt_keras.settling`).

Example:
    >>> import scipy.sparse as sp
    >>> x, y = sp.csr_matrix([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), sp.csr_matrix([[1, 0], [0, 1], [1, 1]])
    >>> layer = NeighbourVotes(MemoryShape.of(x, y), num_labels=2, k=2)
    >>> layer.remember(x, y)
    >>> [round(float(v), 3) for v in layer(tf.constant([[1.0, 0.0]]))[0]]   # nearest: row 0 (1.0), row 2 (0.707)
    [1.0, 0.414]
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import keras
import numpy as np
import scipy.sparse as sp
import tensorflow as tf

from cdgt_keras import centroids as ct  # the module: importable first without a cycle (registration.py)
from cdgt_keras import postings
from cdgt_keras.sparse import leading_block

CHUNK_ROWS = 32  # query rows whose similarities are computed at once (bounds the memory of a large batch)
# ... against a dense memory (an encoder's space), where each chunk reads the whole [N, width] matrix: 256 rows
# read it an eighth as often (debtags' 3,148 validation rows against 24k rows of 512: 1.7 s instead of 3.2 s)
DENSE_CHUNK_ROWS = 256
# ... against a sparse memory with a dense block (`MemoryShape.dense_columns`), whose lists hold the other columns'
# entries only (debtags: 2.0M of 5.8M): the block's product is a matrix product, more efficient on more rows at once
# (debtags' validation rows: 2.1 s at 128, 2.3-2.6 s at 32 and 64, 2.7 s at 256)
BLOCK_CHUNK_ROWS = 128


@dataclass(frozen=True)
class MemoryShape:
    """The sizes of the remembered training split (the weights' shapes, known before training starts)."""

    num_train: int
    num_features: int
    features_nnz: int
    labels_nnz: int
    dense: bool = False  # the rows are kept as a dense [num_train, num_features] matrix (an encoder's space)
    centroid_nnz: int = 0  # entries of the label centroids (cdgt_keras.centroids), always in the input's space
    label_text_nnz: int = 0  # entries of the label texts (cdgt_keras.label_text), in the input's space too
    list_cap: int = 0  # each feature's entries kept to this many, the largest (cdgt_keras.postings.cap_lists; 0: all)
    # a dense memory whose rows were given this wide and are kept projected to `num_features` dimensions (their
    # leading singular directions: `project`); 0, kept as given
    projected_from: int = 0
    # a projected memory that also keeps its rows at full width: the `rerank` rows nearest by projected cosine are
    # re-scored by their full cosines, and the k nearest of those vote (0: the projected cosines decide)
    rerank: int = 0
    # a sparse memory whose input's leading columns (a text embedding's, which every row fills) are kept as a dense
    # block [num_train, dense_columns], each column capped as a list is (entries beyond its `list_cap` largest are
    # 0) and multiplied as a dense product; `features_nnz` counts the other columns' entries (0: no block)
    dense_columns: int = 0

    @classmethod
    def of(cls, features: Any, labels: Any, centroid_features: int | None = None,
           label_features: Any = None, centroids: Any = None, list_cap: int = 0,
           dense_columns: int = 0) -> MemoryShape:
        """The shape of the memory of these training features (dense or sparse) and multi-hot labels; with
        `centroid_features` (not None), the size of their label centroids kept to that many features each (or of
        `centroids`, those centroids made already by `centroid_matrix`: on deps they take 5 s to make); with
        `label_features` ([L, F], cdgt_keras.label_text), the size of the label texts; with `list_cap`, each of
        them kept to that many entries per feature (cdgt_keras.postings.cap_lists); with `dense_columns`, the
        features' leading columns kept as a dense block (the field's comment)."""
        x, y = sp.csr_matrix(features), sp.csr_matrix(labels)  # may share the caller's (read-only) arrays
        if centroids is None and centroid_features is not None and list_cap:
            centroids = ct.centroid_matrix(x, y, centroid_features)
        if centroids is not None:
            cents = postings.capped_nnz(centroids, list_cap) if list_cap else int(sp.csr_matrix(centroids).nnz)
        else:
            cents = 0 if centroid_features is None else ct.centroid_nnz(x, y, centroid_features)
        if label_features is None:
            texts = 0
        else:
            texts = postings.capped_nnz(label_features, list_cap) if list_cap else \
                int(sp.csr_matrix(label_features).count_nonzero())
        if not 0 <= dense_columns <= x.shape[1]:
            raise ValueError(f"dense_columns={dense_columns} is not in [0, {x.shape[1]}] (the features' columns)")
        features_nnz = postings.capped_nnz(x, list_cap, first=dense_columns)  # the block's columns have no lists
        return cls(int(x.shape[0]), int(x.shape[1]), features_nnz, int(y.count_nonzero()),
                   centroid_nnz=cents, label_text_nnz=texts, list_cap=int(list_cap), dense_columns=int(dense_columns))

    @staticmethod
    def wanted(config: Any) -> bool:
        """Whether `config` asks for a memory (neighbour votes, label centroids or label texts)."""
        return bool(config.neighbours or config.centroid_features or config.label_text)

    @classmethod
    def for_config(cls, config: Any, features: Any, labels: Any, label_features: Any = None,
                   centroids: Any = None, embedding_columns: int = 0) -> MemoryShape | None:
        """The memory `config` asks for (neighbour votes, label centroids (`centroids`, when made already),
        label texts: `label_features`, when the data have them), or None when it asks for none; the features'
        leading `embedding_columns` (a text embedding's) kept as the votes' dense block."""
        if not cls.wanted(config):
            return None
        return cls.of(features, labels, config.centroid_features if config.centroid_features else None,
                      label_features if config.label_text else None, centroids, config.memory_list_cap,
                      embedding_columns if config.neighbours else 0)

    def in_space(self, width: int, dims: int = 0, rerank: int = 0) -> MemoryShape:
        """The memory of the same rows and labels mapped to a dense space of `width` (e.g. the encoder's); with
        0 < `dims` < `width`, kept projected to `dims` dimensions (`project`), and with `rerank` > 0 at full width
        as well, to re-score that many candidates exactly (without a projection the search is exact already)."""
        kept = int(dims) if 0 < dims < width else int(width)
        projected = kept < width
        return MemoryShape(self.num_train, kept, self.num_train * kept, self.labels_nnz, dense=True,
                           centroid_nnz=self.centroid_nnz, label_text_nnz=self.label_text_nnz,
                           list_cap=self.list_cap, projected_from=int(width) if projected else 0,
                           rerank=int(rerank) if projected else 0)  # no dense block: all of it is dense

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@keras.saving.register_keras_serializable(package="cdgt")
class NeighbourVotes(keras.layers.Layer):
    """Label votes [B, L] of the `k` remembered training rows nearest (cosine) to each input row."""

    def __init__(self, shape: MemoryShape | dict[str, int], num_labels: int, k: int, decides: bool = False,
                 **kwargs: Any):
        super().__init__(**kwargs)
        self.decides = bool(decides)
        self.shape = shape if isinstance(shape, MemoryShape) else MemoryShape(**shape)
        self.num_labels, self.k = int(num_labels), min(int(k), self.shape.num_train)
        s = self.shape
        frozen = {"trainable": False, "initializer": "zeros"}
        if s.dense:
            self.x_dense = self.add_weight(shape=(s.num_train, s.num_features), dtype="float32", name="x_dense",
                                           **frozen)
            if s.projected_from:  # the map of a query (unit length) onto the kept dimensions
                self.projection = self.add_weight(shape=(s.projected_from, s.num_features), dtype="float32",
                                                  name="projection", **frozen)
            if s.rerank:  # the rows at full width (unit length), read only at a query's candidates
                self.x_full = self.add_weight(shape=(s.num_train, s.projected_from), dtype="float32",
                                              name="x_full", **frozen)
        else:  # the training rows' entries ordered by feature (the transposed matrix in row-major order), as the
            # (feature, row) index pairs of one SparseTensor: stacking two index vectors at every call copied them
            # all and took three quarters of a one-row query's time (22 ms against 5.6 ms on debtags)
            self.x_entries = self.add_weight(shape=(s.features_nnz, 2), dtype="int64", name="x_entries", **frozen)
            self.x_values = self.add_weight(shape=(s.features_nnz,), dtype="float32", name="x_values", **frozen)
            # where each feature's entries start (its posting list: cdgt_keras.postings), and the end
            self.x_splits = self.add_weight(shape=(s.num_features + 1,), dtype="int64", name="x_splits", **frozen)
            if s.dense_columns:  # the leading columns' entries, a dense block (their lists stay empty)
                self.x_block = self.add_weight(shape=(s.num_train, s.dense_columns), dtype="float32",
                                               name="x_block", **frozen)
        self.y_splits = self.add_weight(shape=(s.num_train + 1,), dtype="int64", name="y_splits", **frozen)
        self.y_ids = self.add_weight(shape=(s.labels_nnz,), dtype="int64", name="y_ids", **frozen)
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

    def remember(self, features: Any, labels: Any) -> None:
        """Store the training rows (scaled to unit length) and their label lists; shapes must match."""
        y = sp.csr_matrix(labels, copy=True)
        y.sum_duplicates()
        y.eliminate_zeros()
        y.sort_indices()
        if self.shape.dense:
            x = np.asarray(features.toarray() if sp.issparse(features) else features, dtype=np.float32)
            x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
            got = MemoryShape(x.shape[0], x.shape[1], x.size, int(y.nnz), dense=True)
            if self.shape.projected_from:
                got = got.in_space(x.shape[1], self.shape.num_features, self.shape.rerank)
        else:
            x = sp.csr_matrix(features, dtype=np.float32, copy=True)
            x.sum_duplicates()
            x.eliminate_zeros()
            got = MemoryShape.of(x, y, list_cap=self.shape.list_cap, dense_columns=self.shape.dense_columns)
        # the centroids and label texts are LabelCentroids' to check
        got = replace(got, centroid_nnz=self.shape.centroid_nnz, label_text_nnz=self.shape.label_text_nnz,
                      list_cap=self.shape.list_cap)
        if got != self.shape:
            raise ValueError(f"the memory holds {self.shape}, got training data of {got}")
        if self.shape.dense and self.shape.projected_from:
            basis = project(x, self.shape.num_features)
            low = x @ basis
            self.projection.assign(basis)
            self.x_dense.assign(low / np.maximum(np.linalg.norm(low, axis=1, keepdims=True), 1e-12))
            if self.shape.rerank:
                self.x_full.assign(x)
        elif self.shape.dense:
            self.x_dense.assign(x)
        else:
            norms = np.sqrt(np.asarray(x.multiply(x).sum(axis=1)).ravel())
            # unit rows first, then the cap: a capped list's scores are the exact cosines' partial sums
            by_feature = postings.capped_columns(sp.diags(1.0 / np.maximum(norms, 1e-12)) @ x,
                                                 self.shape.list_cap).astype(np.float32)
            n = self.shape.dense_columns
            if n:  # the block's columns leave the lists (their splits stay at 0) for the dense block
                self.x_block.assign(by_feature[:, :n].toarray())
                lists = np.diff(by_feature.indptr)
                lists[:n] = 0
                rest = by_feature[:, n:]
                by_feature = sp.csc_matrix((rest.data, rest.indices, np.concatenate([[0], np.cumsum(lists)])),
                                           shape=by_feature.shape)
            features = np.repeat(np.arange(x.shape[1], dtype=np.int64), np.diff(by_feature.indptr))
            self.x_entries.assign(np.stack([features, by_feature.indices.astype(np.int64)], axis=1))
            self.x_values.assign(by_feature.data.astype(np.float32))
            self.x_splits.assign(by_feature.indptr.astype(np.int64))
        self.y_splits.assign(y.indptr.astype(np.int64))
        self.y_ids.assign(y.indices.astype(np.int64))

    def call(self, inputs: Any) -> tf.Tensor:
        query = inputs if isinstance(inputs, tf.SparseTensor) else tf.sparse.from_dense(tf.convert_to_tensor(inputs))
        query = tf.sparse.SparseTensor(query.indices, tf.cast(query.values, tf.float32), query.dense_shape)
        top, docs = self.nearest(query)
        top = tf.maximum(top, 0.0)
        labels = tf.RaggedTensor.from_row_splits(self.y_ids, self.y_splits, validate=False)
        picked = tf.gather(labels, tf.reshape(docs, [-1]))  # [B * k, None]
        counts = picked.row_lengths()
        batch = tf.shape(top, out_type=tf.int64)[0]
        weights = tf.repeat(tf.reshape(top, [-1]), counts)
        rows = tf.repeat(tf.repeat(tf.range(batch), self.k), counts)
        votes = tf.math.unsorted_segment_sum(weights, rows * self.num_labels + picked.flat_values,
                                             batch * self.num_labels)
        votes = tf.reshape(votes, tf.stack([batch, tf.constant(self.num_labels, tf.int64)]))
        return votes / tf.maximum(tf.reduce_sum(top, axis=1, keepdims=True), 1e-12)

    def nearest(self, query: tf.SparseTensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Similarities [B, k] and row ids [B, k] of the k nearest remembered rows, `CHUNK_ROWS` query rows at a
        time (`DENSE_CHUNK_ROWS` against a dense memory, `BLOCK_CHUNK_ROWS` against one with a dense block), so
        that a large batch never holds more than that many dense query rows and similarity rows."""
        size = DENSE_CHUNK_ROWS if self.shape.dense else BLOCK_CHUNK_ROWS if self.shape.dense_columns else CHUNK_ROWS
        batch = query.dense_shape[0]
        chunks = tf.maximum((batch + size - 1) // size, 1)  # one (empty) chunk for an empty batch
        width = query.dense_shape[1]

        def body(i: tf.Tensor, values: tf.TensorArray, ids: tf.TensorArray) -> tuple:
            start = i * size
            part = tf.sparse.slice(query, tf.stack([start, 0]), tf.stack([size, width]))
            part = tf.SparseTensor(part.indices, part.values, tf.stack([tf.minimum(batch - start, size), width]))
            top, docs = self.reranked(part) if self.shape.rerank else tf.math.top_k(self.similarities(part), k=self.k)
            return i + 1, values.write(tf.cast(i, tf.int32), top), ids.write(tf.cast(i, tf.int32), docs)

        arrays = (tf.TensorArray(tf.float32, size=tf.cast(chunks, tf.int32), infer_shape=False,
                                 element_shape=tf.TensorShape([None, self.k])),
                  tf.TensorArray(tf.int32, size=tf.cast(chunks, tf.int32), infer_shape=False,
                                 element_shape=tf.TensorShape([None, self.k])))
        _, values, ids = tf.while_loop(lambda i, *_: i < chunks, body, (tf.constant(0, tf.int64), *arrays))
        return (tf.reshape(values.concat(), [-1, self.k]), tf.reshape(ids.concat(), [-1, self.k]))

    def similarities(self, query: tf.SparseTensor) -> tf.Tensor:
        """Cosine similarities [B, N] of the query rows with the remembered rows (B: a chunk of `nearest`'s):
        in a dense memory the query rows made dense times it; in a sparse one, the query's features' posting
        lists or a pass over every entry, whichever reads less (cdgt_keras.postings), plus the query's leading
        columns times the dense block where the memory keeps one (the same sum in another order)."""
        s = self.shape
        if s.dense:
            return self.dense_similarities(tf.math.l2_normalize(tf.sparse.to_dense(query), axis=1))
        unit = postings.unit_rows(query)
        lists = postings.product(unit, self.x_splits, self.x_entries, self.x_values, s.num_features, s.num_train)
        if not s.dense_columns:
            return lists
        return lists + tf.matmul(leading_block(unit, s.dense_columns), self.x_block, transpose_b=True)

    def dense_similarities(self, rows: tf.Tensor) -> tf.Tensor:
        """Cosine similarities [B, N] of unit query rows [B, width] with a dense memory's rows (projected first
        when the memory is)."""
        if self.shape.projected_from:
            rows = tf.math.l2_normalize(tf.matmul(rows, self.projection), axis=1)
        return tf.matmul(rows, self.x_dense, transpose_b=True)

    def reranked(self, query: tf.SparseTensor) -> tuple[tf.Tensor, tf.Tensor]:
        """The k nearest rows by full-width cosine among the `shape.rerank` nearest by projected cosine: the
        similarities [B, k] and row ids [B, k]. A one-row query reads N x dims numbers and rerank x width more,
        instead of N x width; the k found are the exact k nearest whenever those lie among the candidates."""
        candidates = min(max(self.shape.rerank, self.k), self.shape.num_train)
        rows = tf.math.l2_normalize(tf.sparse.to_dense(query), axis=1)  # [B, width], unit
        _, ids = tf.math.top_k(self.dense_similarities(rows), k=candidates)  # [B, R]
        exact = tf.einsum("brw,bw->br", tf.gather(self.x_full, ids), rows)
        top, at = tf.math.top_k(exact, k=self.k)
        return top, tf.gather(ids, at, batch_dims=1)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "shape": self.shape.to_dict(), "num_labels": self.num_labels, "k": self.k,
                "decides": self.decides}


def project(rows: np.ndarray, dims: int) -> np.ndarray:
    """The `dims` leading right singular vectors of `rows` [N, W] as a [W, dims] basis: the rows' unit vectors
    mapped onto it keep as much of their length as any `dims` directions can, so cosines there approximate the
    full width's, and a query reads N x dims numbers instead of N x W.

    Example (rows in a plane of 3-d space: two dimensions keep every cosine):
        >>> rows = np.array([[1.0, 1.0, 0.0], [1.0, -1.0, 0.0], [2.0, 0.0, 0.0]]) / np.sqrt([[2.0], [2.0], [4.0]])
        >>> basis = project(rows, 2)
        >>> low = rows @ basis
        >>> bool(np.allclose(low @ low.T, rows @ rows.T))
        True
    """
    _, _, vt = np.linalg.svd(np.asarray(rows, np.float64), full_matrices=False)
    return np.ascontiguousarray(vt[:dims].T, dtype=np.float32)
