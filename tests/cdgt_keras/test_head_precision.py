"""head_precision="bfloat16": the players' output products round their inputs and kernels to bfloat16 in a training
step only ("bfloat16_backward": the gradients' products only); inference is float32 to the bit, the weights stay
float32, and a model trains on it."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from cdgt_keras.config import CDGTConfig
from cdgt_keras.learning import build_trainable
from cdgt_keras.sparse import SparseDense, bfloat16_backward_matmul, bfloat16_matmul, bfloat16_supported

# A bfloat16 product on a CPU without AVX512-BF16 or AMX kills the process (oneDNN has no fallback): those tests need
# such a CPU; the last test covers the others (the layer falls back to float32 and says so).
needs_bfloat16 = pytest.mark.skipif(not bfloat16_supported(), reason="this CPU has no bfloat16 matrix instructions")


def _bf16(a: np.ndarray) -> np.ndarray:
    """a rounded to bfloat16 (nearest, ties to even) and back to float32, by TensorFlow's cast."""
    return tf.cast(tf.cast(a, tf.bfloat16), tf.float32).numpy()


def _pair(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(5, 7)).astype(np.float32), rng.normal(size=(7, 3)).astype(np.float32)


@needs_bfloat16
def test_bfloat16_matmul_is_the_product_of_the_rounded_factors() -> None:
    x, k = _pair()
    exact = _bf16(x).astype(np.float64) @ _bf16(k).astype(np.float64)  # summed exactly, then rounded once
    got = bfloat16_matmul(tf.constant(x), tf.constant(k)).numpy()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, exact, rtol=2 ** -7, atol=1e-6)  # the result's own bfloat16 rounding
    assert not np.array_equal(got, x @ k)  # it is not float32's product


@needs_bfloat16
def test_bfloat16_backward_keeps_float32s_product_and_rounds_its_gradients() -> None:
    x, k = _pair(2)
    a, b = tf.constant(x), tf.constant(k)
    upstream = tf.constant(np.random.default_rng(3).normal(size=(5, 3)).astype(np.float32))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([a, b])
        out = bfloat16_backward_matmul(a, b)
        loss = tf.reduce_sum(out * upstream)
    np.testing.assert_array_equal(out.numpy(), tf.matmul(a, b).numpy())
    da, db = tape.gradient(loss, [a, b])
    u = _bf16(upstream.numpy()).astype(np.float64)
    np.testing.assert_allclose(da.numpy(), u @ _bf16(k).astype(np.float64).T, rtol=2 ** -7, atol=1e-6)
    np.testing.assert_allclose(db.numpy(), _bf16(x).astype(np.float64).T @ u, rtol=2 ** -7, atol=1e-6)
    assert not np.array_equal(db.numpy(), x.T @ upstream.numpy())


@needs_bfloat16
def test_the_layer_uses_it_in_training_only_and_its_gradient_flows_to_float32_weights() -> None:
    x, _ = _pair(1)
    layer = SparseDense(3, activation="sigmoid", training_precision="bfloat16")
    reference = SparseDense(3, activation="sigmoid")
    layer.build((None, 7))
    reference.build((None, 7))
    reference.set_weights(layer.get_weights())
    inputs = tf.constant(x)
    np.testing.assert_array_equal(layer(inputs, training=False).numpy(), reference(inputs, training=False).numpy())
    with tf.GradientTape(persistent=True) as tape:
        low = tf.reduce_sum(layer(inputs, training=True))
        full = tf.reduce_sum(reference(inputs, training=True))
    low_grad, full_grad = tape.gradient(low, layer.kernel), tape.gradient(full, reference.kernel)
    assert low_grad.dtype == tf.float32 and layer.kernel.dtype == "float32"
    assert float(low) != float(full)
    np.testing.assert_allclose(float(low), float(full), rtol=2e-2)
    np.testing.assert_allclose(low_grad.numpy(), full_grad.numpy(), rtol=3e-2, atol=3e-2)


def test_the_layer_keeps_its_precision_in_its_config_and_refuses_others() -> None:
    layer = SparseDense(2, training_precision="bfloat16")
    assert SparseDense.from_config(layer.get_config()).training_precision == "bfloat16"
    with pytest.raises(ValueError, match="training_precision='float16' is not allowed"):
        SparseDense(2, training_precision="float16")
    with pytest.raises(ValueError, match="head_precision"):
        CDGTConfig(head_precision="float16")
    # the config's choices (kept free of TensorFlow for the CLI's help) are the layer's products
    from cdgt_keras.config import CHOICES
    from cdgt_keras.sparse import PRECISIONS

    assert CHOICES["head_precision"] == tuple(PRECISIONS)


@needs_bfloat16
def test_a_model_trains_in_bfloat16_and_predicts_as_its_float32_twin() -> None:
    rng = np.random.default_rng(0)
    x = tf.sparse.from_dense((rng.random((64, 40)) < 0.1).astype(np.float32))
    y = (rng.random((64, 12)) < 0.3).astype(np.float32)
    base = {"encoder_hidden": (8,), "batch_size": 16, "epochs": 2, "seed": 3, "n_players": 3, "overlap": 0.3,
            "alpha": 2.0, "payoff": "bce", "correctness": "log_positives", "rarity": "inverse_sqrt"}
    models = []
    for precision in ("bfloat16", "float32", "bfloat16_backward"):
        keras.utils.set_random_seed(3)
        model = build_trainable(CDGTConfig(**base, head_precision=precision), y.mean(axis=0))
        heads = [layer for head in model.heads for layer in head.layers if isinstance(layer, SparseDense)]
        assert {layer.training_precision for layer in heads} == {precision}
        history = model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(16), epochs=2, verbose=0,
                            shuffle=False)
        assert np.isfinite(history.history["loss"]).all()
        models.append(model)
    low, full, backward = models
    assert not all(np.array_equal(a, b) for a, b in zip(backward.get_weights(), full.get_weights()))
    assert not all(np.array_equal(a, b) for a, b in zip(low.get_weights(), full.get_weights()))  # it trained apart
    full.set_weights(low.get_weights())
    np.testing.assert_array_equal(low.predict(x, verbose=0), full.predict(x, verbose=0))  # inference: float32


def test_a_cpu_without_bfloat16_kernels_trains_in_float32_and_says_so(monkeypatch) -> None:
    from cdgt_keras import sparse

    assert isinstance(sparse.bfloat16_supported(), bool)
    monkeypatch.setattr(sparse, "bfloat16_supported", lambda: False)
    with pytest.warns(RuntimeWarning, match="cannot multiply in bfloat16.*instead of 'bfloat16_backward'"):
        layer = SparseDense(3, training_precision="bfloat16_backward")
    reference = SparseDense(3)
    x, _ = _pair(4)
    layer.build((None, 7))
    reference.build((None, 7))
    reference.set_weights(layer.get_weights())
    assert (layer.training_precision, layer.effective_precision) == ("bfloat16_backward", "float32")
    with tf.GradientTape(persistent=True) as tape:
        low, full = tf.reduce_sum(layer(tf.constant(x), training=True)), tf.reduce_sum(reference(tf.constant(x)))
    np.testing.assert_array_equal(tape.gradient(low, layer.kernel).numpy(),
                                  tape.gradient(full, reference.kernel).numpy())
