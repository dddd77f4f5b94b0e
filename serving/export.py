"""Export a trained CDGTModel as a self-contained TF Serving SavedModel that takes raw input.

Signatures:
- `serving_default`: serialized tf.Examples (`examples`, string [None]) -> {"scores": fused probabilities [B, L]}
  (the MultiLabelEvaluator's input; TF Serving's default), and "decision_scores" [B, L] when the model's tail
  decides apart (config tail_decisions="own": the tail labels' decisions read from scores blended with memory
  weights of their own; the thresholds are theirs).
- `predict`: raw features -> `scores` [B, L], `decisions` [B, L] int32 (scores, or the decision scores when the
  tail decides apart, > tuned thresholds), the decided
  labels best first as `labels` string [B, M] (padded with ""), `label_ids` int64 [B, M] (padded with -1) and
  `label_scores` [B, M] (padded with 0), M the batch's largest number of decided labels; the k best as
  `top_k_labels` string [B, k], `top_k_ids` int64 [B, k] and `top_k_scores` [B, k]. Label names are looked up
  only for the decided and the top k labels, so no string tensor is [B, L] (at 41k labels a [64, L] one is
  2.6M strings); the decided ones come from the coordinates of scores > thresholds, not from sorting all L.
  Inputs: `features` float [None, d] (dense); `text` string [None] (text); `feature_ids` int64 [None, None] +
  `feature_values` float [None, None], padded with id -1 (sparse).
- `classify` (method tensorflow/serving/classify, for TF Serving's `:classify`): `inputs` serialized tf.Examples ->
  the k best classes, best first: `classes` string [B, k] (label names) and `scores` [B, k] (TF Serving's
  classification result lists the classes it is given; a [B, L] string tensor of every name at 41k labels is 2.6M
  strings for a batch of 64, so it lists the same k as predict's top_k outputs; every score is in `predict`).
- `blessing_scores` and `blessing_labels`, for TFMA (the pipeline's Evaluator): serialized tf.Examples (`examples`)
  -> {"scores": [B, K]} and {"labels_multi_hot": float [B, K]}, the scores and multi-hot labels of the K blessing
  labels (`blessing_ids`: every label unless the pipeline names a sample; TFMA walks each (example, label) pair in
  Python, so it gets a sample of the labels at tens of thousands of them).
Label names (a variable and `assets/labels.txt`), thresholds and the preprocessing (the Transform graph, or the
featurizer of a `cdgt train` run) travel inside; `assets.extra/cdgt.json` repeats the facts for people.

Example:
    >>> export_keras_model(model, "/tmp/m/1", names, thresholds, feature_kind="dense",
    ...                    input_width=103)  # doctest: +SKIP
    >>> tf.saved_model.load("/tmp/m/1").signatures["predict"](features=tf.zeros([1, 103]))  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from cdgt.serving.preprocessing import RawPreprocessing, predict_signature, raw_from_inputs
from cdgt_keras.features import ID, LABELS, label_spec, model_input, multi_hot
from cdgt_keras.kernels import portable_graphs

METADATA_FILE = os.path.join("assets.extra", "cdgt.json")
LABELS_MULTI_HOT = "labels_multi_hot"
CLASSIFY_METHOD = "tensorflow/serving/classify"
BLESSING_SCORES, BLESSING_LABELS = "blessing_scores", "blessing_labels"  # TFMA's signatures
DEFAULT_TOP_K = 5
_NOT_SERVED = (LABELS, ID)  # raw features the model does not read


def serving_feature_spec(raw_feature_spec: dict[str, Any]) -> dict[str, Any]:
    """The raw feature spec a request must satisfy: everything but the labels and the example id."""
    return {k: v for k, v in raw_feature_spec.items() if k not in _NOT_SERVED}


class _ServingModule(tf.Module):
    """What the SavedModel holds: the Keras model's variables, the preprocessing, label names, thresholds."""

    def __init__(self, model: Any, label_names: Sequence[str], thresholds: np.ndarray, label_file: str):
        super().__init__(name="cdgt_serving")
        self.model_variables = list(model.variables)  # tracked as ExportArchive does (Keras 3 variables)
        self.label_names = tf.Variable(list(label_names), trainable=False, dtype=tf.string, name="label_names")
        self.thresholds = tf.Variable(np.asarray(thresholds, np.float32), trainable=False, name="thresholds")
        self.label_file = tf.saved_model.Asset(label_file)


