"""Export a trained CDGTModel with its Transform graph as a serving SavedModel that takes raw input.

Signatures (STACK.md items 5, 7):
- `serving_default`: serialized tf.Examples (`examples`, string [None]) -> {"scores": fused probabilities [B, L]}.
  This is what TF Serving's classify/predict-by-example and TFMA (the Evaluator) call.
- `predict`: raw features -> {"scores" [B, L], "decisions" [B, L] int32 (scores > tuned thresholds)}.
  Inputs: `features` float [None, d] (dense); `text` string [None] (text); `feature_ids` int64 [None, None] +
  `feature_values` float [None, None], padded with id -1 (sparse).
- `transformed_labels`: serialized tf.Examples -> {"labels_multi_hot": float [B, L]}: the `labels` id lists as
  multi-hot rows, for TFMA (`ModelSpec.preprocessing_function_names`, label_key "labels_multi_hot").
Label names and the tuned thresholds travel inside (`loaded.label_names`, `loaded.thresholds`) and in
`assets.extra/cdgt.json`.

Example:
    >>> export_serving_model(model, tft.TFTransformOutput(transform_dir), "/tmp/serving", names, thresholds,
    ...                      feature_kind="dense", input_width=103)  # doctest: +SKIP
    >>> tf.saved_model.load("/tmp/serving").signatures["predict"](features=tf.zeros([1, 103]))  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from serving.model_input import LABELS, model_input, multi_hot

METADATA_FILE = os.path.join("assets.extra", "cdgt.json")
LABELS_MULTI_HOT = "labels_multi_hot"
_NOT_SERVED = (LABELS, "id")  # raw features the model does not read


def serving_feature_spec(raw_feature_spec: dict[str, Any]) -> dict[str, Any]:
    """The raw feature spec a request must satisfy: everything but the labels and the example id."""
    return {k: v for k, v in raw_feature_spec.items() if k not in _NOT_SERVED}


def _predict_signature(feature_kind: str, raw_spec: dict[str, Any]) -> list[tf.TensorSpec]:
    if feature_kind == "dense":
        width = int(np.prod(raw_spec["features"].shape)) if raw_spec["features"].shape else None
        return [tf.TensorSpec([None, width], tf.float32, name="features")]
    if feature_kind == "text":
        return [tf.TensorSpec([None], tf.string, name="text")]
    return [tf.TensorSpec([None, None], tf.int64, name="feature_ids"),
            tf.TensorSpec([None, None], tf.float32, name="feature_values")]


def _raw_from_inputs(feature_kind: str, raw_spec: dict[str, Any], *inputs: tf.Tensor) -> dict[str, Any]:
    """Raw-feature tensors shaped as tf.io.parse_example would give them for `raw_spec`."""
    if feature_kind == "dense":
        return {"features": inputs[0]}
    if feature_kind == "text":
        spec = raw_spec["text"]
        text = inputs[0]
        if isinstance(spec, tf.io.FixedLenFeature) and len(spec.shape) == 1:
            text = tf.reshape(text, [-1, 1])
        elif isinstance(spec, tf.io.VarLenFeature):
            text = tf.sparse.from_dense(tf.reshape(text, [-1, 1]))
        return {"text": text}
    ids, values = inputs
    mask = ids >= 0
    ragged_ids = tf.ragged.boolean_mask(ids, mask)
    ragged_values = tf.ragged.boolean_mask(values, mask)
    return {"feature_ids": ragged_ids.to_sparse(), "feature_values": ragged_values.to_sparse()}


class _ServingModule(tf.Module):
    """What the SavedModel holds: the Keras model's variables, the Transform layer, label names, thresholds."""

    def __init__(self, model: Any, tft_layer: Any, label_names: Sequence[str], thresholds: np.ndarray):
        super().__init__(name="cdgt_serving")
        self.model_variables = list(model.variables)  # tracked as ExportArchive does (Keras 3 variables)
        self.tft_layer = tft_layer
        self.label_names = tf.Variable(list(label_names), trainable=False, dtype=tf.string, name="label_names")
        self.thresholds = tf.Variable(np.asarray(thresholds, np.float32), trainable=False, name="thresholds")


def export_serving_model(model: Any, tf_transform_output: Any, export_dir: str, label_names: Sequence[str],
                         thresholds: np.ndarray, *, feature_kind: str, input_width: int,
                         metadata: dict[str, Any] | None = None) -> str:
    """Write the SavedModel (signatures above) to `export_dir`; returns `export_dir`."""
    num_labels = len(label_names)
    if len(thresholds) != num_labels:
        raise ValueError(f"{len(thresholds)} thresholds for {num_labels} labels")
    raw_spec = tf_transform_output.raw_feature_spec()
    serve_spec = serving_feature_spec(raw_spec)
    module = _ServingModule(model, tf_transform_output.transform_features_layer(), label_names, thresholds)

    def scores(raw: dict[str, Any]) -> tf.Tensor:
        transformed = module.tft_layer(raw)
        return model(model_input(transformed, feature_kind, input_width), training=False)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve_examples(examples: tf.Tensor) -> dict[str, tf.Tensor]:
        return {"scores": scores(tf.io.parse_example(examples, serve_spec))}

    @tf.function(input_signature=_predict_signature(feature_kind, raw_spec))
    def predict(*inputs: tf.Tensor) -> dict[str, tf.Tensor]:
        probs = scores(_raw_from_inputs(feature_kind, raw_spec, *inputs))
        return {"scores": probs, "decisions": tf.cast(probs > module.thresholds[tf.newaxis, :], tf.int32)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def transformed_labels(examples: tf.Tensor) -> dict[str, tf.Tensor]:
        parsed = tf.io.parse_example(examples, {LABELS: tf.io.VarLenFeature(tf.int64)})
        return {LABELS_MULTI_HOT: tf.sparse.to_dense(multi_hot(parsed[LABELS], num_labels))}

    module.serve_examples, module.predict, module.transformed_labels = serve_examples, predict, transformed_labels
    signatures = {"serving_default": serve_examples.get_concrete_function(),
                  "predict": predict.get_concrete_function(),
                  "transformed_labels": transformed_labels.get_concrete_function()}
    tf.saved_model.save(module, export_dir, signatures=signatures)
    _write_metadata(export_dir, {"label_names": list(label_names), "thresholds": np.asarray(thresholds).tolist(),
                                 "feature_kind": feature_kind, "input_width": int(input_width),
                                 "signatures": sorted(signatures), **(metadata or {})})
    return export_dir


def _write_metadata(export_dir: str, payload: dict[str, Any]) -> None:
    path = os.path.join(export_dir, METADATA_FILE)
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write(json.dumps(payload, indent=1) + "\n")


def read_metadata(export_dir: str) -> dict[str, Any]:
    """assets.extra/cdgt.json of an export: label names, thresholds, feature kind, config."""
    with tf.io.gfile.GFile(os.path.join(export_dir, METADATA_FILE)) as handle:
        return json.loads(handle.read())
