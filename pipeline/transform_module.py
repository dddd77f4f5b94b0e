"""The Transform component's module: raw tf.Example features -> model features, learned on the train split.

The functions are cdgt_keras.featurizer's and cdgt_keras.text's, the ones `cdgt train`, the bench and a `cdgt
train` export run; only the statistics come from tf.Transform analyzers here (over the whole train split in Beam):
- dense (`features`): `z_score` with tft.mean / tft.var (population variance);
- text (`text`): `TextOptions.terms` (`tokens`) -> per-document distinct terms -> tft.vocabulary (document
  frequency >= text_min_df, the vocabulary_size most frequent; tft's order is the one `select_vocabulary`
  reproduces) -> document frequencies and the number of documents (tft.sum) -> `smoothed_idf` -> `tfidf`;
- sparse (`feature_ids` + `feature_values`): passed through (already a bag of words);
- `labels` (int64 list): passed through for training.

Outputs: `x` (dense) or `x_ids` + `x_weights` (sparse, one entry per present term). The Trainer turns
`x_ids`/`x_weights` into one tf.SparseTensor [B, width] (see `model_width`). Because the Transform graph travels
inside the exported model (tft_layer), serving takes raw input.

Example (what TFX calls):
    >>> outputs = preprocessing_fn(inputs, {"feature_kind": "dense"})  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tensorflow_transform as tft

from cdgt_keras.features import DENSE, ID, LABELS, SPARSE_IDS, SPARSE_VALUES, TEXT, X_IDS, X_WEIGHTS, X
from cdgt_keras.featurizer import z_score
from cdgt_keras.text import TextOptions, smoothed_idf, tfidf, unique_per_row
from cdgt_keras.text_embedding import embedding_columns, embedding_width, prepend

TEXT_VOCABULARY = "text_vocabulary"


def model_width(feature_kind: str, num_features: int, tft_output: Any = None,
                text_options: TextOptions | None = None) -> int:
    """Width of the model's input: d (dense, sparse) or, for text, the embedding's columns (with
    `text_options.embedding`) plus the size of the learned vocabulary."""
    if feature_kind == "text":
        return embedding_width(text_options or TextOptions()) + int(
            tft_output.vocabulary_size_by_name(TEXT_VOCABULARY))
    return num_features


def _as_sparse(value: Any) -> tf.SparseTensor:
    if isinstance(value, tf.SparseTensor):
        return value
    if isinstance(value, tf.RaggedTensor):
        return value.to_sparse()
    return tf.sparse.from_dense(value)


def text_features(text: tf.Tensor, options: TextOptions) -> tuple[tf.SparseTensor, tf.SparseTensor]:
    """TF-IDF of a [B] / [B, 1] string tensor, with the statistics of the whole split: (ids, weights)."""
    terms = options.terms(text)
    distinct = unique_per_row(terms)
    vocabulary = tft.vocabulary(distinct, top_k=options.max_features, frequency_threshold=options.min_df,
                                vocab_filename=TEXT_VOCABULARY)
    document_ids = tft.apply_vocabulary(distinct, vocabulary, default_value=-1)
    present = tf.boolean_mask(document_ids.flat_values, document_ids.flat_values >= 0)
    batch_df = tf.math.bincount(tf.cast(present, tf.int32), minlength=options.max_features,
                                maxlength=options.max_features, dtype=tf.int64)
    # A static shape, so that tf.Transform's placeholder for the sum (before it is computed) has the right size.
    batch_df = tf.reshape(batch_df, [1, options.max_features])
    df = tft.sum(batch_df, reduce_instance_dims=False)
    num_documents = tft.size(tf.reshape(text, [-1]))
    idf = smoothed_idf(df, num_documents)  # [max_features]; ids stay below the vocabulary's size
    weighted = tfidf(tft.apply_vocabulary(terms, vocabulary, default_value=-1), idf, options.sublinear_tf)
    if options.embedding:  # the sentence embedding's columns first, as cdgt_keras.text.TextFeaturizer.tensor
        weighted = prepend(embedding_columns(options, tf.reshape(text, [-1]), own_tables=True), weighted)
    ids = tf.SparseTensor(weighted.indices, weighted.indices[:, 1], weighted.dense_shape)
    return ids, weighted


def preprocessing_fn(inputs: dict[str, Any], custom_config: dict[str, Any] | None = None) -> dict[str, Any]:
    """tf.Transform preprocessing_fn; custom_config holds `feature_kind` and, for text, `text` (TextOptions)."""
    custom_config = custom_config or {}
    kind = custom_config.get("feature_kind", "dense")
    outputs: dict[str, Any] = {}
    if LABELS in inputs:
        outputs[LABELS] = inputs[LABELS]
    if ID in inputs:  # the Trainer reads each split in id order, the order `cdgt train` trains on
        outputs[ID] = inputs[ID]
    if kind == "dense":
        x = tf.cast(inputs[DENSE], tf.float64)  # float64 statistics, as the fast path computes them
        outputs[X] = z_score(x, tft.mean(x, reduce_instance_dims=False), tft.var(x, reduce_instance_dims=False))
    elif kind == "text":
        ids, weights = text_features(inputs[TEXT], TextOptions(**custom_config.get("text", {})))
        outputs[X_IDS], outputs[X_WEIGHTS] = _sparse_columns(ids), _sparse_columns(weights)
    elif kind == "sparse":
        outputs[X_IDS] = _as_sparse(inputs[SPARSE_IDS])
        outputs[X_WEIGHTS] = _as_sparse(inputs[SPARSE_VALUES])
    else:
        raise ValueError(f"feature_kind {kind!r} is not one of dense, text, sparse")
    return outputs


def _sparse_columns(value: tf.SparseTensor) -> tf.SparseTensor:
    """A [B, V] SparseTensor as per-example value lists ([B, None], positions as the second index): what a
    Transform writes as a VarLen feature."""
    ragged = tf.RaggedTensor.from_value_rowids(value.values, value.indices[:, 0], nrows=value.dense_shape[0])
    sparse = ragged.to_sparse()
    return tf.SparseTensor(sparse.indices, sparse.values, tf.ensure_shape(sparse.dense_shape, [2]))
