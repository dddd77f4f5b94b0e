"""SparseDense and LazyAdam: the sparse road computes what the dense one does, and a step touches only the rows
of the batch's features."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from cdgt_keras.sparse import LazyAdam, SparseDense, leading_block, sparse_matmul, split_matmul


def _sparse_batch() -> tuple[np.ndarray, tf.SparseTensor]:
    dense = np.zeros((3, 6), np.float32)
    dense[0, [1, 4]] = [0.5, 2.0]
    dense[2, [1, 1 + 1]] = [1.5, -1.0]  # row 1 has no features at all
    return dense, tf.sparse.from_dense(dense)


def test_sparse_matmul_equals_the_dense_product_and_its_gradient_is_row_slices():
    dense, sparse = _sparse_batch()
    kernel = tf.Variable(np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32))
    with tf.GradientTape() as tape:
        out = sparse_matmul(sparse, kernel)
        loss = tf.reduce_sum(out ** 2)
    np.testing.assert_allclose(out.numpy(), dense @ kernel.numpy(), rtol=1e-6, atol=1e-6)
    grad = tape.gradient(loss, kernel)
    assert isinstance(grad, tf.IndexedSlices)
    assert sorted(grad.indices.numpy().tolist()) == [1, 2, 4]  # the batch's distinct features, each once
    expected = dense.T @ (2 * dense @ kernel.numpy())
    np.testing.assert_allclose(tf.convert_to_tensor(grad).numpy(), expected, rtol=1e-5, atol=1e-5)


def _embedded_batch() -> tuple[np.ndarray, tf.SparseTensor]:
    """Rows whose first 3 columns are filled (an embedding's; one entry exactly 0, so absent) before sparse ones."""
    rng = np.random.default_rng(3)
    dense = np.zeros((4, 9), np.float32)
    dense[:, :3] = rng.standard_normal((4, 3))
    dense[2, 1] = 0.0
    dense[0, [4, 7]], dense[1, 3], dense[3, [3, 8]] = [0.5, 2.0], 1.5, [-1.0, 0.25]  # row 2: the embedding alone
    return dense, tf.sparse.from_dense(dense)


def test_split_matmul_equals_the_dense_product_and_its_gradient_is_row_slices():
    dense, sparse = _embedded_batch()
    kernel = tf.Variable(np.random.default_rng(0).standard_normal((9, 4)).astype(np.float32))
    np.testing.assert_array_equal(leading_block(sparse, 3).numpy(), dense[:, :3])
    with tf.GradientTape() as tape:
        out = split_matmul(sparse, kernel, 3)
        loss = tf.reduce_sum(out ** 2)
    np.testing.assert_allclose(out.numpy(), dense @ kernel.numpy(), rtol=1e-6, atol=1e-6)
    grad = tape.gradient(loss, kernel)
    assert isinstance(grad, tf.IndexedSlices)  # a row-wise optimizer still sees rows, not a dense [V, H] matrix
    assert sorted(grad.indices.numpy().tolist()) == [0, 1, 2, 3, 4, 7, 8]  # the block's rows, then the batch's
    expected = dense.T @ (2 * dense @ kernel.numpy())
    np.testing.assert_allclose(tf.convert_to_tensor(grad).numpy(), expected, rtol=1e-5, atol=1e-5)


def test_a_layer_with_dense_columns_answers_as_one_without_and_keeps_them_when_saved():
    dense, sparse = _embedded_batch()
    split, whole = SparseDense(4, activation="relu", dense_columns=3), SparseDense(4, activation="relu")
    split.build((None, 9))
    whole.build((None, 9))
    whole.set_weights(split.get_weights())
    np.testing.assert_allclose(split(sparse).numpy(), whole(sparse).numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(split(dense).numpy(), whole(dense).numpy(), rtol=1e-6, atol=1e-6)
    assert SparseDense.from_config(split.get_config()).dense_columns == 3
    with pytest.raises(ValueError, match="dense_columns=10 is more than the input's 9 columns"):
        SparseDense(4, dense_columns=10).build((None, 9))


def test_sparse_dense_layer_equals_keras_dense_on_both_inputs():
    dense, sparse = _sparse_batch()
    mine, theirs = SparseDense(4, activation="relu"), keras.layers.Dense(4, activation="relu")
    mine.build((None, 6))
    theirs.build((None, 6))
    theirs.set_weights(mine.get_weights())
    np.testing.assert_allclose(mine(sparse).numpy(), theirs(dense).numpy(), atol=1e-6)
    np.testing.assert_allclose(mine(dense).numpy(), theirs(dense).numpy(), atol=1e-6)


def test_lazy_adam_updates_only_present_rows_and_matches_adam_there():
    dense, sparse = _sparse_batch()
    start = np.random.default_rng(1).standard_normal((6, 4)).astype(np.float32)
    lazy_var, adam_var = keras.Variable(start.copy()), keras.Variable(start.copy())
    lazy, adam = LazyAdam(0.1), keras.optimizers.Adam(0.1)
    lazy.build([lazy_var])
    adam.build([adam_var])
    for _ in range(3):
        with tf.GradientTape(persistent=True) as tape:
            lazy_loss = tf.reduce_sum(sparse_matmul(sparse, lazy_var) ** 2)
            adam_loss = tf.reduce_sum(tf.matmul(dense, adam_var.value) ** 2)
        g_lazy, g_adam = tape.gradient(lazy_loss, lazy_var.value), tape.gradient(adam_loss, adam_var.value)
        assert isinstance(g_lazy, tf.IndexedSlices)
        lazy.apply_gradients([(g_lazy, lazy_var)])
        adam.apply_gradients([(g_adam, adam_var)])
    present = [1, 2, 4]  # rows with a feature in the batch: the same steps as dense Adam
    absent = [0, 3, 5]  # never in a batch: untouched (dense Adam would move them only by a 0 gradient too)
    np.testing.assert_allclose(lazy_var.numpy()[present], adam_var.numpy()[present], atol=1e-5)
    np.testing.assert_array_equal(lazy_var.numpy()[absent], start[absent])
    assert np.abs(lazy_var.numpy()[present] - start[present]).max() > 0.1


def test_lazy_adam_sums_a_row_named_twice_as_adam_sums_its_gradient():
    start = np.random.default_rng(2).standard_normal((4, 2)).astype(np.float32)
    lazy_var, adam_var = keras.Variable(start.copy()), keras.Variable(start.copy())
    lazy, adam = LazyAdam(0.1), keras.optimizers.Adam(0.1)
    twice = tf.IndexedSlices(tf.constant([[1.0, -2.0], [0.5, 0.5], [3.0, 1.0]]), tf.constant([2, 0, 2]))
    dense = tf.constant([[0.5, 0.5], [0.0, 0.0], [4.0, -1.0], [0.0, 0.0]])
    for _ in range(3):
        lazy.apply_gradients([(twice, lazy_var)])
        adam.apply_gradients([(dense, adam_var)])
    np.testing.assert_allclose(lazy_var.numpy()[[0, 2]], adam_var.numpy()[[0, 2]], atol=1e-5)
    np.testing.assert_array_equal(lazy_var.numpy()[[1, 3]], start[[1, 3]])


def test_lazy_adam_is_adam_on_dense_gradients():
    start = np.ones((2, 2), np.float32)
    a, b = keras.Variable(start.copy()), keras.Variable(start.copy())
    lazy, adam = LazyAdam(0.05), keras.optimizers.Adam(0.05)
    grad = tf.constant([[0.3, -1.0], [2.0, 0.0]])
    for _ in range(4):
        lazy.apply_gradients([(grad, a)])
        adam.apply_gradients([(grad, b)])
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_a_batch_without_any_feature_gives_zeros_and_a_gradient_of_no_rows():
    empty = tf.SparseTensor(tf.zeros([0, 2], tf.int64), tf.zeros([0]), [2, 6])
    kernel = tf.Variable(np.ones((6, 3), np.float32))
    with tf.GradientTape() as tape:
        out = sparse_matmul(empty, kernel)
        loss = tf.reduce_sum(out)
    np.testing.assert_array_equal(out.numpy(), np.zeros((2, 3)))
    assert tape.gradient(loss, kernel).values.shape[0] == 0
