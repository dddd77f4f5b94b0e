"""Raw request features -> the model's input, inside the exported graph.

Two roads, one request format (the tf.Example keys of a built data directory, cdgt_keras/features.py):
the pipeline's export runs the Transform graph (serving/export.py); a `cdgt train` run's export runs
`RawPreprocessing`: the run's featurizer (cdgt_keras.featurizer: dense z-score, text TF-IDF, the very functions
training used), sparse id/value lists as a tf.SparseTensor.

Example:
    >>> pre = RawPreprocessing("text", featurizer.width, featurizer)       # doctest: +SKIP
    >>> pre.model_input({"text": tf.constant(["a text editor"])})         # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from cdgt_keras.features import DENSE, FEATURE_KINDS, SPARSE_IDS, SPARSE_VALUES, TEXT, X_IDS, X_WEIGHTS, model_input


def predict_signature(feature_kind: str, raw_spec: dict[str, Any]) -> list[tf.TensorSpec]:
    """The `predict` signature's inputs for a feature kind (named as the tf.Example keys)."""
    if feature_kind == "dense":
        width = int(np.prod(raw_spec[DENSE].shape)) if raw_spec[DENSE].shape else None
        return [tf.TensorSpec([None, width], tf.float32, name=DENSE)]
    if feature_kind == "text":
        return [tf.TensorSpec([None], tf.string, name=TEXT)]
    return [tf.TensorSpec([None, None], tf.int64, name=SPARSE_IDS),
            tf.TensorSpec([None, None], tf.float32, name=SPARSE_VALUES)]


def raw_from_inputs(feature_kind: str, raw_spec: dict[str, Any], *inputs: tf.Tensor) -> dict[str, Any]:
    """Raw-feature tensors shaped as tf.io.parse_example would give them for `raw_spec`."""
    if feature_kind == "dense":
        width = predict_signature(feature_kind, raw_spec)[0].shape[1]
        if width is None:
            return {DENSE: _finite(inputs[0], DENSE)}
        check = tf.debugging.assert_equal(tf.shape(inputs[0])[1], width, message=(
            f"predict: `{DENSE}` must be [batch, {width}] (the model input width)"))
        with tf.control_dependencies([check]):
            return {DENSE: _finite(inputs[0], DENSE)}
    if feature_kind == "text":
        spec = raw_spec[TEXT]
        text = inputs[0]
        if isinstance(spec, tf.io.FixedLenFeature) and len(spec.shape) == 1:
            text = tf.reshape(text, [-1, 1])
        elif isinstance(spec, tf.io.VarLenFeature):
            text = tf.sparse.from_dense(tf.reshape(text, [-1, 1]))
        return {TEXT: text}
    ids, values = inputs
    check = tf.debugging.assert_equal(tf.shape(ids), tf.shape(values), message=(
        f"predict: `{SPARSE_IDS}` and `{SPARSE_VALUES}` must have the same shape [batch, max features]"))
    with tf.control_dependencies([check]):
        ids = tf.identity(ids)
    values = _finite(values, SPARSE_VALUES)
    mask = ids >= 0
    ragged_ids = tf.ragged.boolean_mask(ids, mask)
    ragged_values = tf.ragged.boolean_mask(values, mask)
    return {SPARSE_IDS: ragged_ids.to_sparse(), SPARSE_VALUES: ragged_values.to_sparse()}


def _finite(values: tf.Tensor, name: str) -> tf.Tensor:
    """`values`, or an InvalidArgumentError (TF Serving: HTTP 400) when one is NaN or infinite."""
    return tf.debugging.assert_all_finite(values, f"predict: `{name}` must be finite numbers (got NaN or infinity)")


class RawPreprocessing:
    """Preprocessing of a `cdgt train` run: what the model saw in training, from raw request features.

    `featurizer` (cdgt_keras.featurizer.Featurizer) is the one that made the training features: text through its
    TF-IDF, dense through its z-score; None for features used as given (the embedded data sets).
    """

    def __init__(self, feature_kind: str, input_width: int, featurizer: Any = None):
        if feature_kind not in FEATURE_KINDS:
            raise ValueError(f"feature_kind {feature_kind!r} is not one of {FEATURE_KINDS}")
        if feature_kind == "text" and featurizer is None:
            raise ValueError("a text model needs its featurizer (the run's featurizer.json) to serve raw strings")
        if featurizer is not None and featurizer.width != input_width:
            raise ValueError(f"the featurizer makes {featurizer.width} features but the model reads {input_width}")
        self.feature_kind, self.input_width, self.featurizer = feature_kind, int(input_width), featurizer

    def raw_spec(self) -> dict[str, Any]:
        """The tf.Example spec of a request (as in a built data directory)."""
        if self.feature_kind == "dense":
            return {DENSE: tf.io.FixedLenFeature([self.input_width], tf.float32)}
        if self.feature_kind == "text":
            return {TEXT: tf.io.FixedLenFeature([], tf.string)}
        return {SPARSE_IDS: tf.io.VarLenFeature(tf.int64), SPARSE_VALUES: tf.io.VarLenFeature(tf.float32)}

    def trackables(self) -> dict[str, Any]:
        """Objects the SavedModel must hold (the text vocabulary's lookup table)."""
        return self.featurizer.trackables() if self.featurizer is not None else {}

    def model_input(self, raw: dict[str, Any]) -> tf.Tensor | tf.SparseTensor:
        """Parsed raw features (a batch) -> the model's input."""
        if self.feature_kind == "sparse":
            return model_input({X_IDS: raw[SPARSE_IDS], X_WEIGHTS: raw[SPARSE_VALUES]}, "sparse", self.input_width)
        if self.feature_kind == "text":
            return self.featurizer.tensor(tf.reshape(raw[TEXT], [-1]))
        dense = tf.cast(raw[DENSE], tf.float32)
        return self.featurizer.tensor(dense) if self.featurizer is not None else dense
