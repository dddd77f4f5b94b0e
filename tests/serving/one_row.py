"""One sparse row sent to an exported model's `predict` signature, as a single request."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf


def predict_scores(served: Any, row: Any) -> np.ndarray:
    """The label scores [L] that `served` (a loaded SavedModel) answers for `row`, one row of a scipy CSR matrix."""
    out = served.signatures["predict"](feature_ids=tf.constant(row.indices[None].astype(np.int64)),
                                       feature_values=tf.constant(row.data[None].astype(np.float32)))
    return out["scores"].numpy()[0]
