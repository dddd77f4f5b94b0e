"""The contract between the Transform output and CDGTModel: which transformed features form the model input,
and how the `labels` id lists become multi-hot targets. Shared by training (pipeline/trainer_module.py) and
serving (serving/export.py), so both feed the model exactly the same tensors; the keys are the feature contract's
(cdgt_keras.features).

Transformed features: `x` (dense, float [B, d]) or `x_ids` + `x_weights` (sparse bag of words / TF-IDF, one entry
per present term). The model reads `x` as is, or one tf.SparseTensor [B, width] built from ids and weights.

Example:
    >>> x = model_input({"x": tf.zeros([2, 5])}, "dense", 5)   # doctest: +SKIP
    >>> y = multi_hot(tf.sparse.from_dense(tf.constant([[1], [0]], tf.int64)), num_labels=3)  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from cdgt_keras.features import FEATURE_KINDS, X_IDS, X_WEIGHTS, X


def _sparse(value: Any) -> tf.SparseTensor:
    if isinstance(value, tf.RaggedTensor):
        return value.to_sparse()
    return value


def model_input(transformed: dict[str, Any], feature_kind: str, width: int) -> tf.Tensor | tf.SparseTensor:
    """The model's input from a dict of transformed features (a batch)."""
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


def multi_hot(label_ids: Any, num_labels: int) -> tf.SparseTensor:
    """A batch of label-id lists (tf.SparseTensor or RaggedTensor [B, None]) as a 0/1 float SparseTensor [B, L]."""
    ids = _sparse(label_ids)
    batch = tf.shape(ids, out_type=tf.int64)[0]
    indices = tf.stack([ids.indices[:, 0], tf.cast(ids.values, tf.int64)], axis=1)
    out = tf.SparseTensor(indices, tf.ones_like(ids.values, tf.float32),
                          tf.stack([batch, tf.constant(num_labels, tf.int64)]))
    return tf.sparse.reorder(out)
