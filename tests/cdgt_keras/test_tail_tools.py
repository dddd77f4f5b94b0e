"""The tail tools of CDGTConfig against hand-computed values: prior output biases, logit adjustment (training
logits shifted by tau * log freq, served logits not) and the wide parts' own learning rate."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from cdgt_keras.config import CDGTConfig
from cdgt_keras.model import CDGTModel

FREQ = np.array([0.5, 0.2, 0.05, 0.01, 0.0])  # the last label never seen: floored to 0.01 / 2 = 0.005


def _model(**overrides) -> CDGTModel:
    keras.utils.set_random_seed(0)
    base = {"n_players": 2, "overlap": 0.0, "encoder_hidden": (4,), "head_hidden": (), "dropout": 0.0}
    return CDGTModel(CDGTConfig(**{**base, **overrides}), FREQ)


def test_prior_bias_starts_every_label_at_its_training_frequency():
    model = _model(prior_bias=True, encoder_hidden=(), n_players=1)
    model.compile(optimizer="adam")
    x = np.zeros((2, 3), np.float32)  # no input signal: the output is sigmoid(bias)
    np.testing.assert_allclose(np.asarray(model(x))[0], [0.5, 0.2, 0.05, 0.01, 0.005], rtol=1e-5)
    # ... and keeps it through Keras' first trace (a bias assigned inside a trace would not persist)
    model.fit(x, np.zeros((2, 5), np.float32), epochs=1, verbose=0)
    assert float(model.heads[0].blocks[-1].bias.numpy()[3]) == pytest.approx(np.log(0.01 / 0.99), abs=0.05)


def test_without_prior_bias_every_label_starts_at_one_half():
    model = _model(encoder_hidden=(), n_players=1)
    np.testing.assert_allclose(np.asarray(model(np.zeros((1, 3), np.float32)))[0], 0.5)


def test_logit_adjustment_shifts_only_the_training_logits_by_tau_log_freq():
    model = _model(logit_adjustment=0.5)
    x = np.random.default_rng(0).standard_normal((3, 6)).astype(np.float32)
    context = model.contexts(x)[1]
    served = np.asarray(model.player_probs(1, context, x, training=False))
    trained = np.asarray(model.player_probs(1, context, x, training=True))
    logit = lambda p: np.log(p / (1 - p))  # noqa: E731
    labels = model.layout.player_labels[1]
    floored = np.maximum(FREQ, 0.005)[labels]
    np.testing.assert_allclose(logit(trained) - logit(served), np.broadcast_to(0.5 * np.log(floored), served.shape),
                               atol=2e-4)


def test_the_propensity_prior_shifts_the_training_logits_by_tau_log_propensity():
    """tau * log(p_l), p_l = 1 / (1 + C (N_l + B)^-A), C = (log M - 1)(B + 1)^A (Jain et al.), hand-computed."""
    keras.utils.set_random_seed(0)
    config = CDGTConfig(n_players=2, overlap=0.0, encoder_hidden=(4,), head_hidden=(), dropout=0.0,
                        logit_adjustment=0.5, logit_adjustment_prior="propensity")
    model = CDGTModel(config, FREQ, num_train=200)
    x = np.random.default_rng(0).standard_normal((3, 6)).astype(np.float32)
    context = model.contexts(x)[1]
    served = np.asarray(model.player_probs(1, context, x, training=False))
    trained = np.asarray(model.player_probs(1, context, x, training=True))
    logit = lambda p: np.log(p / (1 - p))  # noqa: E731
    counts = FREQ[model.layout.player_labels[1]] * 200
    propensity = 1 / (1 + (np.log(200) - 1) * 2.5 ** 0.55 * (counts + 1.5) ** -0.55)
    np.testing.assert_allclose(logit(trained) - logit(served), np.broadcast_to(0.5 * np.log(propensity), served.shape),
                               atol=2e-4)
    assert np.ptp(np.log(propensity)) > 0.1  # the labels are shifted apart
    with pytest.raises(ValueError, match="num_train"):
        CDGTModel(config, FREQ)
    with pytest.raises(ValueError, match="logit_adjustment_prior"):
        CDGTConfig(logit_adjustment_prior="uniform")


def test_logit_adjustment_is_off_by_default_and_bounded():
    model = _model()
    x = np.ones((2, 6), np.float32)
    context = model.contexts(x)[0]
    np.testing.assert_array_equal(model.player_probs(0, context, x, training=True),
                                  model.player_probs(0, context, x, training=False))
    with pytest.raises(ValueError, match="logit_adjustment"):
        CDGTConfig(logit_adjustment=-1.0)
    with pytest.raises(ValueError, match="logit_adjustment"):
        CDGTConfig(logit_adjustment=4.5)


def test_the_wide_part_learns_at_wide_learning_rate():
    """Adam's first step moves every weight with a gradient by the step size (m_hat / sqrt(v_hat) = sign(g)); the
    wide map scale * V must move by `wide_learning_rate`, the deep parts by `learning_rate`."""
    model = _model(wide="all", learning_rate=1e-3, wide_learning_rate=0.05, alpha=0.0, beta=0.0)
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    x = np.random.default_rng(1).standard_normal((8, 6)).astype(np.float32)
    y = (np.random.default_rng(2).random((8, 5)) < 0.3).astype(np.float32)
    model(x)
    assert model.wide_scale == [50.0, 50.0]
    wide_before = model.wide_scale[0] * model.wide[0].kernel.numpy()
    head_before = model.heads[0].blocks[-1].kernel.numpy()
    assert not wide_before.any()  # the wide map starts at zero: the first logits are the deep part's
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    wide_step = np.abs(model.wide_scale[0] * model.wide[0].kernel.numpy() - wide_before)
    head_step = np.abs(model.heads[0].blocks[-1].kernel.numpy() - head_before)
    np.testing.assert_allclose(wide_step.max(), 0.05, rtol=1e-3)
    np.testing.assert_allclose(head_step.max(), 1e-3, rtol=1e-3)


def _batch(seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(seed).standard_normal((8, 6)).astype(np.float32)
    y = (np.random.default_rng(seed + 1).random((8, 5)) < 0.3).astype(np.float32)
    return x, y


def test_an_own_payoff_wide_part_is_a_separate_linear_predictor_averaged_at_serving():
    """wide_payoff="own": the game sees the deep head alone; the player answers (1 - w) deep + w wide."""
    import tensorflow as tf

    model = _model(wide="all", wide_payoff="own", wide_weight=0.3, prior_bias=True)
    x, _ = _batch()
    model(x)
    for i in range(2):
        model.wide[i].kernel.assign(np.random.default_rng(i).standard_normal(model.wide[i].kernel.shape))
        context = model.contexts(x)[i]
        deep = tf.sigmoid(model.heads[i](context)).numpy()
        wide = 1 / (1 + np.exp(-(x @ model.wide[i].kernel.numpy() + model.wide[i].bias.numpy())))
        np.testing.assert_allclose(model.player_probs(i, context, x, training=True).numpy(), deep, rtol=1e-5)
        np.testing.assert_allclose(model.player_probs(i, context, x).numpy(), 0.7 * deep + 0.3 * wide, rtol=1e-5)
        # the wide part's own biases start at its labels' prior odds, as the deep head's do
        labels = model.layout.player_labels[i]
        freq = np.maximum(FREQ[labels], 0.005)
        np.testing.assert_allclose(model.wide[i].bias.numpy(), np.log(freq / (1 - freq)), rtol=1e-5)


def test_an_own_payoff_wide_part_follows_the_gradient_of_its_own_bce():
    """The wide part's gradient in a player's step is the logistic regression gradient X^T (p - y) / (B |L_i|),
    hand-computed, and the deep head's gradient is the game's alone (the same as without the wide part)."""
    import tensorflow as tf

    x, y = _batch(3)
    model = _model(wide="all", wide_payoff="own", alpha=0.0, beta=0.0)
    plain = _model(alpha=0.0, beta=0.0)
    model(x), plain(x)
    plain.set_weights([w for w in model.get_weights()][:len(plain.get_weights())])
    for i in range(2):
        model.wide[i].kernel.assign(np.random.default_rng(i).standard_normal(model.wide[i].kernel.shape) * 0.1)
        labels = model.layout.player_labels[i]
        grads = {}
        for name, m in (("own", model), ("plain", plain)):
            with tf.GradientTape() as tape:
                contexts = m.contexts(x, training=True)
                probs = [m.player_probs(j, c, x, training=True) for j, c in enumerate(contexts)]
                loss = m.wide_loss(i, x, tf.constant(y)) - m.player_objective(i, tf.constant(y), probs, contexts,
                                                                               m.beta_now())
            grads[name] = tape.gradient(loss, m.player_variables(i))
        kernel, bias = model.wide[i].kernel.numpy(), model.wide[i].bias.numpy()
        p = 1 / (1 + np.exp(-(x @ kernel + bias)))
        expected = x.T @ (p - y[:, labels]) / (x.shape[0] * labels.size)
        np.testing.assert_allclose(grads["own"][-2].numpy(), expected, rtol=1e-4, atol=1e-7)
        np.testing.assert_allclose(grads["own"][-1].numpy(), (p - y[:, labels]).mean(0) / labels.size, rtol=1e-4,
                                   atol=1e-7)
        for got, want in zip(grads["own"][:-2], grads["plain"]):  # the deep head: the game's gradient alone
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-8)


def test_wide_weight_is_bounded():
    with pytest.raises(ValueError, match="wide_weight"):
        CDGTConfig(wide_weight=1.5)
    with pytest.raises(ValueError, match="wide_payoff"):
        CDGTConfig(wide_payoff="sum")
    assert CDGTConfig.preset("paper").wide_payoff == "joint"
