"""A small untrained model with memories, settled on its own training rows: what the tail's tests build on."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from cdgt_keras.config import CDGTConfig


def settled_model(config: CDGTConfig) -> tuple[Any, sp.csr_matrix, sp.csr_matrix]:
    """(model, x, y): 80 rows of 30 sparse features and 10 labels from frequent to rare, the model built for
    `config` (seed 0) and settled with x, y as both training and validation split."""
    import keras

    from cdgt_keras.learning import build_trainable
    from cdgt_keras.neighbours import MemoryShape
    from cdgt_keras.settling import settle

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = sp.random(80, 30, density=0.2, format="csr", random_state=0, dtype=np.float64)
    x.data = rng.random(x.nnz) + 0.1
    y = sp.csr_matrix((rng.random((80, 10)) < np.linspace(0.5, 0.05, 10)).astype(np.float32))
    model = build_trainable(config, np.asarray(y.mean(0)).ravel() + 0.01, MemoryShape.for_config(config, x, y),
                            num_train=x.shape[0])
    model.build((None, x.shape[1]))
    settle(model, x, y, x, y, config.neighbour_weights, batch_size=16, rows=32)
    return model, x, y
