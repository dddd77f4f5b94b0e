"""SparseAdagrad: the fused kernels compute Adagrad's formula by hand, on the named rows only, with duplicate
rows summed first; the config picks the encoder's optimizer and its rate."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from cdgt_keras.config import CDGTConfig
from cdgt_keras.learning import encoder_optimizer
from cdgt_keras.sparse import LazyAdam, SparseAdagrad


def _by_hand(start: np.ndarray, grads: list[np.ndarray], lr: float, acc0: float, eps: float) -> np.ndarray:
    """accumulator += g^2; w -= lr g / (sqrt(accumulator) + eps), in float64."""
    w, acc = start.astype(np.float64), np.full(start.shape, acc0)
    for g in grads:
        acc += g ** 2
        w -= lr * g / (np.sqrt(acc) + eps)
    return w


def test_a_sparse_step_is_adagrad_on_the_named_rows_with_duplicates_summed():
    start = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    var = keras.Variable(start.copy())
    opt = SparseAdagrad(0.3, initial_accumulator_value=0.1, epsilon=1e-7)
    slices = tf.IndexedSlices(tf.constant([[1.0, -2.0, 0.5], [0.5, 0.0, 1.0], [3.0, 1.0, -1.0]]),
                              tf.constant([2, 0, 2]))  # row 2 twice: its gradient is the sum
    summed = np.zeros((4, 3))
    summed[0] = [0.5, 0.0, 1.0]
    summed[2] = [4.0, -1.0, -0.5]
    for _ in range(2):
        opt.apply_gradients([(slices, var)])
    expected = _by_hand(start, [summed, summed], 0.3, 0.1, 1e-7)
    np.testing.assert_allclose(var.numpy()[[0, 2]], expected[[0, 2]], rtol=1e-6)
    np.testing.assert_array_equal(var.numpy()[[1, 3]], start[[1, 3]])  # rows never named: untouched


def test_a_dense_step_is_adagrad_by_hand():
    start = np.array([[1.0, -1.0], [0.5, 2.0]], np.float32)
    var, grad = keras.Variable(start.copy()), np.array([[0.3, -1.0], [2.0, 0.0]], np.float32)
    opt = SparseAdagrad(0.05, initial_accumulator_value=0.1, epsilon=1e-7)
    for _ in range(3):
        opt.apply_gradients([(tf.constant(grad), var)])
    np.testing.assert_allclose(var.numpy(), _by_hand(start, [grad] * 3, 0.05, 0.1, 1e-7), rtol=1e-6)


def test_the_config_picks_the_encoder_optimizer_and_its_rate():
    adam = encoder_optimizer(CDGTConfig(learning_rate=0.004))
    adagrad = encoder_optimizer(CDGTConfig(learning_rate=0.004, encoder_optimizer="adagrad",
                                           encoder_learning_rate=0.05))
    assert isinstance(adam, LazyAdam) and float(adam.learning_rate.numpy()) == pytest.approx(0.004)
    assert isinstance(adagrad, SparseAdagrad) and float(adagrad.learning_rate.numpy()) == pytest.approx(0.05)
    with pytest.raises(ValueError, match="encoder_optimizer"):
        CDGTConfig(encoder_optimizer="sgd")
    with pytest.raises(ValueError, match="encoder_learning_rate"):
        CDGTConfig(encoder_learning_rate=-1.0)


def test_a_model_trained_with_it_saves_and_loads_with_its_state(tmp_path) -> None:
    from cdgt_keras.learning import build_trainable

    rng = np.random.default_rng(0)
    dense = (rng.random((64, 40)) < 0.1).astype(np.float32)
    y = (rng.random((64, 6)) < 0.3).astype(np.float32)
    config = CDGTConfig(encoder_hidden=(8,), head_hidden=(), encoder_optimizer="adagrad", encoder_learning_rate=0.1,
                        batch_size=16, epochs=1)
    model = build_trainable(config, y.mean(axis=0))
    x = tf.sparse.from_dense(dense)
    model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(16), epochs=1, verbose=0)
    accumulators = [v.numpy() for v in model.optimizer.variables]
    assert isinstance(model.optimizer, SparseAdagrad) and any(np.abs(a).max() > 0 for a in accumulators)
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    assert isinstance(loaded.optimizer, SparseAdagrad)
    for mine, theirs in zip(accumulators, [v.numpy() for v in loaded.optimizer.variables]):
        np.testing.assert_array_equal(mine, theirs)
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6)
