"""The feature contract, in one place: the tf.Example keys of a built data directory (what the ingestion writes,
`cdgt train`, the Transform and the Evaluator read, and a request to an exported model carries), the keys the
Transform hands the Trainer, the one parser of label-id lists into a 0/1 csr matrix, and the model's input and
multi-hot targets built from the transformed features (`model_input`, `multi_hot`: training, pipeline/
trainer_module.py, and serving, serving/export.py, feed the model exactly the same tensors).

Every other module (cdgt_keras.records, the ingestion's components/formats/record.py, the Transform and Trainer
modules, the Evaluator, serving) imports the names from here, so a key is spelt once (the TFX templates keep
theirs in one features.py too). Importing this module does not import TensorFlow; the parsers do, when called.

Raw keys: `labels` (int64 list of label ids), `id` (bytes), and one of `features` (dense float list),
`feature_ids` + `feature_values` (sparse) or `text` (bytes). Transformed keys: `x` (dense) or `x_ids` +
`x_weights` (sparse), and `labels` passed through. The model reads `x` as is, or one tf.SparseTensor [B, width]
built from `x_ids` and `x_weights` (one entry per present term).

Example:
    >>> KIND_KEYS["sparse"]
    ('feature_ids', 'feature_values')
    >>> stack_labels([], num_labels=3).shape
    (0, 3)
    >>> x = model_input({"x": tf.zeros([2, 5])}, "dense", 5)   # doctest: +SKIP
    >>> y = multi_hot(tf.sparse.from_dense(tf.constant([[1], [0]], tf.int64)), num_labels=3)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

LABELS, ID = "labels", "id"
DENSE, SPARSE_IDS, SPARSE_VALUES, TEXT = "features", "feature_ids", "feature_values", "text"
FEATURE_KINDS = ("dense", "sparse", "text")
# Each feature kind's raw keys: a tf.Example's features and a `predict` request's inputs (text, dense, sparse:
# the order in which serving.requests tries them and names them in its errors).
KIND_KEYS: dict[str, tuple[str, ...]] = {"text": (TEXT,), "dense": (DENSE,), "sparse": (SPARSE_IDS, SPARSE_VALUES)}
# The Transform's outputs that form the model input (pipeline/transform_module.py, model_input below).
X, X_IDS, X_WEIGHTS = "x", "x_ids", "x_weights"


def label_spec() -> dict[str, Any]:
    """The tf.io.parse_example spec that reads only the label-id lists of serialized tf.Examples."""
    import tensorflow as tf

    return {LABELS: tf.io.VarLenFeature(tf.int64)}


def labels_csr(label_ids: Any, num_labels: int) -> sp.csr_matrix:
    """A batch's parsed `labels` (the tf.SparseTensor [B, None] that label_spec gives) as a 0/1 uint8 csr [B, L].

    The one road from label-id lists to the truth matrix: reading a built split (cdgt_keras.records), the
    Trainer's validation labels and the Evaluator's truth all take it.
    """
    idx = label_ids.indices.numpy()
    values = label_ids.values.numpy()
    rows = int(label_ids.dense_shape.numpy()[0])
    return sp.csr_matrix((np.ones(values.size, np.uint8), (idx[:, 0], values)), shape=(rows, num_labels))


def stack_labels(parts: Sequence[sp.csr_matrix], num_labels: int) -> sp.csr_matrix:
    """Batches of labels_csr stacked into one csr; an empty 0 x L uint8 matrix when there is none."""
    return sp.vstack(parts, format="csr") if parts else sp.csr_matrix((0, num_labels), dtype=np.uint8)


def read_labels(files: Sequence[str] | Any, num_labels: int, batch_size: int = 4096) -> sp.csr_matrix:
    """The label-id lists of gzipped tf.Example TFRecords (raw or transformed: both carry `labels`), or of a
    tf.data.Dataset of serialized tf.Examples, as one 0/1 csr [n, L], batch by batch."""
    import tensorflow as tf

    spec = label_spec()
    records = files if isinstance(files, tf.data.Dataset) else tf.data.TFRecordDataset(
        list(files), compression_type="GZIP")
    parts = [labels_csr(tf.io.parse_example(batch, spec)[LABELS], num_labels) for batch in records.batch(batch_size)]
    return stack_labels(parts, num_labels)


def _sparse(value: Any) -> Any:
    """A tf.RaggedTensor as a tf.SparseTensor; a tf.SparseTensor as it is."""
    import tensorflow as tf

    if isinstance(value, tf.RaggedTensor):
        return value.to_sparse()
    return value


def model_input(transformed: dict[str, Any], feature_kind: str, width: int) -> Any:
    """The model's input (a float tf.Tensor, or a tf.SparseTensor [B, width]) from a dict of transformed features
    (a batch)."""
    import tensorflow as tf

    if feature_kind == "dense":
        return tf.cast(transformed[X], tf.float32)
    if feature_kind not in FEATURE_KINDS:
        raise ValueError(f"feature_kind {feature_kind!r} is not one of {FEATURE_KINDS}")
    ids, weights = _sparse(transformed[X_IDS]), _sparse(transformed[X_WEIGHTS])
    rows = ids.indices[:, 0]
    batch = tf.shape(ids, out_type=tf.int64)[0]
    indices = tf.stack([rows, tf.cast(ids.values, tf.int64)], axis=1)
    out = tf.SparseTensor(indices, tf.cast(weights.values, tf.float32), tf.stack([batch, tf.constant(width, tf.int64)]))
    return tf.sparse.reorder(out)


def multi_hot(label_ids: Any, num_labels: int) -> Any:
    """A batch of label-id lists (tf.SparseTensor or RaggedTensor [B, None]) as a 0/1 float SparseTensor [B, L]."""
    import tensorflow as tf

    ids = _sparse(label_ids)
    batch = tf.shape(ids, out_type=tf.int64)[0]
    indices = tf.stack([ids.indices[:, 0], tf.cast(ids.values, tf.int64)], axis=1)
    out = tf.SparseTensor(indices, tf.ones_like(ids.values, tf.float32),
                          tf.stack([batch, tf.constant(num_labels, tf.int64)]))
    return tf.sparse.reorder(out)
