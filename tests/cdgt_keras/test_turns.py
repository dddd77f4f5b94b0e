"""cdgt_keras.turns: a player's turn scored on its own labels gives J_i's gradient to the bit, its value is J_i less
R's addends off the player's labels (by hand), and a model trains to the same bits with and without it; under the
BCE payoff and the focal one."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import built_kernel

from cdgt_keras import kernels
from cdgt_keras import objectives as obj
from cdgt_keras.config import CDGTConfig
from cdgt_keras.learning import build_trainable
from cdgt_keras.model import CDGTModel
from cdgt_keras.turns import fused_block, own_labels

SHIPPED = dict(n_players=3, overlap=0.2, alpha=2.0, beta=0.0, payoff="bce", correctness="log_positives",
               rarity="inverse_sqrt", fusion="mean", encoder_hidden=(8,), head_hidden=())


@pytest.fixture(scope="module")
def op():
    return built_kernel(kernels.payoff_grad)


def _model(**overrides) -> CDGTModel:
    rng = np.random.default_rng(1)
    freq = np.sort(rng.uniform(0.01, 0.6, 40))[::-1]
    return CDGTModel(CDGTConfig(**{**SHIPPED, **overrides}), freq)


def _case(model: CDGTModel, rows: int = 7):
    rng = np.random.default_rng(2)
    probs = [tf.constant(rng.random((rows, p.size)).astype(np.float32) ** 2) for p in model.layout.player_labels]
    y = tf.constant((rng.random((rows, model.num_labels)) < 0.3).astype(np.float32))
    return y, probs


def _gradient(objective, model: CDGTModel, i: int, y, probs):
    live = tf.Variable(probs[i])
    with tf.GradientTape() as tape:
        others = [live if j == i else p for j, p in enumerate(probs)]
        value = objective(i, y, others, [tf.zeros([1])] * len(probs), tf.constant(0.0))
    return value.numpy(), tape.gradient(value, live).numpy()


def _payoff_sum(y: np.ndarray, f: np.ndarray, gamma: float) -> float:
    """sum over the entries of -(BCE), or of -(focal loss) at gamma > 0, in float64."""
    if not gamma:
        return float(np.sum(y * np.log(f) + (1 - y) * np.log(1 - f)))
    return float(np.sum(y * (1 - f) ** gamma * np.log(f) + (1 - y) * f**gamma * np.log(1 - f)))


@pytest.mark.parametrize("fusion,payoff", [("mean", {}), ("core", {}),
                                           ("mean", dict(payoff="focal", focal_gamma=0.5)),
                                           ("mean", dict(payoff="focal", focal_gamma=2.0))])
def test_a_turn_has_the_whole_objectives_gradient_to_the_bit(op, fusion, payoff) -> None:
    model = _model(fusion=fusion, **payoff)
    assert model.turns is not None
    y, probs = _case(model)
    for i in range(3):
        whole, g_whole = _gradient(model.player_objective, model, i, y, probs)
        turn, g_turn = _gradient(model.turn_objective, model, i, y, probs)
        np.testing.assert_array_equal(g_turn, g_whole)
        assert np.any(g_turn != 0)
        # the value: J_i less R's addends on the labels off L_i, by NumPy
        off = np.setdiff1d(np.arange(model.num_labels), model.layout.player_labels[i])
        fused = model.fusion(probs).numpy()
        f = np.clip(fused[:, off], obj.EPS, 1 - obj.EPS).astype(np.float64)
        yy = y.numpy()[:, off]
        r_off = _payoff_sum(yy, f, payoff.get("focal_gamma", 0.0)) / (fused.shape[0] * model.num_labels)
        assert turn == pytest.approx(whole - r_off, abs=1e-6)


def test_the_fused_block_is_the_fused_answer_on_the_players_labels() -> None:
    model = _model()
    _, probs = _case(model)
    fused = model.fusion(probs).numpy()
    for i, turn in enumerate(model.turns.turns):
        np.testing.assert_array_equal(fused_block(turn, probs).numpy(), fused[:, model.layout.player_labels[i]])


@pytest.mark.parametrize("overrides", [dict(beta=0.2), dict(fusion="max"), dict(payoff="asl"),
                                       dict(correctness="all")])
def test_turns_score_the_whole_answer_outside_the_shipped_game(overrides) -> None:
    assert _model(**overrides).turns is None


@pytest.mark.parametrize("payoff", [{}, dict(payoff="focal", focal_gamma=0.5)])
def test_a_model_trains_to_the_same_bits_with_and_without_turns(op, payoff) -> None:
    rng = np.random.default_rng(0)
    x = tf.sparse.from_dense((rng.random((64, 40)) < 0.1).astype(np.float32))
    y = (rng.random((64, 30)) < 0.2).astype(np.float32)
    config = CDGTConfig(**{**SHIPPED, "batch_size": 16, "seed": 3, "dropout": 0.2, **payoff})
    weights = []
    for turns in (True, False):
        keras.utils.set_random_seed(3)
        model = build_trainable(config, y.mean(axis=0) + 0.01)
        assert model.turns is not None
        if not turns:
            model.turns = None
        model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(16), epochs=2, verbose=0, shuffle=False)
        weights.append(model.get_weights())
    for a, b in zip(*weights):
        np.testing.assert_array_equal(a, b)


def test_a_players_own_labels_are_the_same_from_sparse_and_dense_labels() -> None:
    model = _model()
    y, _ = _case(model)
    sparse = tf.sparse.from_dense(y)
    for i, labels in enumerate(model.layout.player_labels):
        expected = y.numpy()[:, labels]
        np.testing.assert_array_equal(own_labels(model.turns, i, sparse).numpy(), expected)
        np.testing.assert_array_equal(own_labels(model.turns, i, y).numpy(), expected)


def test_a_rerun_is_the_players_output_where_the_players_after_it_read_it() -> None:
    model = _model(head_hidden=(6,), dropout=0.0, logit_adjustment=0.5)
    context = tf.constant(np.random.default_rng(4).random((5, 8)).astype(np.float32))
    model.contexts(tf.zeros([1, 8]))
    for i in range(3):
        whole = model.player_probs(i, context, training=True).numpy()
        positions = model.turns.rerun[i]
        rerun = model.rerun_probs(i, context).numpy()
        if positions is None:
            assert rerun.shape == (5, 0)
        else:
            assert positions.shape[0] > 0
            np.testing.assert_array_equal(rerun, whole[:, positions.numpy()])


def test_a_turn_reads_the_players_before_it_from_their_reruns() -> None:
    """Blocks where player 2 reads players 0 and 1 and player 1 reads player 0: each turn's fused block from the
    re-run outputs (only the columns the later players read) equals the one from the whole outputs."""
    from cdgt_keras.fusion import fusion_weights
    from cdgt_keras.layout import PlayerLayout
    from cdgt_keras.turns import build_turns

    blocks = [np.array([0, 1, 2, 3, 4]), np.array([2, 3, 5, 6]), np.array([1, 3, 6, 7])]
    layout = PlayerLayout.from_blocks(8, blocks, [np.array([0, 1, 2, 4]), np.array([5, 6]), np.array([7])],
                                      np.arange(8))
    plan = build_turns(layout, fusion_weights(layout, "mean"), np.ones(8, np.float32))
    assert plan.rerun[0].numpy().tolist() == [1, 2, 3] and plan.rerun[1].numpy().tolist() == [1, 3]
    assert plan.turns[2].reads[0].rerun_index.numpy().tolist() == [0, 2]  # player 0's positions 1 and 3
    rng = np.random.default_rng(5)
    probs = [tf.constant(rng.random((3, b.size)).astype(np.float32)) for b in blocks]
    fused = fusion_weights(layout, "mean")
    for turn in plan.turns:
        reran = [tf.gather(p, plan.rerun[j], axis=1) if j < turn.player else p for j, p in enumerate(probs)]
        whole = fused_block(turn, probs).numpy()
        np.testing.assert_array_equal(fused_block(turn, reran, reran=True).numpy(), whole)
        expected = np.zeros((3, 8), np.float32)
        for label in range(8):
            for k, player in enumerate(layout.slot_player[label]):
                if player >= 0:
                    at = int(np.searchsorted(blocks[player], label))
                    expected[:, label] += fused[label, k] * probs[player].numpy()[:, at]
        np.testing.assert_allclose(whole, expected[:, blocks[turn.player]], rtol=1e-6)
