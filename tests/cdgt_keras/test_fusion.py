"""Fusion (SPEC §4, paper Eq. 3): every mode on a hand example, and the weight invariants on random layouts."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from cdgt_keras.fusion import Fusion, flatten_players, fusion_weights
from cdgt_keras.layout import PlayerLayout

FREQ = [0.6, 0.5, 0.4, 0.3, 0.2, 0.1]
# S = 3, O = floor(3 * 0.7 / 2) = 1: player 1 covers {0,1,2,3}, player 2 covers {2,3,4,5}; overlap {2,3};
# core blocks {0,1,2} (player 1) and {3,4,5} (player 2)
LAYOUT = PlayerLayout.from_frequencies(np.array(FREQ), n_players=2, overlap=0.7)
PI_1 = [0.9, 0.2, 0.6, 0.3]  # labels 0, 1, 2, 3
PI_2 = [0.8, 0.1, 0.3, 0.7]  # labels 2, 3, 4, 5


def _probs():
    return [tf.constant([PI_1]), tf.constant([PI_2])]


def _fusion(layout, mode, **kwargs):
    """A Fusion layer built for players that read 4-wide contexts."""
    layer = Fusion(layout, mode, **kwargs)
    layer.build(contexts_shape=[(None, 4)] * layout.n_players)
    return layer


def test_fusion_callable_unbuilt():
    np.testing.assert_allclose(Fusion(LAYOUT, "mean")(_probs()).numpy()[0], [0.9, 0.2, 0.7, 0.2, 0.3, 0.7],
                               atol=1e-6)


def test_flatten_players_appends_a_zero_column():
    flat = flatten_players(_probs()).numpy()[0]
    np.testing.assert_allclose(flat, [*PI_1, *PI_2, 0.0])


def test_mean():
    # label 2: (0.6 + 0.8) / 2 = 0.7; label 3: (0.3 + 0.1) / 2 = 0.2; the others come from their only player
    np.testing.assert_allclose(fusion_weights(LAYOUT, "mean"), [[1, 0], [1, 0], [.5, .5], [.5, .5], [1, 0], [1, 0]])
    fused = _fusion(LAYOUT, "mean")(_probs()).numpy()
    np.testing.assert_allclose(fused, [[0.9, 0.2, 0.7, 0.2, 0.3, 0.7]], atol=1e-6)


def test_core():
    # label 2 is in player 1's core: 0.75 * 0.6 + 0.25 * 0.8 = 0.65
    # label 3 is in player 2's core: 0.25 * 0.3 + 0.75 * 0.1 = 0.15
    weights = fusion_weights(LAYOUT, "core", core_weight=0.75)
    np.testing.assert_allclose(weights, [[1, 0], [1, 0], [.75, .25], [.25, .75], [1, 0], [1, 0]])
    fused = _fusion(LAYOUT, "core", core_weight=0.75)(_probs()).numpy()
    np.testing.assert_allclose(fused, [[0.9, 0.2, 0.65, 0.15, 0.3, 0.7]], atol=1e-6)
    # core_weight 0.6: label 2 → 0.6*0.6 + 0.4*0.8 = 0.68; label 3 → 0.4*0.3 + 0.6*0.1 = 0.18
    fused = _fusion(LAYOUT, "core", core_weight=0.6)(_probs()).numpy()
    np.testing.assert_allclose(fused[0, 2:4], [0.68, 0.18], atol=1e-6)


def test_core_three_players_share_the_rest():
    # L = 9, N = 3, rho = 0.7: {0..3}, {2..6}, {5..8}; label 3 is in player 2's core {3,4,5}, also covered by 1
    layout = PlayerLayout.from_frequencies(np.linspace(0.9, 0.1, 9), n_players=3, overlap=0.7)
    weights = fusion_weights(layout, "core", core_weight=0.75)
    owner = {label: player for player, core in enumerate(layout.core_labels) for label in core}
    for label in (2, 3, 5, 6):
        players = layout.slot_player[label][layout.slot_mask[label] > 0].tolist()
        row = dict(zip(players, weights[label][layout.slot_mask[label] > 0].tolist()))
        assert row[owner[label]] == pytest.approx(0.75)
        assert sum(v for p, v in row.items() if p != owner[label]) == pytest.approx(0.25)


def test_max():
    # label 2: max(0.6, 0.8) = 0.8; label 3: max(0.3, 0.1) = 0.3
    fused = _fusion(LAYOUT, "max")(_probs()).numpy()
    np.testing.assert_allclose(fused, [[0.9, 0.2, 0.8, 0.3, 0.3, 0.7]], atol=1e-6)


def test_static_weights_reject_other_modes():
    with pytest.raises(ValueError, match="max"):
        fusion_weights(LAYOUT, "max")


def test_attention_is_a_convex_combination():
    tf.random.set_seed(0)
    layer = _fusion(LAYOUT, "attention", attention_dim=3)
    contexts = [tf.random.normal([5, 4]), tf.random.normal([5, 4])]
    probs = [tf.random.uniform([5, 4]), tf.random.uniform([5, 4])]
    weights = layer.attention_weights(contexts).numpy()  # [B, L, K]
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(weights * (1 - LAYOUT.slot_mask), 0.0)  # padding slots get nothing
    single = LAYOUT.coverage == 1
    np.testing.assert_allclose(weights[:, single, 0], 1.0, atol=1e-6)
    assert np.all(weights[:, 2:4, :] > 0) and np.all(weights[:, 2:4, :] < 1)
    # the weights depend on x: two examples see different weights on an overlap label
    assert np.ptp(weights[:, 2, 0]) > 1e-4
    fused = layer(probs, contexts).numpy()
    slots = tf.gather(flatten_players(probs), LAYOUT.slot_index, axis=1).numpy()  # [B, L, K]
    np.testing.assert_allclose(fused, (weights * slots).sum(-1), atol=1e-6)
    covered = np.where(LAYOUT.slot_mask > 0, slots, np.nan)
    assert np.all(fused >= np.nanmin(covered, -1) - 1e-6) and np.all(fused <= np.nanmax(covered, -1) + 1e-6)
    np.testing.assert_allclose(fused[:, single], np.nanmax(covered, -1)[:, single], atol=1e-6)


def test_attention_needs_contexts():
    with pytest.raises(ValueError, match="context"):
        _fusion(LAYOUT, "attention", attention_dim=3)(_probs())


def test_attention_costs_o_l_parameters():
    # u_i(x) . v_l: one [d_in, d] projection per player and one [L, d] label table, no [L, hidden^2] term
    layer = _fusion(LAYOUT, "attention", attention_dim=3)
    layer([tf.random.uniform([1, 4])] * 2, [tf.zeros([1, 4])] * 2)
    assert sum(int(np.prod(v.shape)) for v in layer.trainable_variables) == 2 * 4 * 3 + 6 * 3


@settings(max_examples=60, deadline=None)
@given(n_labels=st.integers(2, 40), n_players=st.integers(1, 5), percent=st.integers(0, 99), seed=st.integers(0, 9))
def test_static_weights_sum_to_one(n_labels, n_players, percent, seed):
    n_players = min(n_players, n_labels)
    freq = np.random.default_rng(seed).random(n_labels)
    layout = PlayerLayout.from_frequencies(freq, n_players, percent / 100)
    for mode in ("mean", "core"):
        weights = fusion_weights(layout, mode, core_weight=0.8)
        np.testing.assert_allclose(weights.sum(axis=1), 1.0, atol=1e-6)
        assert np.all(weights[layout.slot_mask == 0] == 0) and np.all(weights >= 0)
    np.testing.assert_allclose(fusion_weights(layout, "mean").max(axis=1), 1.0 / layout.coverage, atol=1e-6)


@pytest.mark.parametrize("mode", ["mean", "core"])
@pytest.mark.parametrize("n_players,overlap", [(1, 0.0), (3, 0.2), (4, 0.5)])
def test_the_sparse_product_equals_the_slot_gather(mode: str, n_players: int, overlap: float):
    """Static fusion as one sparse product (issue 14: the [B, L, K] gather was the largest part of a step at 18.6k
    labels) gives the per-slot weighted sum, values and gradients."""
    rng = np.random.default_rng(n_players)
    layout = PlayerLayout.from_frequencies(rng.random(37), n_players=n_players, overlap=overlap)
    probs = [tf.constant(rng.random((5, int(p.size))), tf.float32) for p in layout.player_labels]
    weights = fusion_weights(layout, mode, core_weight=0.7)
    g = tf.constant(rng.random((5, 37)), tf.float32)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(probs)
        fused = Fusion(layout, mode, core_weight=0.7)(probs)
        reference = tf.reduce_sum(tf.gather(flatten_players(probs), layout.slot_index, axis=1) * weights, axis=-1)
        a, b = tf.reduce_sum(fused * g), tf.reduce_sum(reference * g)
    np.testing.assert_allclose(fused.numpy(), reference.numpy(), rtol=1e-6)
    for x, y in zip(tape.gradient(a, probs), tape.gradient(b, probs)):
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-6)


def test_the_games_products_equal_its_gathers():
    """The rarity part through a label mask and the peers' mean through a sparse product (issue 14) equal the
    gather forms of cdgt_keras.objectives."""
    from cdgt_keras import objectives as obj
    from cdgt_keras.config import CDGTConfig
    from cdgt_keras.game import Game

    rng = np.random.default_rng(5)
    freq = rng.random(41)
    layout = PlayerLayout.from_frequencies(freq, n_players=3, overlap=0.4)
    game = Game(CDGTConfig(n_players=3, overlap=0.4), layout, freq)
    probs = [tf.constant(rng.random((4, int(p.size))), tf.float32) for p in layout.player_labels]
    weighted = tf.constant(rng.random((4, 41)), tf.float32)
    flat = tf.concat(probs, axis=1)
    for i, labels in enumerate(layout.player_labels):
        rarity, _, (own, peers) = game.curiosity_parts(i, weighted, probs, flat)
        np.testing.assert_allclose(rarity.numpy(), obj.rarity_part(weighted, labels, 41).numpy(), rtol=1e-6)
        np.testing.assert_allclose(own.numpy(), tf.gather(probs[i], layout.overlap_positions[i], axis=1).numpy())
        expected = obj.peer_mean(flatten_players(probs), layout.peer_index[i], layout.peer_mask[i])
        np.testing.assert_allclose(peers.numpy(), expected.numpy(), rtol=1e-6)
        assert own.shape[1] == layout.overlap_positions[i].size > 0
