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


def test_logit_adjustment_is_off_by_default_and_bounded():
    model = _model()
    x = np.ones((2, 6), np.float32)
    context = model.contexts(x)[0]
    np.testing.assert_array_equal(model.player_probs(0, context, x, training=True),
                                  model.player_probs(0, context, x, training=False))
    with pytest.raises(ValueError, match="logit_adjustment"):
        CDGTConfig(logit_adjustment=-1.0)


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
