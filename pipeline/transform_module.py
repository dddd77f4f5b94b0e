"""The Transform component's module: raw tf.Example features -> model features, learned on the train split.

- dense (`features`, float [d]): z-score per dimension (mean and variance of the train split);
- text (`text`, string): lower-cased, punctuation stripped, unigrams; vocabulary of the `vocabulary_size` most
  frequent training tokens (+1 out-of-vocabulary bucket) and TF-IDF weights (tft.tfidf);
- sparse (`feature_ids` + `feature_values`): passed through (already a bag of words);
- `labels` (int64 list): passed through for training.

Outputs: `x` (dense) or `x_ids` + `x_weights` (sparse, one entry per present term), and `labels`. The Trainer
turns `x_ids`/`x_weights` into one tf.SparseTensor [B, width] (see `model_width`). Because the Transform graph
travels inside the exported model (tft_layer), serving takes raw input.

Example (what TFX calls):
    >>> outputs = preprocessing_fn(inputs, {"feature_kind": "dense", "vocabulary_size": 20000})  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tensorflow_transform as tft

from cdgt_keras.records import DENSE, LABELS, SPARSE_IDS, SPARSE_VALUES, TEXT
from serving.model_input import X_IDS, X_WEIGHTS, X

TEXT_VOCABULARY = "text_vocabulary"


def model_width(feature_kind: str, num_features: int, vocabulary_size: int) -> int:
    """Width of the model's input: d (dense, sparse) or vocabulary_size + 1 OOV bucket (text)."""
    return vocabulary_size + 1 if feature_kind == "text" else num_features


def tokens(text: tf.Tensor) -> tf.RaggedTensor:
    """Lower-cased unigrams of a [B] or [B, 1] string tensor, punctuation removed: [B, None]."""
    text = tf.reshape(text, [-1])
    cleaned = tf.strings.regex_replace(tf.strings.lower(text), r"[^\w\s]", " ")
    return tf.strings.split(cleaned)


def _as_sparse(value: Any) -> tf.SparseTensor:
    if isinstance(value, tf.SparseTensor):
        return value
    if isinstance(value, tf.RaggedTensor):
        return value.to_sparse()
    return tf.sparse.from_dense(value)


def preprocessing_fn(inputs: dict[str, Any], custom_config: dict[str, Any] | None = None) -> dict[str, Any]:
    """tf.Transform preprocessing_fn; custom_config holds `feature_kind` and `vocabulary_size`."""
    custom_config = custom_config or {}
    kind = custom_config.get("feature_kind", "dense")
    outputs: dict[str, Any] = {}
    if LABELS in inputs:
        outputs[LABELS] = inputs[LABELS]
    if kind == "dense":
        outputs[X] = tft.scale_to_z_score(tf.cast(inputs[DENSE], tf.float32), elementwise=True)
    elif kind == "text":
        size = int(custom_config["vocabulary_size"])
        ids = tft.compute_and_apply_vocabulary(tokens(inputs[TEXT]), top_k=size, num_oov_buckets=1,
                                               vocab_filename=TEXT_VOCABULARY)
        outputs[X_IDS], outputs[X_WEIGHTS] = tft.tfidf(_as_sparse(ids), size + 1)
    elif kind == "sparse":
        outputs[X_IDS] = _as_sparse(inputs[SPARSE_IDS])
        outputs[X_WEIGHTS] = _as_sparse(inputs[SPARSE_VALUES])
    else:
        raise ValueError(f"feature_kind {kind!r} is not one of dense, text, sparse")
    return outputs
