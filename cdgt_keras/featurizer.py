"""Raw input -> model features, fitted on the training split: one definition for every path.

- text (`text`): TF-IDF (cdgt_keras.text: identifier-keeping tokens, n-grams, the parts of compound identifiers,
  sublinear tf, smoothed idf, L2 rows);
- dense (`features`): z-score per dimension with the training split's mean and population variance (a constant
  dimension is only centred), `z_score`, the same op the TFX Transform applies with tf.Transform's statistics;
- sparse (`feature_ids` + `feature_values`): passed through as given.

`cdgt train`, the bench, the exported model (`serving/preprocessing.py`) and the TFX Transform
(`pipeline/transform_module.py`) all call these functions; tests/cdgt_keras/test_featurizer.py and
tests/pipeline/test_transform_agrees.py check that the paths give the same values.

Example:
    >>> import numpy as np
    >>> fit = Featurizer.fit("dense", np.array([[1.0, 5.0], [3.0, 5.0]], np.float32))
    >>> fit.transform(np.array([[2.0, 6.0]], np.float32)).tolist()
    [[0.0, 1.0]]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from cdgt_keras.features import FEATURE_KINDS
from cdgt_keras.text import TextFeaturizer, TextOptions


def z_score(x: Any, mean: Any, variance: Any) -> Any:
    """(x - mean) / sqrt(variance) per column; a column of variance 0 is only centred (tf.Transform's rule)."""
    import tensorflow as tf

    x = tf.cast(x, tf.float32)
    mean, variance = tf.cast(mean, tf.float32), tf.cast(variance, tf.float32)
    centred = x - mean
    return tf.where(variance > 0, centred / tf.sqrt(tf.where(variance > 0, variance, 1.0)), centred)


@dataclass
class Featurizer:
    """A fitted featurizer of one feature kind: `text` (a TextFeaturizer) or `mean`/`variance` (dense); `names`:
    what each sparse feature id stands for (a word), when the data say (ARFF attributes)."""

    kind: str
    width: int
    text: TextFeaturizer | None = None
    mean: np.ndarray | None = None
    variance: np.ndarray | None = None
    names: list[str] | None = None

    @classmethod
    def fit(cls, kind: str, train_features: Any, text_options: TextOptions | None = None,
            feature_names: list[str] | None = None) -> Featurizer:
        """Learn what the kind needs from the training split's raw features (sparse: keep `feature_names`)."""
        if kind == "text":
            text = TextFeaturizer.fit(train_features, text_options)
            return cls(kind, text.width, text=text)
        if kind == "dense":
            x = np.asarray(train_features, np.float64)
            if x.shape[0] == 0:
                raise ValueError("dense features: the training split is empty, nothing to fit the z-score on")
            return cls(kind, x.shape[1], mean=x.mean(axis=0).astype(np.float32),
                       variance=x.var(axis=0).astype(np.float32))
        if kind == "sparse":
            width = int(train_features.shape[1])
            if feature_names is not None and len(feature_names) != width:
                raise ValueError(f"sparse features: {len(feature_names)} feature names for {width} features")
            return cls(kind, width, names=list(feature_names) if feature_names is not None else None)
        raise ValueError(f"feature kind {kind!r} is not one of {FEATURE_KINDS}")

    def transform(self, features: Any) -> np.ndarray | sp.csr_matrix:
        """Raw features of a split -> model features (float32 ndarray, or csr for sparse and text)."""
        if self.kind == "text":
            return self.text.transform(features)
        if self.kind == "dense":
            return z_score(np.asarray(features, np.float32), self.mean, self.variance).numpy()
        return sp.csr_matrix(features, dtype=np.float32)

    def tensor(self, raw: Any) -> Any:
        """A batch of raw features as tensors -> the model input (graph-safe: what serving runs)."""
        if self.kind == "text":
            return self.text.tensor(raw)
        if self.kind == "dense":
            return z_score(raw, self.mean, self.variance)
        return raw

    def trackables(self) -> dict[str, Any]:
        """Objects a SavedModel must hold to run `tensor` (the vocabulary's lookup table)."""
        return self.text.trackables() if self.kind == "text" else {}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "width": self.width}
        if self.text is not None:
            out["text"] = self.text.to_dict()
        if self.mean is not None:
            out["mean"], out["variance"] = self.mean.tolist(), self.variance.tolist()
        if self.names is not None:
            out["names"] = list(self.names)
        return out

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> Featurizer:
        text = TextFeaturizer.from_dict(payload["text"]) if "text" in payload else None
        mean = np.asarray(payload["mean"], np.float32) if "mean" in payload else None
        variance = np.asarray(payload["variance"], np.float32) if "variance" in payload else None
        return cls(payload["kind"], int(payload["width"]), text=text, mean=mean, variance=variance,
                   names=payload.get("names"))
