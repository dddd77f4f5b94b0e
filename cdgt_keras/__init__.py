"""cdgt_keras: CD-GTMLL in Keras 3 (TensorFlow backend), with no TFX dependency.

The light parts (config, labels, metrics, thresholds, synthetic data) import without TensorFlow; the model
and everything that needs TensorFlow load on first use of their names. The Keras-serializable classes register
when Keras is loaded, so `keras.models.load_model("model.keras")` works after `import cdgt_keras`.

Example:
    >>> from cdgt_keras import CDGTConfig, synthetic_splits
    >>> cfg = CDGTConfig.preset("paper")
"""

from __future__ import annotations

import importlib
from typing import Any

from cdgt_keras.config import CDGTConfig
from cdgt_keras.labels import head_tail_split, label_frequencies, label_order, partition_labels

__version__ = "0.1.0"

# name -> module, imported on first attribute access (PEP 562) so that `import cdgt_keras` stays light.
_LAZY = {
    "CDGTModel": "cdgt_keras.model",
    "PlayerLayout": "cdgt_keras.layout",
    "Fusion": "cdgt_keras.fusion",
    "fusion_weights": "cdgt_keras.fusion",
    "Game": "cdgt_keras.game",
    "GameTerms": "cdgt_keras.game",
    "rarity_weights": "cdgt_keras.objectives",
    "tune_thresholds": "cdgt_keras.thresholds",
    "apply_thresholds": "cdgt_keras.thresholds",
    "tuned_thresholds": "cdgt_keras.thresholds",
    "synthetic_dataset": "cdgt_keras.synthetic",
    "synthetic_splits": "cdgt_keras.synthetic",
    "MultiLabelData": "cdgt_keras.data",
    "NeighbourVotes": "cdgt_keras.neighbours",
    "LabelCentroids": "cdgt_keras.centroids",
    "centroid_matrix": "cdgt_keras.centroids",
    "settle": "cdgt_keras.settling",
    "WeightAveraging": "cdgt_keras.averaging",
    "TailView": "cdgt_keras.tail_memory",
    "tune_tail": "cdgt_keras.tail_memory",
    "tune_tail_fold_mean": "cdgt_keras.tail_memory",
    "reranked_np": "cdgt_keras.reranking",
    "pick_exponent": "cdgt_keras.reranking",
    "tune_reranking": "cdgt_keras.reranking",
    "report": "cdgt_keras.metrics",
    "format_report": "cdgt_keras.metrics",
}

__all__ = ["CDGTConfig", "head_tail_split", "label_frequencies", "label_order", "partition_labels", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'cdgt_keras' has no attribute {name!r}")


# Keras-serializable classes register themselves once Keras is loaded (never loading it here): see registration.py.
from cdgt_keras.registration import register_when_keras_loads  # noqa: E402

register_when_keras_loads()
