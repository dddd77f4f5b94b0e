"""Input dropout (`input_dropout`): a bag-of-words document loses a random share of its entries each training step."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from cdgt_keras import CDGTConfig
from cdgt_keras.model import CDGTModel
from cdgt_keras.sparse import InputDropout


def _sparse(dense: np.ndarray) -> tf.SparseTensor:
    return tf.sparse.from_dense(tf.constant(dense, tf.float32))


def test_inference_passes_the_input_unchanged():
    x = _sparse(np.array([[0.0, 2.0, 3.0], [1.0, 0.0, 0.0]]))
    out = InputDropout(0.5, seed=0)(x, training=False)
    np.testing.assert_array_equal(tf.sparse.to_dense(out).numpy(), tf.sparse.to_dense(x).numpy())


def test_training_drops_entries_and_scales_the_kept_ones():
    dense = np.arange(1, 4001, dtype=np.float32).reshape(4, 1000)
    out = tf.sparse.to_dense(InputDropout(0.25, seed=3)(_sparse(dense), training=True)).numpy()
    kept = out != 0
    assert 0.7 < kept.mean() < 0.8  # 1 - rate of the entries survive
    np.testing.assert_allclose(out[kept], dense[kept] / 0.75, rtol=1e-6)  # kept values scaled by 1 / (1 - rate)
    assert tf.sparse.to_dense(InputDropout(0.25, seed=3)(_sparse(dense), training=True)).shape == (4, 1000)


def test_dense_inputs_use_the_same_rate():
    out = InputDropout(0.5, seed=1)(tf.ones([8, 500]), training=True).numpy()
    assert set(np.unique(out)) == {0.0, 2.0}
    assert 0.4 < (out > 0).mean() < 0.6


def test_the_config_bounds_it_and_the_paper_has_none():
    assert CDGTConfig().input_dropout == 0.0
    assert CDGTConfig.preset("paper").input_dropout == 0.0
    with pytest.raises(ValueError, match="input_dropout"):
        CDGTConfig(input_dropout=1.0)
    with pytest.raises(ValueError, match="input_dropout"):
        InputDropout(-0.1)


def test_the_model_drops_only_the_encoder_input_in_training():
    x = _sparse(np.random.default_rng(0).random((16, 50)).astype(np.float32) * (np.arange(50) % 3 == 0))
    freq = np.full(6, 0.2)
    model = CDGTModel(CDGTConfig(n_players=2, encoder_hidden=(8,), head_hidden=(), dropout=0.0, input_dropout=0.5),
                      label_freq=freq)
    served = model(x, training=False).numpy()
    np.testing.assert_allclose(model(x, training=False).numpy(), served)  # deterministic at inference
    assert not np.allclose(model(x, training=True).numpy(), served)  # the input is dropped in training
    layer_names = [layer.name for layer in model.shared_encoder.layers]
    assert layer_names[0] == "encoder_input_dropout"
