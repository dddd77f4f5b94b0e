"""The game's objectives: payoff R, curiosity C_i (rarity + disagreement), potential Phi (SPEC §5).

All functions take probabilities in [0, 1] and return batch means, so they compose into
J_i = R + alpha * C_i (what player i maximises) and Phi = R + alpha * sum_i C_i (what the encoder ascends).

Example:
    >>> rarity_weights(np.array([0.5, 0.0]), "paper").tolist()   # 1 / (1 + freq)
    [0.6666666865348816, 1.0]
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from cdgt_keras.config import CHOICES
from cdgt_keras.metrics import propensities

EPS = 1e-7


def rarity_weights(freq: np.ndarray, kind: str = "paper", clip: float = 10.0, num_train: int = 0,
                   psp_a: float = 0.55, psp_b: float = 1.5) -> np.ndarray:
    """Per-label rarity weight w_l (float32 [L]).

    `paper`: 1 / (1 + freq) exactly as published (range [0.5, 1]). `inverse_sqrt` / `inverse`: freq^-1/2 or
    freq^-1, normalised to mean 1 over the labels and clipped at `clip`; a label with freq 0 is treated as
    half as frequent as the rarest seen label. `none`: all ones. `propensity`: 2 / p_l - 2, p_l Jain et al.'s
    propensity of the label's count freq * `num_train` (`psp_a`, `psp_b`: the PSP@k metric's), neither normalised
    nor clipped: with the log-scoring curiosity (correctness `log_positives`) at alpha = 1 over the BCE payoff, a
    positive's loss weighs 1 + w_l = 2 / p_l - 1, Qaraei et al.'s (2021) convex upper bound of the unbiased BCE
    for labels missing at random with propensity p_l (tests/cdgt_keras/test_objectives.py writes the bound out
    and holds a player's objective and its gradient to it).

        >>> # counts 50 and 1 of 100 rows: propensities 0.5942 and 0.2171 (cdgt_keras.metrics.propensities)
        >>> [round(float(w), 4) for w in rarity_weights(np.array([0.5, 0.01]), "propensity", num_train=100)]
        [1.3656, 7.2103]
    """
    freq = np.asarray(freq, dtype=np.float64)
    if kind == "propensity":
        if num_train < 1:
            raise ValueError("rarity='propensity' needs the number of training rows (num_train), got "
                             f"{num_train}")
        return (2.0 / propensities(freq * num_train, num_train, psp_a, psp_b) - 2.0).astype(np.float32)
    if kind == "paper":
        return (1.0 / (1.0 + freq)).astype(np.float32)
    if kind == "none":
        return np.ones_like(freq, dtype=np.float32)
    if kind not in ("inverse_sqrt", "inverse"):
        raise ValueError(f"rarity={kind!r} is not allowed; choose one of {list(CHOICES['rarity'])}")
    raw = floored(freq) ** (-0.5 if kind == "inverse_sqrt" else -1.0)
    return np.minimum(raw / raw.mean(), clip).astype(np.float32)


def log_prior(freq: np.ndarray, kind: str = "frequency", num_train: int = 0, psp_a: float = 0.55,
              psp_b: float = 1.5) -> np.ndarray:
    """Each label's log prior (float64 [L]), what the logit adjustment shifts a training logit by (times tau).

    `frequency`: log(freq) (Menon et al. 2021), a label never seen counted as half as frequent as the rarest seen
    one. `propensity`: log(p_l), Jain et al.'s propensity of the label's count freq * `num_train` (`psp_a`,
    `psp_b`: the PSP@k metric's): near 0 for every frequent label, so the frequent labels keep their order among
    themselves (the top of the ranking) while the rare ones are lifted by about what PSP@k's weights 1 / p_l ask.

        >>> [round(float(v), 3) for v in log_prior(np.array([0.5, 0.01]))]
        [-0.693, -4.605]
        >>> # counts 50 and 1 of 100 rows: propensities 0.5942 and 0.2171 (cdgt_keras.metrics.propensities)
        >>> [round(float(v), 3) for v in log_prior(np.array([0.5, 0.01]), "propensity", num_train=100)]
        [-0.52, -1.527]
    """
    freq = np.asarray(freq, dtype=np.float64)
    if kind == "propensity":
        if num_train < 1:
            raise ValueError("logit_adjustment_prior='propensity' needs the number of training rows (num_train), "
                             f"got {num_train}")
        return np.log(propensities(freq * num_train, num_train, psp_a, psp_b))
    if kind != "frequency":
        raise ValueError(f"logit_adjustment_prior={kind!r} is not allowed; choose one of "
                         f"{list(CHOICES['logit_adjustment_prior'])}")
    return np.log(floored(freq))


def floored(freq: np.ndarray) -> np.ndarray:
    """Label frequencies with a label never seen counted as half as frequent as the rarest seen one.

        >>> floored(np.array([0.2, 0.0, 0.05])).tolist()
        [0.2, 0.025, 0.05]
    """
    freq = np.asarray(freq, dtype=np.float64)
    positive = freq[freq > 0]
    return np.maximum(freq, positive.min() / 2 if positive.size else 1e-6)


def _clip(p: tf.Tensor) -> tf.Tensor:
    return tf.clip_by_value(p, EPS, 1.0 - EPS)


def binary_cross_entropy(y: tf.Tensor, p: tf.Tensor) -> tf.Tensor:
    """Elementwise BCE on probabilities, clipped at EPS (Keras' convention)."""
    p = _clip(p)
    return -(y * tf.math.log(p) + (1.0 - y) * tf.math.log(1.0 - p))


def payoff(y: tf.Tensor, p_hat: tf.Tensor, kind: str, *, label_weights: tf.Tensor | None = None,
           focal_gamma: float = 2.0, asl_gamma_pos: float = 0.0, asl_gamma_neg: float = 4.0,
           asl_clip: float = 0.05) -> tf.Tensor:
    """Global payoff R = E[M(p_hat, y)] (higher is better): the negative mean loss over batch and labels.

    `bce`, `weighted_bce` (w_l * BCE, the paper's Single-Predictor variant), `focal` (Lin et al. 2017),
    `asl` (asymmetric loss, Ridnik et al. 2021: probability shifting by `asl_clip` on negatives) and
    `soft_f1` (macro soft-F1 over the batch, in [0, 1]).
    """
    if kind == "bce":
        return -tf.reduce_mean(binary_cross_entropy(y, p_hat))
    if kind == "weighted_bce":
        return -tf.reduce_mean(binary_cross_entropy(y, p_hat) * label_weights)
    p = _clip(p_hat)
    if kind == "focal":
        loss = y * (1 - p) ** focal_gamma * -tf.math.log(p) + (1 - y) * p**focal_gamma * -tf.math.log(1 - p)
        return -tf.reduce_mean(loss)
    if kind == "asl":
        shifted = tf.maximum(p - asl_clip, 0.0) if asl_clip > 0 else p
        loss = (y * (1 - p) ** asl_gamma_pos * -tf.math.log(p)
                + (1 - y) * shifted**asl_gamma_neg * -tf.math.log(_clip(1 - shifted)))
        return -tf.reduce_mean(loss)
    if kind == "soft_f1":
        tp = tf.reduce_sum(y * p_hat, axis=0)
        fp = tf.reduce_sum((1 - y) * p_hat, axis=0)
        fn = tf.reduce_sum(y * (1 - p_hat), axis=0)
        return tf.reduce_mean(2 * tp / (2 * tp + fp + fn + EPS))
    raise ValueError(f"payoff={kind!r} is not allowed; choose one of {list(CHOICES['payoff'])}")


def listwise_cross_entropy(y: tf.Tensor, p_hat: tf.Tensor) -> tf.Tensor:
    """Per-example CE of the softmax over the labels' log-odds log(p / (1 - p)) against y / |y| (normalised
    pick-all-labels); an example without labels contributes 0. [B].

    Example:
        >>> ce = listwise_cross_entropy(tf.constant([[1.0, 0.0]]), tf.constant([[0.5, 0.5]]))
        >>> round(float(ce[0]), 6)   # softmax of equal log-odds: -log(1/2)
        0.693147
    """
    p = _clip(p_hat)
    log_odds = tf.math.log(p) - tf.math.log(1.0 - p)
    count = tf.reduce_sum(y, axis=1)
    target = y / tf.maximum(count, 1.0)[:, None]
    return -tf.reduce_sum(target * tf.nn.log_softmax(log_odds, axis=1), axis=1)


def correctness(y: tf.Tensor, p_hat: tf.Tensor, mode: str = "all") -> tf.Tensor:
    """c_l: the expected value under p_hat of the paper's indicator 1{y_hat_l = y_l} (`all`), or only its
    true-positive part y_l * p_hat_l (`positives`); or the log-probability of being right (`log`:
    y log p + (1 - y) log(1 - p), the log scoring rule, <= 0) or its positive part (`log_positives`: y log p).

    The expected indicator's gradient on a positive's logit is p (1 - p): it vanishes exactly where a rare
    label's probability is small, so it cannot lift a missed rare positive; the log forms' gradient is 1 - p.
    """
    if mode == "all":
        return y * p_hat + (1.0 - y) * (1.0 - p_hat)
    if mode == "positives":
        return y * p_hat
    if mode == "log":
        return -binary_cross_entropy(y, p_hat)
    if mode == "log_positives":
        return y * tf.math.log(_clip(p_hat))
    raise ValueError(f"correctness={mode!r} is not allowed; choose one of {list(CHOICES['correctness'])}")


def bernoulli_kl(p: tf.Tensor, q: tf.Tensor) -> tf.Tensor:
    """KL(Bern(p) || Bern(q)) elementwise, both clipped at EPS."""
    p, q = _clip(p), _clip(q)
    return p * tf.math.log(p / q) + (1 - p) * tf.math.log((1 - p) / (1 - q))


def disagreement(p: tf.Tensor, q: tf.Tensor, kind: str = "kl", cap: float = math.log(2.0)) -> tf.Tensor:
    """Per-label disagreement D(pi_i || pibar_-i): `kl` (paper), `js` (Jensen-Shannon, <= log 2) or
    `kl_clipped` (KL capped at `cap`)."""
    if kind == "kl":
        return bernoulli_kl(p, q)
    if kind == "kl_clipped":
        return tf.minimum(bernoulli_kl(p, q), cap)
    if kind == "js":
        m = 0.5 * (p + q)
        return 0.5 * bernoulli_kl(p, m) + 0.5 * bernoulli_kl(q, m)
    raise ValueError(f"disagreement={kind!r} is not allowed; choose one of {list(CHOICES['disagreement'])}")


def rarity_part(weighted_correct: tf.Tensor, player_labels: tf.Tensor, num_labels: int) -> tf.Tensor:
    """(1/L) * sum over l in L_i of w_l * c_l, batch mean. `weighted_correct` is w * c [B, L]."""
    return tf.reduce_mean(tf.reduce_sum(tf.gather(weighted_correct, player_labels, axis=1), axis=1)) / num_labels


def masked_rarity_part(weighted_correct: tf.Tensor, player_mask: tf.Tensor, num_labels: int) -> tf.Tensor:
    """`rarity_part` with L_i as a 0/1 mask [L]: a product instead of a column gather (whose gradient copies the
    whole [B, L] tensor transposed)."""
    return tf.reduce_mean(tf.linalg.matvec(weighted_correct, player_mask)) / num_labels


def peer_mean(flat_probs: tf.Tensor, peer_index: tf.Tensor, peer_mask: tf.Tensor) -> tf.Tensor:
    """pibar_-i on player i's overlap labels [B, |O_i|]: the mean of the other covering players' outputs."""
    peers = tf.gather(flat_probs, peer_index, axis=1)  # [B, |O_i|, K-1]
    return tf.reduce_sum(peers * peer_mask, axis=-1) / tf.maximum(tf.reduce_sum(peer_mask, axis=-1), 1.0)


def disagreement_part(values: tf.Tensor, num_labels: int) -> tf.Tensor:
    """(1/L) * sum over l in O_i of D_l, batch mean."""
    return tf.reduce_mean(tf.reduce_sum(values, axis=1)) / num_labels
