"""An exported model whose encoder-space votes are projected and re-ranked (`encoder_memory_rerank`): its `predict`
answers one request as the Keras model does, and reads the full-width rows it keeps for the candidates."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import scipy.sparse as sp
import tensorflow as tf
from one_row import predict_scores

from cdgt_keras.config import CDGTConfig
from cdgt_keras.inputs import to_sparse_tensor
from cdgt_keras.neighbours import MemoryShape

LABELS = 12


def test_an_export_serves_the_reranked_encoder_votes(tmp_path) -> None:
    import keras

    from cdgt.serving.export import export_keras_model
    from cdgt_keras.learning import build_trainable

    rng = np.random.default_rng(2)
    x = sp.random(60, 40, density=0.2, format="csr", random_state=2, dtype=np.float64)
    y = sp.csr_matrix((rng.random((60, LABELS)) < 0.2).astype(np.float32))
    keras.utils.set_random_seed(2)
    config = CDGTConfig(n_players=2, overlap=0.4, encoder_hidden=(8,), head_hidden=(), neighbours=3,
                        neighbour_space="encoder", encoder_memory_dims=2, encoder_memory_rerank=6)
    model = build_trainable(config, np.asarray(y.mean(0)).ravel() + 0.01, MemoryShape.of(x, y))
    model.build((None, x.shape[1]))
    model.neighbours.remember(np.asarray(model.shared_encoder(to_sparse_tensor(x), training=False)), y)
    model.neighbours.weight.assign(0.8)
    want = np.asarray(model(to_sparse_tensor(x[:4])))
    path = export_keras_model(model, str(tmp_path / "export"), [f"l{i}" for i in range(LABELS)],
                              np.full(LABELS, 0.5, np.float32), feature_kind="sparse", input_width=x.shape[1])
    served = tf.saved_model.load(path)

    def scores(i: int) -> np.ndarray:
        return predict_scores(served, x[i])

    for i in range(4):
        np.testing.assert_allclose(scores(i), want[i], atol=1e-6)
    # the served answer is the re-ranked one, not the projected cosines' alone
    model.neighbours.shape = replace(model.neighbours.shape, rerank=0)
    projected = np.asarray(model(to_sparse_tensor(x[:4])))
    assert not np.allclose(projected, want, atol=1e-4)
