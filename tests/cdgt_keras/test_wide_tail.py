"""`wide_tail=False`: a player answers on the tail labels (the `tail_fraction` rarest) with its deep head alone,
its wide part's logits (`wide_payoff="joint"`, `"residual"`) or weight (`"own"`) there being 0; elsewhere nothing
changes. `wide_payoff="residual"`: the game sees the deep heads alone; a wide part fits, by BCE, the deep head's
logits (held fixed) plus its own, sends no gradient to the deep head or the encoder, and the player answers with
sigmoid(deep + wide)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import scipy.sparse as sp
import tensorflow as tf

from cdgt_keras.config import CDGTConfig
from cdgt_keras.data import MultiLabelData
from cdgt_keras.model import CDGTModel
from cdgt_keras.training import fit_model

FREQ = np.array([0.5, 0.3, 0.2, 0.1])  # tail_fraction 0.2 of 4 labels: label 3, player 2's second label


def _model(**fields) -> CDGTModel:
    keras.utils.set_random_seed(0)
    config = CDGTConfig(n_players=2, overlap=0.0, encoder_hidden=(4,), head_hidden=(), dropout=0.0, wide="all",
                        **fields)
    model = CDGTModel(config, FREQ)
    model.build((None, 5))
    for i, part in enumerate(model.wide):
        part.kernel.assign(np.random.default_rng(i).standard_normal(part.kernel.shape))
    return model


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def _parts(model: CDGTModel, x: np.ndarray, i: int) -> tuple[np.ndarray, np.ndarray]:
    context = model.contexts(x)[i]
    return model.heads[i](context).numpy(), model._wide_logits(i, x).numpy()


X = np.random.default_rng(3).uniform(0.1, 1.0, (3, 5)).astype(np.float32)
Y = np.array([[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 1]], np.float32)


def test_joint_wide_logits_leave_the_tail_labels():
    model = _model(wide_tail=False)
    assert model.layout.player_labels[1].tolist() == [2, 3]
    deep, wide = _parts(model, X, 1)
    expected = _sigmoid(deep + wide * np.array([1.0, 0.0]))  # hand: label 3 is the tail's
    context = model.contexts(X)[1]
    np.testing.assert_allclose(model.player_probs(1, context, X).numpy(), expected, rtol=1e-5)
    np.testing.assert_allclose(model.player_probs(1, context, X).numpy()[:, 1], _sigmoid(deep[:, 1]), rtol=1e-5)
    deep0, wide0 = _parts(model, X, 0)  # player 1 owns no tail label: deep + wide everywhere
    np.testing.assert_allclose(model.player_probs(0, model.contexts(X)[0], X).numpy(), _sigmoid(deep0 + wide0),
                               rtol=1e-5)


def test_by_default_the_wide_parts_score_every_label():
    model = _model()
    deep, wide = _parts(model, X, 1)
    np.testing.assert_allclose(model.player_probs(1, model.contexts(X)[1], X).numpy(), _sigmoid(deep + wide),
                               rtol=1e-5)


@pytest.mark.parametrize("wide_tail", [True, False])
def test_own_wide_parts_weigh_nothing_on_the_tail_labels(wide_tail):
    model = _model(wide_tail=wide_tail, wide_payoff="own", wide_weight=0.25)
    deep, wide = _parts(model, X, 1)
    assert model.wide[1].bias is not None  # `own` wide parts carry biases, in the logits read above
    weight = 0.25 * np.array([1.0, 1.0 if wide_tail else 0.0])
    expected = (1.0 - weight) * _sigmoid(deep) + weight * _sigmoid(wide)
    np.testing.assert_allclose(model.player_probs(1, model.contexts(X)[1], X).numpy(), expected, rtol=1e-5)


def test_the_choice_is_saved_with_the_model(tmp_path):
    model = _model(wide_tail=False)
    model.compile(optimizer="adam")
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    assert loaded.cdgt_config.wide_tail is False
    np.testing.assert_allclose(np.asarray(loaded(X)), np.asarray(model(X)), rtol=1e-5)


def test_residual_answers_add_the_wide_logits_and_training_sees_the_deep_head():
    model = _model(wide_payoff="residual", wide_tail=False)
    assert model.wide[1].bias is None  # the deep head's bias serves both
    context = model.contexts(X)[1]
    deep, wide = model.heads[1](context).numpy(), model._wide_logits(1, X).numpy()
    served = model.player_probs(1, context, X).numpy()
    np.testing.assert_allclose(served, _sigmoid(deep + wide * np.array([1.0, 0.0])), rtol=1e-5)  # label 3: deep
    np.testing.assert_allclose(model.player_probs(1, context, X, training=True).numpy(), _sigmoid(deep), rtol=1e-5)


def test_the_residual_loss_is_the_bce_of_the_sum_and_moves_the_wide_part_alone():
    model = _model(wide_payoff="residual")
    context = model.contexts(X)[1]
    deep, wide = model.heads[1](context).numpy(), model._wide_logits(1, X).numpy()
    p = _sigmoid(deep + wide)
    y = Y[:, [2, 3]]  # player 2's labels
    expected = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))  # hand-computed BCE
    with tf.GradientTape() as tape:
        contexts = model.contexts(X, training=True)
        loss = model.wide_loss(1, X, tf.constant(Y), model.deep_logits(1, contexts[1], training=True))
    np.testing.assert_allclose(float(loss), expected, rtol=1e-4)
    deep_variables = model.heads[1].trainable_variables + model.shared_encoder.trainable_variables
    grads = tape.gradient(loss, [*deep_variables, model.wide[1].kernel])
    assert all(g is None or not np.any(g.numpy()) for g in grads[:-1])  # nothing reaches the deep parts
    assert np.any(grads[-1].numpy())


def test_a_residual_model_trains_and_is_saved(tmp_path):
    rng = np.random.default_rng(0)

    def split(rows: int) -> MultiLabelData:
        x = sp.csr_matrix(rng.uniform(0, 1, (rows, 6)) * (rng.uniform(0, 1, (rows, 6)) < 0.6), dtype=np.float32)
        return MultiLabelData(x, sp.csr_matrix((rng.uniform(0, 1, (rows, 4)) < 0.4).astype(np.uint8)),
                              ["a", "b", "c", "d"])

    config = CDGTConfig(n_players=2, encoder_hidden=(4,), head_hidden=(), epochs=2, batch_size=8, wide="all",
                        wide_payoff="residual", wide_learning_rate=0.02)
    model, _, _ = fit_model(config, split(32), split(16))
    assert any(np.any(part.kernel.numpy()) for part in model.wide)  # the wide parts learned
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    x = split(4).features.toarray()
    np.testing.assert_allclose(np.asarray(loaded(x)), np.asarray(model(x)), rtol=1e-5)


def test_the_residual_loss_asks_for_the_deep_logits():
    model = _model(wide_payoff="residual")
    with pytest.raises(ValueError, match="player 2's wide part is residual"):
        model.wide_loss(1, X, tf.constant(Y))


def test_a_cyclic_step_moves_each_residual_wide_part_by_its_bce_gradient_at_the_batch_start():
    """Player i's residual wide part steps on the BCE of sigmoid(deep_i + wide_i) with the deep head as it stood
    when player i played (the first pass's logits: nothing moves head i before its turn), hand-computed."""
    from cdgt_keras import train_step as steps

    lr = 0.5
    model = _model(wide_payoff="residual", schedule="cyclic")
    model.player_optimizers = [keras.optimizers.SGD(lr) for _ in range(2)]
    model.compile(optimizer=keras.optimizers.SGD(lr))
    model(X)
    expected = []
    for i in range(2):
        deep = model.heads[i](model.contexts(X, training=True)[i], training=True).numpy()
        p = _sigmoid(deep + model._wide_logits(i, X).numpy())
        error = (p - Y[:, model.rules.player_label_ids[i]]) * model.wide_scale[i] / (X.shape[0] * p.shape[1])
        assert np.abs(X.T @ error).max() > 1e-3  # a step that moves the part
        expected.append(model.wide[i].kernel.numpy() - lr * X.T @ error)
        assert model.wide[i].bias is None  # the deep head's bias serves the sum
    steps.cyclic_step(model, tf.constant(X), tf.constant(Y))
    for i, kernel in enumerate(expected):
        np.testing.assert_allclose(model.wide[i].kernel.numpy(), kernel, rtol=1e-5, atol=1e-6)