def decided_outputs(probs: tf.Tensor, thresholds: tf.Tensor, names: tf.Tensor) -> dict[str, tf.Tensor]:
    """`labels`, `label_ids` and `label_scores` [B, M]: the labels with score > threshold, best first (ties: the
    lower id first), padded ("", -1, 0) to M, the batch's largest count. Cost: one comparison of [B, L], then
    work on the decided entries only (a sort of their scores, a look-up of their names).

    Example:
        >>> out = decided_outputs(tf.constant([[0.2, 0.9, 0.7]]), tf.constant([0.5, 0.5, 0.5]),
        ...                       tf.constant(["a", "b", "c"]))
        >>> out["labels"].numpy().tolist(), out["label_ids"].numpy().tolist()
        ([[b'b', b'c']], [[1, 2]])
    """
    hits = tf.where(probs > thresholds[tf.newaxis, :])  # [n, 2] (row, label), row-major: ids ascending per row
    values = tf.gather_nd(probs, hits)
    by_score = tf.argsort(values, direction="DESCENDING", stable=True)
    order = tf.gather(by_score, tf.argsort(tf.gather(hits[:, 0], by_score), stable=True))  # by row, then score
    rows, ids = tf.gather(hits[:, 0], order), tf.gather(hits[:, 1], order)
    nrows = tf.shape(probs, out_type=tf.int64)[0]

    def padded(flat: tf.Tensor, fill: Any) -> tf.Tensor:
        return tf.RaggedTensor.from_value_rowids(flat, rows, nrows=nrows).to_tensor(default_value=fill)

    return {"labels": padded(tf.gather(names, ids), ""), "label_ids": padded(ids, tf.constant(-1, tf.int64)),
            "label_scores": padded(tf.gather(values, order), 0.0)}


def top_k_outputs(probs: tf.Tensor, names: tf.Tensor, k: int) -> dict[str, tf.Tensor]:
    """`top_k_ids` int64, `top_k_labels` and `top_k_scores` [B, k]: the k best labels per row (ties: lower id)."""
    top = tf.math.top_k(probs, k=k)
    return {"top_k_ids": tf.cast(top.indices, tf.int64), "top_k_labels": tf.gather(names, top.indices),
            "top_k_scores": top.values}


