"""The learning schedules of SPEC §6: simultaneous (Jacobi) gradients, cyclic (Gauss-Seidel) order, and the
N=1, alpha=0 reduction to plain Keras BCE training."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from cdgt_keras import train_step as steps
from cdgt_keras.config import CDGTConfig
from cdgt_keras.model import CDGTModel
from cdgt_keras.sparse import SparseDense

FEATURES, LABELS, BATCH = 16, 15, 16  # 15 labels, N=3, overlap 0.4: S=5, O=1, so overlap labels exist


def _data(n: int = BATCH, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, FEATURES)).astype(np.float32)
    y = (rng.random((n, LABELS)) < np.linspace(0.6, 0.1, LABELS)).astype(np.float32)
    freq = np.linspace(0.5, 0.02, LABELS)  # distinct, so the label order is label id order
    return x, y, freq


def _config(**overrides) -> CDGTConfig:
    base = {"n_players": 3, "overlap": 0.4, "alpha": 0.5, "beta": 0.2, "encoder_hidden": (8,), "head_hidden": (6,),
            "dropout": 0.0, "attention_dim": 4}
    return CDGTConfig(**{**base, **overrides})


def _values(variables) -> list[np.ndarray]:
    return [np.array(v.numpy()) for v in variables]


def _max_abs(a: list, b: list) -> float:
    assert len(a) == len(b) > 0
    return max(float(np.max(np.abs(np.asarray(u) - np.asarray(v)))) for u, v in zip(a, b))


def _independent_objective_gradient(model: CDGTModel, i: int, x, y) -> list[tf.Tensor]:
    """grad_theta_i J_i computed without the library's stop-gradients: every other player's output and context
    is a constant evaluated outside the tape, and J_i is read from `model.game`."""
    contexts = [tf.constant(c) for c in model.contexts(x, training=True)]
    probs = [tf.constant(model.player_probs(j, c, training=True)) for j, c in enumerate(contexts)]
    with tf.GradientTape() as tape:
        ctx = list(contexts)
        if model.player_encoders:
            ctx[i] = model.player_encoders[i](x, training=True)
        live = list(probs)
        live[i] = model.player_probs(i, ctx[i], training=True)
        value = model.game(y, live, ctx, model.beta_now()).objective[i]
    return tape.gradient(value, model.player_variables(i))


def _potential_gradient(model: CDGTModel, x, y) -> list[tf.Tensor]:
    """grad of -Phi wrt the shared variables, from a tape over `model.game`."""
    with tf.GradientTape() as tape:
        contexts = model.contexts(x, training=True)
        probs = [model.player_probs(i, c, training=True) for i, c in enumerate(contexts)]
        loss = -model.game(y, probs, contexts, model.beta_now()).potential
    return tape.gradient(loss, model.shared_variables())


# ------------------------------------------------------------------------------------------ simultaneous
@pytest.mark.parametrize("shared_encoder", [True, False])
@pytest.mark.parametrize("fusion", ["mean", "attention"])
def test_simultaneous_gradients_equal_separate_tapes(fusion: str, shared_encoder: bool) -> None:
    x, y, freq = _data()
    keras.utils.set_random_seed(1)
    model = CDGTModel(_config(fusion=fusion, shared_encoder=shared_encoder), freq)
    model(x)
    assert all(labels.size for labels in model.layout.overlap_labels)  # the disagreement term is live
    x, y = tf.constant(x), tf.constant(y)
    player_grads, shared_grads, _ = steps.simultaneous_gradients(model, x, y)  # grads of -J_i (scale 1)
    reference = steps.player_gradients(model, x, y, training=True)  # grads of +J_i
    assert len(player_grads) == len(reference) == 3
    for i in range(3):
        mine = [g.numpy() for g in player_grads[i]]
        assert len(mine) == len(model.player_variables(i)) and all(np.isfinite(g).all() for g in mine)
        assert _max_abs(mine, [-g.numpy() for g in reference[i]]) < 1e-6
        independent = [-g.numpy() for g in _independent_objective_gradient(model, i, x, y)]
        assert _max_abs(mine, independent) < 1e-6
        assert max(float(np.abs(g).max()) for g in mine) > 1e-4  # not trivially zero
    # Without stop-gradients player i would also collect the other players' objectives: a different gradient.
    with tf.GradientTape() as tape:
        contexts = model.contexts(x, training=True)
        probs = [model.player_probs(i, c, training=True) for i, c in enumerate(contexts)]
        naive = -tf.add_n(model.game(y, probs, contexts, model.beta_now()).objective)
    wrong = tape.gradient(naive, model.player_variables(1))
    assert _max_abs([g.numpy() for g in player_grads[1]], [g.numpy() for g in wrong]) > 1e-4
    shared = model.shared_variables()
    assert len(shared) == (2 if shared_encoder else 0) + (4 if fusion == "attention" else 0)
    assert len(shared_grads) == len(shared)
    if shared:
        expected = _potential_gradient(model, x, y)
        assert _max_abs([g.numpy() for g in shared_grads], [g.numpy() for g in expected]) < 1e-6


# ------------------------------------------------------------------------------------------ cyclic
@pytest.mark.parametrize(("fusion", "shared_encoder"), [("mean", True), ("mean", False), ("attention", True)])
def test_cyclic_players_see_earlier_updates_and_encoder_uses_start_gradient(fusion: str, shared_encoder: bool) -> None:
    lr = 2.0  # large, and wide overlaps (4 labels per pair), so that player 1's step visibly moves player 2's gradient
    x, y, freq = _data()
    keras.utils.set_random_seed(2)
    model = CDGTModel(_config(fusion=fusion, shared_encoder=shared_encoder, schedule="cyclic", overlap=0.8), freq)
    model.player_optimizers = [keras.optimizers.SGD(lr) for _ in range(3)]
    model.compile(optimizer=keras.optimizers.SGD(lr))
    model(x)
    assert all(opt.built for opt in model.player_optimizers)
    x, y = tf.constant(x), tf.constant(y)
    players = [model.player_variables(i) for i in range(3)]
    shared = model.shared_variables()
    start_players, start_shared = [_values(p) for p in players], _values(shared)

    def grad_j(i: int) -> list[np.ndarray]:
        return [g.numpy() for g in steps.player_gradients(model, x, y, training=True)[i]]

    def ascend(i: int, grads: list[np.ndarray]) -> None:  # SGD on -J_i: theta_i <- theta_i + lr * grad J_i
        for var, g in zip(players[i], grads):
            var.assign(var.numpy() + lr * g)

    # Gauss-Seidel reference: each player's gradient at the parameters its predecessors already moved.
    jacobi = [grad_j(i) for i in range(3)]
    phi_grads = [-g.numpy() for g in _potential_gradient(model, x, y)] if shared else []
    sequential = []
    for i in range(3):
        sequential.append(grad_j(i))
        ascend(i, sequential[i])
    for var, value in zip([v for p in players for v in p], [v for p in start_players for v in p]):
        var.assign(value)  # restore the start parameters

    terms = steps.cyclic_step(model, x, y)
    assert np.isfinite(float(terms.potential))
    for i in range(3):
        change = [a - b for a, b in zip(_values(players[i]), start_players[i])]
        assert _max_abs(change, [lr * g for g in sequential[i]]) < 1e-6, f"player {i + 1}"
    for i in (1, 2):  # a Jacobi step would have used the start-of-batch gradient: measurably different
        gap = _max_abs([lr * g for g in sequential[i]], [lr * g for g in jacobi[i]])
        assert gap > 1e-4, f"player {i + 1}"
    assert _max_abs(jacobi[0], sequential[0]) == 0.0
    if shared:  # the encoder steps on grad Phi taken at the batch's start parameters
        change = [a - b for a, b in zip(_values(shared), start_shared)]
        assert _max_abs(change, [lr * g for g in phi_grads]) < 1e-6
        assert max(float(np.abs(c).max()) for c in change) > 1e-4


@pytest.mark.parametrize("overrides", [
    {"head_hidden": (), "dropout": 0.5},  # the shipped preset's shape: linear heads, dropout in the encoder
    {"head_hidden": (6,), "dropout": 0.0, "fusion": "attention", "alpha": 2.0},
])
def test_a_turn_read_from_the_first_forward_pass_trains_the_same_bits(monkeypatch, overrides: dict) -> None:
    """cyclic_step reads each player's probabilities at its turn from the batch's first forward pass (kept on a
    persistent tape) instead of running its head again: three epochs of model.fit give the same weights to the
    bit as the step that runs the head again."""
    x, y, freq = _data(n=4 * BATCH, seed=5)

    def trained(reuse: bool) -> list[np.ndarray]:
        monkeypatch.setattr(steps, "reuses_first_forward", lambda model: reuse)
        keras.utils.set_random_seed(7)
        model = CDGTModel(_config(**overrides), freq)
        model.compile(optimizer=keras.optimizers.Adam(1e-2))
        model.fit(x, y, batch_size=BATCH, epochs=3, shuffle=False, verbose=0)
        return [np.array(w) for w in model.get_weights()]

    assert steps.reuses_first_forward(CDGTModel(_config(**overrides), freq))
    reused, again = trained(True), trained(False)
    assert len(reused) == len(again)
    for a, b in zip(reused, again):
        np.testing.assert_array_equal(a, b)
    assert not steps.reuses_first_forward(CDGTModel(_config(head_hidden=(6,), dropout=0.5), freq))
    assert not steps.reuses_first_forward(CDGTModel(_config(shared_encoder=False), freq))


# ------------------------------------------------------------------------------------------ N=1 == Keras BCE
@pytest.mark.parametrize("schedule", ["cyclic", "simultaneous"])
def test_single_player_without_curiosity_is_plain_bce_training(schedule: str) -> None:
    lr, epochs = 1e-2, 3
    x, y, _ = _data(n=4 * BATCH, seed=3)
    freq = y.mean(axis=0)
    keras.utils.set_random_seed(4)
    cdgt = CDGTModel(_config(n_players=1, alpha=0.0, learning_rate=lr, schedule=schedule), freq)
    cdgt(x[:2])
    plain = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(6, activation="relu"),
                              keras.layers.Dense(LABELS, activation="sigmoid")])
    cdgt_layers = [*cdgt.shared_encoder.layers, *cdgt.heads[0].layers]
    assert [type(layer) for layer in cdgt_layers] == [SparseDense] * 3  # a keras Dense on dense input
    for mine, theirs in zip(cdgt_layers, plain.layers):
        theirs.set_weights(mine.get_weights())
    np.testing.assert_allclose(cdgt.predict(x, verbose=0), plain.predict(x, verbose=0), atol=1e-6)
    start = [w.copy() for w in plain.get_weights()]

    plain.compile(optimizer=keras.optimizers.Adam(lr), loss="binary_crossentropy")
    cdgt.compile(optimizer=keras.optimizers.Adam(lr))
    plain_hist = plain.fit(x, y, batch_size=BATCH, epochs=epochs, shuffle=False, verbose=0).history
    cdgt_hist = cdgt.fit(x, y, batch_size=BATCH, epochs=epochs, shuffle=False, verbose=0).history

    after_plain = plain.get_weights()
    after_cdgt = [w for layer in cdgt_layers for w in layer.get_weights()]
    assert _max_abs(after_plain, start) > 1e-2  # training moved the weights
    # 1e-5: the Keras loss takes the logits path (sigmoid_cross_entropy_with_logits) while CDGT clips
    # probabilities at 1e-7; the two gradients agree to float32 round-off, which 12 Adam steps keep below 1e-6.
    assert _max_abs(after_cdgt, after_plain) < 1e-5
    np.testing.assert_allclose(cdgt_hist["loss"], plain_hist["loss"], atol=1e-5)
