"""cdgt's fused LazyAdam kernel: it builds (in CI it must), it gives the bits of LazyAdam's TensorFlow ops, it never
writes into a buffer someone else reads, it rejects bad rows, and without it LazyAdam falls back with a warning."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import built_kernel

from cdgt_keras import kernels
from cdgt_keras.config import CDGTConfig
from cdgt_keras.sparse import LazyAdam


@pytest.fixture(scope="module")
def fused_op():
    return built_kernel(kernels.lazy_adam_rows)


def _steps(fused: bool, index_dtype: tf.DType, steps: int = 4) -> list[np.ndarray]:
    """Four LazyAdam steps on a [50, 7] variable from rows named out of order, some twice; var, m and v after."""
    rng = np.random.default_rng(0)
    var = keras.Variable(rng.standard_normal((50, 7)).astype(np.float32))
    opt = LazyAdam(0.05)
    opt.fused = fused
    for step in range(steps):
        rows = rng.choice(50, 12, replace=True if step % 2 else False)
        grad = tf.IndexedSlices(tf.constant(rng.standard_normal((12, 7)).astype(np.float32)),
                                tf.constant(rows, index_dtype), tf.constant([50, 7], index_dtype))
        opt.apply_gradients([(grad, var)])
    return [var.numpy(), opt._momentums[0].numpy(), opt._velocities[0].numpy()]


@pytest.mark.parametrize("index_dtype", [tf.int32, tf.int64])
def test_the_fused_kernel_gives_the_bits_of_lazy_adams_ops(fused_op, index_dtype) -> None:
    for fused, ops in zip(_steps(True, index_dtype), _steps(False, index_dtype)):
        np.testing.assert_array_equal(fused, ops)
    assert kernels.kernel_status() == "fused"


def _dense_steps(fused: bool, steps: int = 5) -> list[np.ndarray]:
    """Five LazyAdam steps on dense gradients of a [30, 7] kernel and a [7] bias; both variables, m and v after."""
    rng = np.random.default_rng(1)
    variables = [keras.Variable(rng.standard_normal(shape).astype(np.float32)) for shape in ((30, 7), (7,))]
    opt = LazyAdam(0.05)
    opt.fused = fused
    for _ in range(steps):
        grads = [tf.constant(rng.standard_normal(v.shape).astype(np.float32) * 10.0 ** rng.integers(-6, 2))
                 for v in variables]
        opt.apply_gradients(zip(grads, variables))
    return [v.numpy() for v in variables] + [t.numpy() for t in [*opt._momentums, *opt._velocities]]


def test_the_dense_kernel_gives_the_bits_of_keras_adam(fused_op) -> None:
    fused_road = _dense_steps(True)
    for fused, ops in zip(fused_road, _dense_steps(False)):  # fused = False: keras.optimizers.Adam's own step
        np.testing.assert_array_equal(fused, ops)
    var = keras.Variable([[1.0, -1.0]])  # Adam's first step by hand: var - lr * g / (|g| + eps) = var - lr sign(g)
    LazyAdam(0.5).apply_gradients([(tf.constant([[2.0, -4.0]]), var)])
    np.testing.assert_allclose(var.numpy(), [[0.5, -0.5]], rtol=2e-5)  # 1 - 0.999 rounds to float32 in alpha


def test_the_dense_kernel_names_a_wrong_shape(fused_op) -> None:
    from cdgt_keras.kernels import adam_dense

    var, m, v = (tf.Variable(tf.ones([3, 2])) for _ in range(3))
    with pytest.raises(tf.errors.InvalidArgumentError, match="grad must have var's shape"):
        adam_dense()(var=var.handle, m=m.handle, v=v.handle, grad=tf.ones([2, 3]), alpha=0.1, keep_1=0.1,
                     keep_2=0.001, epsilon=1e-7)


def test_the_fused_kernel_by_hand_on_one_row(fused_op) -> None:
    var, m, v = tf.Variable([[1.0, 2.0], [3.0, 4.0]]), tf.Variable([[0.0, 0.0], [1.0, 1.0]]), tf.Variable(
        [[0.0, 0.0], [4.0, 4.0]])
    fused_op(var=var.handle, m=m.handle, v=v.handle, rows=tf.constant([1]), grad=tf.constant([[2.0, -2.0]]),
             alpha=0.5, beta_1=0.5, beta_2=0.75, epsilon=0.0)
    # m = 0.5 * 1 + 0.5 * (+-2) = 1.5, -0.5; v = 0.75 * 4 + 0.25 * 4 = 4; var -= 0.5 * m / 2
    np.testing.assert_allclose(m.numpy(), [[0.0, 0.0], [1.5, -0.5]])
    np.testing.assert_allclose(v.numpy(), [[0.0, 0.0], [4.0, 4.0]])
    np.testing.assert_allclose(var.numpy(), [[1.0, 2.0], [3.0 - 0.375, 4.0 + 0.125]])


def test_a_read_held_elsewhere_keeps_its_values(fused_op) -> None:
    var, m, v = (tf.Variable(tf.ones([3, 2])) for _ in range(3))
    held = var.read_value()  # may share var's buffer: the kernel must copy before it writes
    fused_op(var=var.handle, m=m.handle, v=v.handle, rows=tf.constant([0, 2]), grad=tf.ones([2, 2]), alpha=0.1,
             beta_1=0.9, beta_2=0.999, epsilon=1e-7)
    np.testing.assert_array_equal(held.numpy(), np.ones([3, 2]))
    assert var.numpy()[0, 0] < 1.0 and var.numpy()[1, 0] == 1.0


def test_no_rows_is_no_change_and_bad_rows_are_named(fused_op) -> None:
    var, m, v = (tf.Variable(tf.ones([3, 2])) for _ in range(3))
    scalars = {"alpha": 0.1, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7}
    fused_op(var=var.handle, m=m.handle, v=v.handle, rows=tf.zeros([0], tf.int64), grad=tf.zeros([0, 2]), **scalars)
    np.testing.assert_array_equal(var.numpy(), np.ones([3, 2]))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"rows\[1\] = 3 is not in \[0, 3\)"):
        fused_op(var=var.handle, m=m.handle, v=v.handle, rows=tf.constant([0, 3]), grad=tf.ones([2, 2]), **scalars)
    with pytest.raises(tf.errors.InvalidArgumentError, match="grad must be"):
        fused_op(var=var.handle, m=m.handle, v=v.handle, rows=tf.constant([0]), grad=tf.ones([1, 3]), **scalars)


def test_a_model_trains_to_the_same_bits_on_either_road(fused_op, monkeypatch) -> None:
    import cdgt_keras.sparse
    from cdgt_keras.learning import build_trainable

    calls = []
    monkeypatch.setattr(cdgt_keras.sparse, "lazy_adam_rows", lambda: calls.append(1) or fused_op)

    rng = np.random.default_rng(0)
    x = tf.sparse.from_dense((rng.random((64, 40)) < 0.1).astype(np.float32))
    y = (rng.random((64, 6)) < 0.3).astype(np.float32)
    config = CDGTConfig(encoder_hidden=(8,), head_hidden=(), batch_size=16, epochs=2, seed=3)
    weights = []
    for fused in (True, False):
        calls.clear()
        keras.utils.set_random_seed(3)
        model = build_trainable(config, y.mean(axis=0))
        for optimizer in [model.optimizer, *getattr(model, "player_optimizers", [])]:
            optimizer.fused = fused
        model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(16), epochs=2, verbose=0, shuffle=False)
        weights.append(model.get_weights())
        assert bool(calls) == fused  # the fused road traced the kernel in; the other never asked for it
    assert len(weights[0]) == len(weights[1])
    for a, b in zip(*weights):
        np.testing.assert_array_equal(a, b)


def test_without_a_compiler_lazy_adam_warns_and_uses_tensorflows_ops(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(kernels, "_state", {})
    monkeypatch.setenv("CDGT_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setenv("CXX", "no-such-compiler-here")
    with pytest.warns(RuntimeWarning, match="no C\\+\\+ compiler 'no-such-compiler-here'"):
        assert kernels.lazy_adam_rows() is None
    assert kernels.kernel_status().startswith("TensorFlow ops (the fused kernels could not be built")
    var = keras.Variable([[1.0], [1.0]])
    LazyAdam(0.5).apply_gradients([(tf.IndexedSlices(tf.constant([[2.0]]), tf.constant([1])), var)])
    np.testing.assert_allclose(var.numpy(), [[1.0], [0.5]], atol=1e-6)


def test_a_compiler_error_is_reported_and_switching_off_is_honoured(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(kernels, "_state", {})
    monkeypatch.setenv("CDGT_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setenv("CXX", "false")  # a "compiler" that always fails
    with pytest.warns(RuntimeWarning, match="false failed on adam.cc"):
        assert kernels.lazy_adam_rows() is None
    monkeypatch.setattr(kernels, "_state", {})
    monkeypatch.setenv("CDGT_FUSED_KERNELS", "0")
    assert kernels.lazy_adam_rows() is None
    assert kernels.kernel_status() == "TensorFlow ops (CDGT_FUSED_KERNELS=0)"


def test_the_leading_split_gives_the_slices_values_and_names_a_bad_entry(monkeypatch) -> None:
    """CdgtLeadingSplit against TensorFlow's slices and densification (the reference road): the same block, the
    same rest entries in the same order, whatever rows lack some of the block's columns; an entry outside the
    batch's shape is named."""
    import cdgt_keras.sparse as sparse_module

    op = built_kernel(kernels.leading_split)
    rng = np.random.default_rng(4)
    dense = rng.standard_normal((9, 14)).astype(np.float32) * (rng.random((9, 14)) < 0.6)
    dense[2, :5] = 0.0  # a row without the block, another without anything
    dense[6] = 0.0
    x = tf.sparse.from_dense(dense)
    monkeypatch.setattr(sparse_module, "leading_split", lambda: None)
    want_block, want_rest = sparse_module.split_leading(x, 5)
    monkeypatch.setattr(sparse_module, "leading_split", lambda: op)
    block, rest = sparse_module.split_leading(x, 5)
    np.testing.assert_array_equal(block.numpy(), dense[:, :5])
    np.testing.assert_array_equal(block.numpy(), want_block.numpy())
    for got, want in [(rest.indices, want_rest.indices), (rest.values, want_rest.values),
                      (rest.dense_shape, want_rest.dense_shape)]:
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(tf.sparse.to_dense(rest).numpy(), dense[:, 5:])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"entry 1 at \[0, 14\] is outside"):
        op(indices=tf.constant([[0, 1], [0, 14]], tf.int64), values=tf.constant([1.0, 2.0]),
           dense_shape=tf.constant([2, 14], tf.int64), n=5)