def _write_saved_model(model: Any, export_dir: str, label_names: Sequence[str], thresholds: np.ndarray, *,
                       feature_kind: str, input_width: int, raw_spec: dict[str, Any],
                       to_model_input: Callable[[dict[str, Any]], Any], trackables: dict[str, Any],
                       metadata: dict[str, Any] | None, top_k: int, blessing_ids: Sequence[int] | None) -> str:
    num_labels = len(label_names)
    ids = np.arange(num_labels, dtype=np.int64) if blessing_ids is None else np.asarray(blessing_ids, np.int64)
    if ids.ndim != 1 or not len(ids) or ids.min() < 0 or ids.max() >= num_labels:
        raise ValueError(f"blessing_ids must be label ids in [0, {num_labels}), got {len(ids)} of them")
    every_label = np.array_equal(ids, np.arange(num_labels))
    if len(thresholds) != num_labels:
        raise ValueError(f"{len(thresholds)} thresholds for {num_labels} labels: give one threshold per label")
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    k = min(top_k, num_labels)
    serve_spec = serving_feature_spec(raw_spec)
    # traced with TensorFlow's ops alone: TF Serving and TFMA load the SavedModel without cdgt's kernels
    with tempfile.TemporaryDirectory() as tmp, portable_graphs():
        label_file = os.path.join(tmp, "labels.txt")
        with open(label_file, "w", encoding="utf-8") as handle:
            handle.write("".join(f"{name}\n" for name in label_names))
        module = _ServingModule(model, label_names, thresholds, label_file)
        module.blessing_ids = tf.Variable(ids, trainable=False, name="blessing_ids")
        prepare = getattr(model, "prepare_serving", None)  # the label shortlist's copy of the heads, if it has one
        served = prepare() if prepare is not None else None
        if served is not None:
            module.served_rows = served
        for name, value in trackables.items():
            setattr(module, name, value)

        def scores(raw: dict[str, Any]) -> tf.Tensor:
            return model(to_model_input(raw), training=False)

        # a model whose tail decides apart (config tail_decisions="own") reads its decisions from scores of their own
        apart = bool(getattr(model, "decides_apart", lambda: False)())

        def answers(raw: dict[str, Any]) -> tuple[tf.Tensor, tf.Tensor]:
            """(the scores that rank, the scores the decisions are read from), from one pass of the model."""
            x = to_model_input(raw)
            if apart:
                return model.answers(x)
            probs = model(x, training=False)
            return probs, probs

        examples_spec = [tf.TensorSpec([None], tf.string, name="examples")]

        @tf.function(input_signature=examples_spec)
        def serve_examples(examples: tf.Tensor) -> dict[str, tf.Tensor]:
            probs, deciding = answers(tf.io.parse_example(examples, serve_spec))
            return {"scores": probs, **({"decision_scores": deciding} if apart else {})}

        @tf.function(input_signature=predict_signature(feature_kind, raw_spec))
        def predict(*inputs: tf.Tensor) -> dict[str, tf.Tensor]:
            probs, deciding = answers(raw_from_inputs(feature_kind, raw_spec, *inputs))
            return {"scores": probs, "decisions": tf.cast(deciding > module.thresholds[tf.newaxis, :], tf.int32),
                    **decided_outputs(deciding, module.thresholds, module.label_names),
                    **top_k_outputs(probs, module.label_names, k)}

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
        def classify(inputs: tf.Tensor) -> dict[str, tf.Tensor]:
            top = top_k_outputs(scores(tf.io.parse_example(inputs, serve_spec)), module.label_names, k)
            return {"classes": top["top_k_labels"], "scores": top["top_k_scores"]}

        @tf.function(input_signature=examples_spec)
        def blessing_scores(examples: tf.Tensor) -> dict[str, tf.Tensor]:
            probs = scores(tf.io.parse_example(examples, serve_spec))
            return {"scores": probs if every_label else tf.gather(probs, module.blessing_ids, axis=1)}

        @tf.function(input_signature=examples_spec)
        def blessing_labels(examples: tf.Tensor) -> dict[str, tf.Tensor]:
            hot = tf.sparse.to_dense(multi_hot(tf.io.parse_example(examples, label_spec())[LABELS], num_labels))
            return {LABELS_MULTI_HOT: hot if every_label else tf.gather(hot, module.blessing_ids, axis=1)}

        module.serve_examples, module.predict = serve_examples, predict
        module.classify, module.blessing_scores, module.blessing_labels = classify, blessing_scores, blessing_labels
        signatures = {"serving_default": serve_examples.get_concrete_function(),
                      "predict": predict.get_concrete_function(),
                      "classify": classify.get_concrete_function(),
                      BLESSING_SCORES: blessing_scores.get_concrete_function(),
                      BLESSING_LABELS: blessing_labels.get_concrete_function()}
        tf.saved_model.save(module, export_dir, signatures=signatures)
    set_method_name(export_dir, "classify", CLASSIFY_METHOD)
    _write_metadata(export_dir, {"label_names": list(label_names), "thresholds": np.asarray(thresholds).tolist(),
                                 "feature_kind": feature_kind, "input_width": int(input_width), "top_k": k,
                                 "blessing_label_count": len(ids), "signatures": sorted(signatures),
                                 "decisions_apart": apart, "rerank_exponent": _rerank_exponent(model),
                                 **(metadata or {})})
    return export_dir


