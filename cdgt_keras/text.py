"""TF-IDF features for text data sets: Keras' TextVectorization token counts (sparse) times learned IDF.

(Keras 3.12's own sparse `tf_idf` output mode fails at call time, so the IDF weighting is applied here:
idf = log(1 + n / (1 + df)), Keras' formula, and rows are L2-normalised.) The adapted layer and the IDF
vector are what an export needs to serve raw strings.

Example:
    >>> tfidf = TfIdf.fit(train_texts, vocabulary_size=20000)
    >>> x = tfidf.transform(test_texts)       # scipy.sparse.csr_matrix [n, vocabulary size], float32
    >>> same = TfIdf.from_dict(tfidf.to_dict())   # what a run directory stores (tfidf.json) for serving
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp


def _strings(texts: Sequence[str]) -> np.ndarray:
    """An object array of str. Not numpy's fixed-width str dtype: that pads every text to the longest one
    (the deps descriptions, 45k texts of up to 81k characters, took 13.7 GiB that way)."""
    return np.fromiter((str(t) for t in texts), dtype=object, count=len(texts))


@dataclass
class TfIdf:
    """An adapted token counter (keras.layers.TextVectorization, output_mode="count") and its IDF [V]."""

    layer: Any
    idf: np.ndarray

    @classmethod
    def fit(cls, texts: Sequence[str], vocabulary_size: int = 20000, batch_size: int = 1024) -> TfIdf:
        """Learn the vocabulary (lower-cased, punctuation stripped, unigrams) and the IDF on `texts`."""
        import keras
        import tensorflow as tf

        layer = keras.layers.TextVectorization(max_tokens=vocabulary_size, output_mode="count", sparse=True)
        layer.adapt(tf.data.Dataset.from_tensor_slices(_strings(texts)).batch(batch_size))
        counts = _counts(layer, texts, batch_size)
        document_frequency = np.bincount(counts.indices, minlength=counts.shape[1])
        idf = np.log1p(counts.shape[0] / (1.0 + document_frequency)).astype(np.float32)
        return cls(layer, idf)

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> TfIdf:
        """The TfIdf that `to_dict` described: a TextVectorization set to the stored vocabulary, and the IDF."""
        import keras

        vocabulary, idf = list(payload["vocabulary"]), np.asarray(payload["idf"], np.float32)
        if len(vocabulary) != idf.size:
            raise ValueError(f"TF-IDF: {len(vocabulary)} vocabulary entries but {idf.size} IDF values")
        layer = keras.layers.TextVectorization(vocabulary=vocabulary, output_mode="count", sparse=True)
        return cls(layer, idf)

    def to_dict(self) -> dict[str, Any]:
        """{"vocabulary": [token, ...] (index 0 is the out-of-vocabulary token), "idf": [float, ...]}."""
        return {"vocabulary": [str(t) for t in self.layer.get_vocabulary()], "idf": self.idf.tolist()}

    def transform(self, texts: Sequence[str], batch_size: int = 1024) -> sp.csr_matrix:
        """L2-normalised TF-IDF rows of `texts` as float32 csr (built batch by batch, never dense)."""
        weighted = _counts(self.layer, texts, batch_size).multiply(self.idf[None, :]).tocsr()
        norms = np.sqrt(np.asarray(weighted.multiply(weighted).sum(axis=1)).ravel())
        return sp.csr_matrix(sp.diags(1.0 / np.maximum(norms, 1e-12)) @ weighted, dtype=np.float32)


def _counts(layer: Any, texts: Sequence[str], batch_size: int) -> sp.csr_matrix:
    import tensorflow as tf

    texts = _strings(texts)
    width = layer.vocabulary_size()
    parts = []
    for start in range(0, len(texts), batch_size):
        out = layer(tf.constant(texts[start:start + batch_size]))
        idx = out.indices.numpy()
        parts.append(sp.csr_matrix((out.values.numpy().astype(np.float32), (idx[:, 0], idx[:, 1])),
                                   shape=(int(out.dense_shape[0]), width)))
    return sp.vstack(parts, format="csr") if parts else sp.csr_matrix((0, width), dtype=np.float32)
