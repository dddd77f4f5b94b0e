"""cdgt_keras.columns: a batch times a static sparse table through cdgt's kernel gives the bits of TensorFlow's sparse
product, forward and backward; the kernel names what is wrong with its inputs; the fusion and a whole training run
are the same on either road; a served model's graph holds none of cdgt's ops."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import built_kernel

from cdgt_keras import columns, kernels
from cdgt_keras.columns import ColumnTable, combine
from cdgt_keras.config import CDGTConfig
from cdgt_keras.fusion import Fusion
from cdgt_keras.layout import PlayerLayout


@pytest.fixture(scope="module")
def op():
    return built_kernel(kernels.column_combine)


def _table(rng: np.random.Generator, height: int = 40, width: int = 30) -> ColumnTable:
    """Columns of 0, 1, 2 and up to 5 entries at random rows, entries listed out of order."""
    rows, cols = [], []
    for col in range(width):
        count = [0, 1, 1, 2, 2, 5][col % 6]
        rows += rng.choice(height, count, replace=False).tolist()
        cols += [col] * count
    order = rng.permutation(len(rows))
    values = rng.standard_normal(len(rows)).astype(np.float32)
    return ColumnTable.from_entries(np.array(rows)[order], np.array(cols)[order], values, height, width)


def _product_and_gradient(x: tf.Tensor, table: ColumnTable, fused: bool, upstream: tf.Tensor):
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = combine(x, table, fused=fused)
        loss = tf.reduce_sum(out * upstream)
    return out.numpy(), tape.gradient(loss, x).numpy()


def test_the_kernel_gives_the_bits_of_tensorflows_product_forward_and_backward(op) -> None:
    rng = np.random.default_rng(0)
    table = _table(rng)
    x = tf.constant(rng.standard_normal((7, 40)).astype(np.float32))
    upstream = tf.constant(rng.standard_normal((7, 30)).astype(np.float32))
    fused_out, fused_grad = _product_and_gradient(x, table, True, upstream)
    ops_out, ops_grad = _product_and_gradient(x, table, False, upstream)
    np.testing.assert_array_equal(fused_out, ops_out)
    np.testing.assert_array_equal(fused_grad, ops_grad)
    dense = tf.sparse.to_dense(table.sparse).numpy().astype(np.float64)  # an independent reference
    np.testing.assert_allclose(fused_out, x.numpy() @ dense, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fused_grad, upstream.numpy() @ dense.T, rtol=1e-5, atol=1e-5)


def test_by_hand_and_on_an_empty_batch(op) -> None:
    table = ColumnTable.from_entries([0, 2, 1], [0, 0, 2], [0.5, 0.25, 3.0], height=3, width=3)
    out = combine(tf.constant([[2.0, 4.0, 8.0], [1.0, 1.0, 1.0]]), table).numpy()
    np.testing.assert_array_equal(out, [[0.5 * 2 + 0.25 * 8, 0.0, 12.0], [0.75, 0.0, 3.0]])
    assert combine(tf.zeros([0, 3]), table).shape == (0, 3)


def test_the_kernel_names_what_is_wrong(op) -> None:
    x = tf.ones([2, 3])
    good = {"splits": tf.constant([0, 1, 2], tf.int64), "cols": tf.constant([0, 2]), "weights": tf.ones([2]),
            "order": tf.constant([0, 1])}
    assert op(x=x, **good).shape == (2, 2)
    cases = [({"cols": tf.constant([0, 3])}, r"cols\[1\] = 3 is not in \[0, 3\)"),
             ({"order": tf.constant([1, 1])}, "order must name each column"),
             ({"splits": tf.constant([0, 2, 1], tf.int64)}, "splits must run from 0 to len"),
             ({"weights": tf.ones([3])}, "cols and weights must be vectors of one length")]
    for change, message in cases:
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            op(x=x, **{**good, **change})


def test_a_table_rejects_entries_outside_it_or_named_twice() -> None:
    with pytest.raises(ValueError, match="outside the"):
        ColumnTable.from_entries([0, 3], [0, 0], [1.0, 1.0], height=3, width=2)
    with pytest.raises(ValueError, match="twice"):
        ColumnTable.from_entries([1, 1], [0, 0], [1.0, 1.0], height=3, width=2)


@pytest.mark.parametrize("mode", ["mean", "core"])
def test_the_fusion_is_the_same_on_either_road(op, mode) -> None:
    rng = np.random.default_rng(1)
    layout = PlayerLayout.from_frequencies(np.sort(rng.pareto(1.5, 300))[::-1] + 1e-3, 3, overlap=0.2)
    fusion = Fusion(layout, mode)
    probs = [tf.constant(rng.random((5, labels.size)).astype(np.float32)) for labels in layout.player_labels]
    upstream = tf.constant(rng.standard_normal((5, 300)).astype(np.float32))
    results = []
    for kernel in (True, False):
        with tf.GradientTape() as tape:
            tape.watch(probs)
            fused = fusion(probs, kernel=kernel)
            loss = tf.reduce_sum(fused * upstream)
        results.append([fused.numpy(), *(g.numpy() for g in tape.gradient(loss, probs))])
    assert layout.coverage.max() == 2  # the overlaps are there: labels fused from two players
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_a_model_trains_to_the_same_bits_on_either_road(op, monkeypatch) -> None:
    from cdgt_keras.learning import build_trainable

    rng = np.random.default_rng(0)
    x = tf.sparse.from_dense((rng.random((64, 40)) < 0.1).astype(np.float32))
    y = (rng.random((64, 12)) < 0.3).astype(np.float32)
    config = CDGTConfig(encoder_hidden=(8,), head_hidden=(), batch_size=16, epochs=2, seed=3, n_players=3,
                        overlap=0.3, alpha=0.5, beta=0.2)
    weights, calls = [], []
    for fused in (True, False):
        calls.clear()
        monkeypatch.setattr(columns, "column_combine", lambda f=fused: calls.append(1) or (op if f else None))
        keras.utils.set_random_seed(3)
        model = build_trainable(config, y.mean(axis=0))
        model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(16), epochs=2, verbose=0, shuffle=False)
        weights.append(model.get_weights())
        assert calls  # the fusion and the game's selections asked for the kernel
    for a, b in zip(*weights):
        np.testing.assert_array_equal(a, b)


def test_a_graph_traced_for_serving_holds_none_of_cdgts_ops(op) -> None:
    """Inside `portable_graphs` (what the export traces in) prediction keeps to TensorFlow's ops; outside it, in
    process, it fuses through the kernel, as training does."""
    from cdgt_keras.kernels import portable_graphs
    from cdgt_keras.learning import build_trainable

    rng = np.random.default_rng(0)
    y = (rng.random((16, 9)) < 0.3).astype(np.float32)
    model = build_trainable(CDGTConfig(encoder_hidden=(8,), head_hidden=(), n_players=3, overlap=0.3), y.mean(axis=0))
    x = tf.sparse.from_dense((rng.random((4, 20)) < 0.2).astype(np.float32))
    model(x)
    spec = tf.SparseTensorSpec([None, 20], tf.float32)
    with portable_graphs():
        served = tf.function(lambda batch: model(batch, training=False)).get_concrete_function(spec)
    predict = tf.function(lambda batch: model(batch, training=False)).get_concrete_function(spec)
    train = tf.function(lambda batch: model(batch, training=True)).get_concrete_function(spec)

    def cdgt_ops(concrete) -> set[str]:
        graphs = [concrete.graph.as_graph_def()]
        names = {node.op for g in graphs for node in g.node}
        names |= {node.op for g in graphs for f in g.library.function for node in f.node_def}
        return {name for name in names if name.startswith("Cdgt")}

    assert cdgt_ops(served) == set()  # TF Serving has no cdgt ops: the exported graph must not need them
    assert cdgt_ops(predict) == {"CdgtColumnCombine"}  # in process: the kernel, the same bits
    assert cdgt_ops(train) == {"CdgtColumnCombine"}  # the check can see the op where it is used