def _rerank_exponent(model: Any) -> float:
    """The propensity re-ranking's exponent the ranking's scores carry (config rerank_slack; 0: none)."""
    variable = getattr(model, "rerank_exponent", None)
    return 0.0 if variable is None else float(variable.numpy())


def export_serving_model(model: Any, tf_transform_output: Any, export_dir: str, label_names: Sequence[str],
                         thresholds: np.ndarray, *, feature_kind: str, input_width: int,
                         metadata: dict[str, Any] | None = None, top_k: int = DEFAULT_TOP_K,
                         blessing_ids: Sequence[int] | None = None) -> str:
    """The pipeline's export: the Transform graph (tft_layer) is the preprocessing; `blessing_ids` the labels of
    TFMA's signatures (None: all). Returns `export_dir`."""
    tft_layer = tf_transform_output.transform_features_layer()
    return _write_saved_model(
        model, export_dir, label_names, thresholds, feature_kind=feature_kind, input_width=input_width,
        raw_spec=tf_transform_output.raw_feature_spec(), trackables={"tft_layer": tft_layer},
        to_model_input=lambda raw: model_input(tft_layer(raw), feature_kind, input_width),
        metadata=metadata, top_k=top_k, blessing_ids=blessing_ids)


def export_keras_model(model: Any, export_dir: str, label_names: Sequence[str], thresholds: np.ndarray, *,
                       feature_kind: str, input_width: int, featurizer: Any = None,
                       metadata: dict[str, Any] | None = None, top_k: int = DEFAULT_TOP_K,
                       blessing_ids: Sequence[int] | None = None) -> str:
    """A `cdgt train` model's export: raw features as read from a built data directory, through the run's
    featurizer (`cdgt_keras.featurizer.Featurizer`; required for text). Returns `export_dir`."""
    pre = RawPreprocessing(feature_kind, input_width, featurizer)
    return _write_saved_model(
        model, export_dir, label_names, thresholds, feature_kind=feature_kind, input_width=input_width,
        raw_spec=pre.raw_spec(), trackables=pre.trackables(), to_model_input=pre.model_input,
        metadata=metadata, top_k=top_k, blessing_ids=blessing_ids)


def set_method_name(export_dir: str, signature: str, method_name: str) -> None:
    """Rewrite one signature's method name in saved_model.pb (tf.saved_model.save writes every signature as
    tensorflow/serving/predict; TF Serving's :classify needs tensorflow/serving/classify)."""
    from tensorflow.core.protobuf import saved_model_pb2

    path = os.path.join(export_dir, "saved_model.pb")
    saved = saved_model_pb2.SavedModel()
    with tf.io.gfile.GFile(path, "rb") as handle:
        saved.ParseFromString(handle.read())
    for graph in saved.meta_graphs:
        if signature not in graph.signature_def:
            raise ValueError(f"{export_dir} has no signature {signature!r} (has {sorted(graph.signature_def)})")
        graph.signature_def[signature].method_name = method_name
    with tf.io.gfile.GFile(path, "wb") as handle:
        handle.write(saved.SerializeToString())


def _write_metadata(export_dir: str, payload: dict[str, Any]) -> None:
    path = os.path.join(export_dir, METADATA_FILE)
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write(json.dumps(payload, indent=1) + "\n")


def read_metadata(export_dir: str) -> dict[str, Any]:
    """assets.extra/cdgt.json of an export: label names, thresholds, feature kind, config."""
    with tf.io.gfile.GFile(os.path.join(export_dir, METADATA_FILE)) as handle:
        return json.loads(handle.read())
