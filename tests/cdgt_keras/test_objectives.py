"""Objectives (SPEC §5): rarity weights, payoffs, disagreements, correctness, and the game on a hand case."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from cdgt_keras import objectives as obj
from cdgt_keras.config import CDGTConfig
from cdgt_keras.model import CDGTModel

LN2 = math.log(2.0)


def test_rarity_paper_and_none():
    np.testing.assert_allclose(obj.rarity_weights(np.array([0.0, 0.25, 0.5, 1.0]), "paper"), [1, 0.8, 2 / 3, 0.5])
    np.testing.assert_array_equal(obj.rarity_weights(np.array([0.0, 0.5]), "none"), [1.0, 1.0])


def test_rarity_inverse_sqrt():
    # raw = freq^-1/2 = [1, 2, 4]; mean 7/3 → [3/7, 6/7, 12/7] (mean 1, rarer = larger)
    w = obj.rarity_weights(np.array([1.0, 0.25, 0.0625]), "inverse_sqrt", clip=100.0)
    np.testing.assert_allclose(w, [3 / 7, 6 / 7, 12 / 7], rtol=1e-6)


def test_rarity_inverse_with_clip():
    # raw = 1/freq = [2, 2, 2, 20]; mean 6.5 → [4/13, 4/13, 4/13, 40/13 = 3.08], clipped at 2
    w = obj.rarity_weights(np.array([0.5, 0.5, 0.5, 0.05]), "inverse", clip=2.0)
    np.testing.assert_allclose(w, [4 / 13, 4 / 13, 4 / 13, 2.0], rtol=1e-6)


def test_rarity_zero_frequency():
    # freq 0 counts as half the rarest seen: 0.125 / 2 = 0.0625 → raw 1/freq = [2, 8, 16], mean 26/3
    w = obj.rarity_weights(np.array([0.5, 0.125, 0.0]), "inverse", clip=100.0)
    np.testing.assert_allclose(w, [6 / 26, 24 / 26, 48 / 26], rtol=1e-6)
    np.testing.assert_allclose(obj.rarity_weights(np.zeros(3), "inverse_sqrt"), 1.0)  # nothing seen: all equal
    with pytest.raises(ValueError, match="rarity"):
        obj.rarity_weights(np.ones(2), "log")


Y = tf.constant([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
P = tf.constant([[0.8, 0.3, 0.6], [0.1, 0.9, 0.4]])
YN, PN = Y.numpy().astype(np.float64), P.numpy().astype(np.float64)
# probability of the true outcome: [[0.8, 0.7, 0.6], [0.9, 0.9, 0.6]]
BCE = -np.log([[0.8, 0.7, 0.6], [0.9, 0.9, 0.6]])


def _payoff(kind, **kw):
    return float(obj.payoff(Y, P, kind, **kw))


def test_bce_and_weighted_bce():
    # -ln of [0.8, 0.7, 0.6, 0.9, 0.9, 0.6] = [0.223144, 0.356675, 0.510826, 0.105361, 0.105361, 0.510826],
    # sum 1.812193, mean 0.302032
    assert _payoff("bce") == pytest.approx(-0.302032, abs=1e-6)
    w = tf.constant([1.0, 2.0, 0.5])
    assert _payoff("weighted_bce", label_weights=w) == pytest.approx(-np.mean(BCE * [1.0, 2.0, 0.5]), abs=1e-6)
    assert float(obj.payoff(Y, tf.constant([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]), "bce")) > -1e-6  # eps-clipped
    with pytest.raises(ValueError, match="payoff"):
        _payoff("hinge")


def test_focal():
    assert _payoff("focal", focal_gamma=0.0) == pytest.approx(_payoff("bce"), abs=1e-6)
    q = YN * PN + (1 - YN) * (1 - PN)  # probability of the true outcome; focal = (1 - q)^2 * -ln q
    assert _payoff("focal", focal_gamma=2.0) == pytest.approx(-np.mean((1 - q) ** 2 * -np.log(q)), abs=1e-6)


def test_asl():
    assert _payoff("asl", asl_gamma_pos=0.0, asl_gamma_neg=0.0, asl_clip=0.0) == pytest.approx(_payoff("bce"), abs=1e-6)
    # Ridnik et al.: positives (1-p)^g+ * -ln p; negatives p_m^g- * -ln(1 - p_m), p_m = max(p - m, 0)
    pm = np.maximum(PN - 0.05, 0.0)
    loss = YN * (1 - PN) ** 1.0 * -np.log(PN) + (1 - YN) * pm**4 * -np.log(1 - pm)
    got = _payoff("asl", asl_gamma_pos=1.0, asl_gamma_neg=4.0, asl_clip=0.05)
    assert got == pytest.approx(-loss.mean(), abs=1e-6)


def test_soft_f1():
    # per label 2tp / (2tp + fp + fn): label 0 1.6/1.9, label 1 1.8/2.2, label 2 1.2/2.0 → mean 0.753429
    assert _payoff("soft_f1") == pytest.approx((1.6 / 1.9 + 1.8 / 2.2 + 0.6) / 3, abs=1e-5)


def test_bernoulli_kl():
    p, q = tf.constant([0.6, 0.3, 0.5]), tf.constant([0.8, 0.1, 0.5])
    # KL(0.6||0.8) = 0.6 ln(0.75) + 0.4 ln 2 = 0.104650; KL(0.3||0.1) = 0.3 ln 3 + 0.7 ln(7/9) = 0.153664
    np.testing.assert_allclose(obj.bernoulli_kl(p, q), [0.104650, 0.153664, 0.0], atol=1e-5)
    # clipped at eps 1e-7: KL(1||0) = ln((1 - 1e-7) / 1e-7) = 16.118
    assert float(obj.bernoulli_kl(tf.constant(1.0), tf.constant(0.0))) == pytest.approx(16.118, abs=1e-2)


def test_js_and_kl_clipped():
    # JS(0.6, 0.8): m = 0.7, (KL(0.6||0.7) + KL(0.8||0.7)) / 2 = (0.022582 + 0.025732) / 2 = 0.024157
    assert float(obj.disagreement(tf.constant(0.6), tf.constant(0.8), "js")) == pytest.approx(0.024157, abs=1e-5)
    rng = np.random.default_rng(0)
    p, q = (tf.constant(rng.random(200), tf.float32) for _ in range(2))
    js, js_rev = obj.disagreement(p, q, "js").numpy(), obj.disagreement(q, p, "js").numpy()
    np.testing.assert_allclose(js, js_rev, atol=1e-6)
    assert np.all(js >= -1e-7) and np.all(js <= LN2 + 1e-6)
    assert float(obj.disagreement(tf.constant(0.0), tf.constant(1.0), "js")) == pytest.approx(LN2, abs=1e-5)
    kl = obj.disagreement(p, q, "kl").numpy()
    assert kl.max() > 0.5  # so the cap below bites
    np.testing.assert_allclose(obj.disagreement(p, q, "kl_clipped", cap=0.5), np.minimum(kl, 0.5), atol=1e-6)
    with pytest.raises(ValueError, match="disagreement"):
        obj.disagreement(p, q, "tv")


def test_correctness():
    # all: y p + (1 - y)(1 - p) = [[0.8, 0.7, 0.6], [0.9, 0.9, 0.6]]; positives: y p
    np.testing.assert_allclose(obj.correctness(Y, P, "all"), [[0.8, 0.7, 0.6], [0.9, 0.9, 0.6]], atol=1e-6)
    np.testing.assert_allclose(obj.correctness(Y, P, "positives"), [[0.8, 0, 0.6], [0, 0.9, 0]], atol=1e-6)
    # log: y log p + (1 - y) log(1 - p); log_positives: y log p
    logs = np.log([[0.8, 0.7, 0.6], [0.9, 0.9, 0.6]])
    np.testing.assert_allclose(obj.correctness(Y, P, "log"), logs, atol=1e-6)
    np.testing.assert_allclose(obj.correctness(Y, P, "log_positives"), logs * Y.numpy(), atol=1e-6)
    # gradient on a positive's logit z (p = sigmoid z): p (1 - p) for `positives`, 1 - p for `log_positives`
    z = tf.Variable([[-3.0]])
    for mode, expected in (("positives", 0.0474 * 0.9526), ("log_positives", 0.9526)):
        with tf.GradientTape() as tape:
            value = obj.correctness(tf.constant([[1.0]]), tf.sigmoid(z), mode)
        assert float(tape.gradient(value, z)[0, 0]) == pytest.approx(expected, rel=1e-3)
    with pytest.raises(ValueError, match="correctness"):
        obj.correctness(Y, P, "negatives")


# ------------------------------------------------------------------ the game on the hand case (SPEC §4-5)
FREQ = [0.6, 0.5, 0.4, 0.3, 0.2, 0.1]  # players {0,1,2,3} and {2,3,4,5}, overlap {2,3} (see test_fusion.py)
GY = tf.constant([[1.0, 0.0, 1.0, 0.0, 0.0, 1.0]])
GP = [tf.constant([[0.9, 0.2, 0.6, 0.3]]), tf.constant([[0.8, 0.1, 0.3, 0.7]])]
GC = [tf.ones([1, 4])] * 2
# fused (mean) = [0.9, 0.2, 0.7, 0.2, 0.3, 0.7]; R = -mean(-ln [0.9, 0.8, 0.7, 0.8, 0.7, 0.7]) = -0.270279
R = -0.2702787
KL_68, KL_31, KL_86, KL_13 = 0.1046496, 0.1536636, 0.0915170, 0.1163225  # KL(0.6||0.8), (0.3||0.1), ...


def _game(built=True, **changes):
    cfg = CDGTConfig(n_players=2, overlap=0.7, alpha=0.5, beta=0.2, encoder_hidden=(4,), head_hidden=(), dropout=0.0)
    model = CDGTModel(cfg.replace(**changes), label_freq=FREQ)
    if built:
        model.build((None, 3))
    return model, model.game(GY, GP, GC, tf.constant(0.2))


def _check(model, out, rarity, disagreement):
    assert float(out.payoff) == pytest.approx(R, abs=1e-5)
    curiosity = [r + 0.2 * d for r, d in zip(rarity, disagreement)]
    for i in range(2):
        assert float(out.rarity[i]) == pytest.approx(rarity[i], abs=1e-5)
        assert float(out.disagreement[i]) == pytest.approx(disagreement[i], abs=1e-5)
        assert float(out.curiosity[i]) == pytest.approx(curiosity[i], abs=1e-5)
        assert float(out.objective[i]) == pytest.approx(R + 0.5 * curiosity[i], abs=1e-5)
        # J_i from the player's own objective (stop-gradient on the peer) has the same value
        value = model.player_objective(i, GY, GP, GC, tf.constant(0.2))
        assert float(value) == pytest.approx(R + 0.5 * curiosity[i], abs=1e-5)
    assert float(out.potential) == pytest.approx(R + 0.5 * sum(curiosity), abs=1e-5)


def test_game_on_an_unbuilt_model():
    _game(built=False)


def test_game_hand_case():
    # c = y p_hat + (1-y)(1-p_hat) = [0.9, 0.8, 0.7, 0.8, 0.7, 0.7]; w = 1 / (1 + freq)
    # rarity_1 = (0.9/1.6 + 0.8/1.5 + 0.7/1.4 + 0.8/1.3) / 6 = 0.368536
    # rarity_2 = (0.7/1.4 + 0.8/1.3 + 0.7/1.2 + 0.7/1.1) / 6 = 0.389180
    # D_1 = (KL(0.6||0.8) + KL(0.3||0.1)) / 6 = 0.043052; D_2 = (KL(0.8||0.6) + KL(0.1||0.3)) / 6 = 0.034640
    model, out = _game()
    _check(model, out, [0.368536, 0.389180], [(KL_68 + KL_31) / 6, (KL_86 + KL_13) / 6])
    # kl diagnostics: labels 0-2 are the upper half of the order; overlap label 2 upper, 3 lower
    assert float(out.kl_head) == pytest.approx((KL_68 + KL_86) / 2, abs=1e-5)  # 0.098083
    assert float(out.kl_tail) == pytest.approx((KL_31 + KL_13) / 2, abs=1e-5)  # 0.134993


def test_game_positives_only():
    # c = y p_hat = [0.9, 0, 0.7, 0, 0, 0.7]: rarity_1 = (0.9/1.6 + 0.7/1.4) / 6 = 0.177083,
    # rarity_2 = (0.7/1.4 + 0.7/1.1) / 6 = 0.189394; disagreement unchanged
    model, out = _game(correctness="positives")
    _check(model, out, [0.177083, 0.189394], [(KL_68 + KL_31) / 6, (KL_86 + KL_13) / 6])


def test_game_js():
    # JS(0.6, 0.8) = 0.024157; JS(0.3, 0.1): m = 0.2, (KL(0.3||0.2) + KL(0.1||0.2)) / 2 = (0.028167 + 0.036690) / 2
    # = 0.032429; JS is symmetric, so both players get (0.024157 + 0.032429) / 6 = 0.009431
    model, out = _game(disagreement="js")
    _check(model, out, [0.368536, 0.389180], [0.009431, 0.009431])
    assert float(out.kl_head) == pytest.approx((KL_68 + KL_86) / 2, abs=1e-5)  # diagnostics stay KL


def test_game_kl_clipped():
    # cap 0.1: D_1 = (min(0.104650, 0.1) + min(0.153664, 0.1)) / 6 = 0.2 / 6;
    # D_2 = (min(0.091517, 0.1) + min(0.116322, 0.1)) / 6 = 0.191517 / 6
    model, out = _game(disagreement="kl_clipped", disagreement_cap=0.1)
    _check(model, out, [0.368536, 0.389180], [0.2 / 6, (KL_86 + 0.1) / 6])


def test_game_alpha_zero_is_the_payoff():
    model, out = _game(alpha=0.0)
    for i in range(2):
        assert float(out.objective[i]) == pytest.approx(R, abs=1e-6)
        assert float(model.player_objective(i, GY, GP, GC, tf.constant(0.2))) == pytest.approx(R, abs=1e-6)
    assert float(out.potential) == pytest.approx(R, abs=1e-6)


# ------------------------------------------------------------------ Qaraei et al.'s bound as the curiosity's rarity
def propensity_bound(y: tf.Tensor, p: tf.Tensor, propensities: tf.Tensor) -> tf.Tensor:
    """Qaraei et al.'s (2021) convex upper bound of the unbiased BCE under propensities, elementwise, written out
    apart from the game: y (2 / p_l - 1) (-log p) + (1 - y) (-log(1 - p)), p clipped as the payoff clips it."""
    p = tf.clip_by_value(p, obj.EPS, 1.0 - obj.EPS)
    return -(y * (2.0 / propensities - 1.0) * tf.math.log(p) + (1.0 - y) * tf.math.log(1.0 - p))


def test_rarity_propensity_hand_values():
    # 100 rows, counts 50 and 1: C = (ln 100 - 1) 2.5^0.55 = 3.605170 x 1.655294 = 5.967612;
    # p = 1 / (1 + C (count + 1.5)^-0.55) = [0.594245, 0.217147]; w = 2 / p - 2 = [1.365617, 7.210341]
    w = obj.rarity_weights(np.array([0.5, 0.01]), "propensity", num_train=100)
    np.testing.assert_allclose(w, [1.365617, 7.210341], rtol=1e-5)
    # the PSP parameters enter: a = 1, b = 0 gives p = 1 / (1 + (ln 100 - 1) / count), so w = 2 (ln 100 - 1) / count
    w1 = obj.rarity_weights(np.array([0.5]), "propensity", num_train=100, psp_a=1.0, psp_b=0.0)
    np.testing.assert_allclose(w1, [0.144207], rtol=1e-5)
    with pytest.raises(ValueError, match="num_train"):
        obj.rarity_weights(np.array([0.5]), "propensity")


def test_propensity_bound_hand_value():
    # y = 1, p = 0.5, propensity 0.25: (2 / 0.25 - 1) ln 2 = 7 ln 2; y = 0: -ln(1 - 0.5) = ln 2
    assert float(propensity_bound(tf.constant(1.0), tf.constant(0.5), tf.constant(0.25))) == pytest.approx(
        7 * LN2, rel=1e-6)
    assert float(propensity_bound(tf.constant(0.0), tf.constant(0.5), tf.constant(0.25))) == pytest.approx(
        LN2, rel=1e-6)


def _bound_model(num_train: int = 40) -> CDGTModel:
    cfg = CDGTConfig(n_players=1, overlap=0.0, alpha=1.0, beta=0.0, payoff="bce", correctness="log_positives",
                     rarity="propensity", encoder_hidden=(4,), head_hidden=(), dropout=0.0)
    model = CDGTModel(cfg, label_freq=[0.5, 0.25, 0.05], num_train=num_train)
    model.build((None, 3))
    return model


def test_the_propensity_rarity_at_alpha_one_is_qaraeis_bound_in_value_and_gradient():
    """One player, BCE payoff, log-scoring curiosity at alpha 1: -J is the mean of Qaraei et al.'s convex bound
    of the unbiased BCE, and what a training turn differentiates has its gradient."""
    model = _bound_model()
    prop = 1.0 / (1.0 + (math.log(40) - 1) * 2.5 ** 0.55 * (np.array([20.0, 10.0, 2.0]) + 1.5) ** -0.55)
    np.testing.assert_allclose(model.rules.rarity_w.numpy(), 2 / prop - 2, rtol=1e-5)
    y = tf.constant([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
    probs = tf.Variable([[0.7, 0.4, 0.2], [0.3, 0.6, 0.1]])
    contexts = [tf.ones([2, 4])]
    with tf.GradientTape(persistent=True) as tape:
        bound = tf.reduce_mean(propensity_bound(y, probs, tf.constant(prop, tf.float32)))
        objective = model.player_objective(0, y, [probs], contexts, tf.constant(0.0))
        turn = model.turn_objective(0, y, [probs], contexts, tf.constant(0.0))
    assert float(objective) == pytest.approx(-float(bound), rel=1e-5)
    expected = tape.gradient(bound, probs).numpy()
    np.testing.assert_allclose(-tape.gradient(objective, probs).numpy(), expected, rtol=1e-5)
    np.testing.assert_allclose(-tape.gradient(turn, probs).numpy(), expected, rtol=1e-5)


def test_a_saved_model_keeps_its_training_rows_and_so_its_propensity_rarity():
    model = _bound_model(num_train=40)
    again = CDGTModel.from_config(model.get_config())
    assert again.num_train == 40
    np.testing.assert_array_equal(again.rules.rarity_w.numpy(), model.rules.rarity_w.numpy())
