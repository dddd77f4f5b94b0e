"""The payoff (BCE or focal) and rarity parts, with their gradient in one kernel pass.

`payoff_and_rarity(y, fused, tables, players)` returns R = -mean(BCE(y, clip(fused))) and, for each player i named,
its rarity part r_i = mean over the batch of sum over its labels of w_l * y * log(clip(fused)), over L: the values of
`objectives.payoff(..., "bce")` and `objectives.masked_rarity_part` on `correctness(..., "log_positives") * w`.
With cdgt's kernels the values come from `CdgtPayoffValues`, one pass with float64 sums (within float32 rounding of
those functions', tested; TensorFlow's ops take some seventeen passes over [B, L], and training reads the values
only as its logs); without them, from those very functions. Their gradient with respect to `fused` is
TensorFlow's twenty-odd element-wise kernels backward (clip's alone are two comparisons, two zero fills and two
selections); cdgt's `CdgtPayoffGrad` kernel (`cdgt_keras.kernels`) does it in one pass, in the same float32 order
but for the reciprocals, which it takes as IEEE divisions where TensorFlow's vectorised Reciprocal approximates them
(within one float32 ulp, tested). So its bits on an element do not depend on the tensor's shape: a player's turn on
its own labels (cdgt_keras.turns) gets the whole objective's gradient to the bit. Other payoffs and curiosity
forms, and a machine without the kernel, keep TensorFlow's gradient.

The focal payoff (`payoff="focal"`, `PayoffTables.focal_gamma` > 0) takes the same road: R = -mean(focal loss) by
both kernels, its powers taken as exp(g log p) in Eigen's vectorised packets (square roots at g = 1/2) where
TensorFlow's ops take Pow, so its values and gradient agree with the objectives' functions within float32 rounding
(tested), and an element's bits still do not depend on its place in the tensor (a turn's block gets the whole's).

    >>> import numpy as np
    >>> tables = PayoffTables(np.ones(2, np.float32), np.array([[1.0, 0.0], [0.0, 1.0]], np.float32))
    >>> R, parts = payoff_and_rarity(tf.constant([[1.0, 0.0]]), tf.constant([[0.5, 0.5]]), tables, (0,))
    >>> round(float(R), 6), round(float(parts[0]), 6)   # -log 2; (1/2) * log(0.5) over one row
    (-0.693147, -0.346574)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from cdgt_keras import objectives as obj
from cdgt_keras.kernels import payoff_grad, payoff_values


@dataclass(frozen=True)
class PayoffTables:
    """The game's constants the payoff and rarity parts read: w [L], the players' 0/1 label masks [N, L] and the
    payoff's focal gamma (0: BCE)."""

    rarity_w: np.ndarray
    masks: np.ndarray
    focal_gamma: float = 0.0  # the payoff: BCE at 0, else the focal loss at this gamma

    @property
    def num_labels(self) -> int:
        return int(self.masks.shape[1])


def fused_road(payoff: str, correctness: str, listwise_weight: float, coverage: np.ndarray) -> bool:
    """Whether the kernel's gradient applies: the BCE or focal payoff, the log-scoring rarity (`log_positives`), no
    listwise term, at most two players per label (a label's rarity gradient sums its players' parts, and two
    addends are the same sum in any order), and the kernel built."""
    return (payoff in ("bce", "focal") and correctness == "log_positives" and not listwise_weight
            and int(np.max(coverage, initial=0)) <= 2 and payoff_grad() is not None)


def _values(y: tf.Tensor, fused: tf.Tensor, w: tf.Tensor, masks: list[tf.Tensor],
            players: tuple[int, ...], num_labels: int, gamma: float = 0.0) -> tuple[tf.Tensor, ...]:
    """R and the named players' rarity parts, by the objectives' own functions (TensorFlow's ops and bits)."""
    payoff = obj.payoff(y, fused, "focal", focal_gamma=gamma) if gamma else obj.payoff(y, fused, "bce")
    if not players:
        return (payoff,)
    weighted = obj.correctness(y, fused, "log_positives") * w
    return (payoff, *(obj.masked_rarity_part(weighted, masks[i], num_labels) for i in players))


def payoff_and_rarity(y: tf.Tensor, fused: tf.Tensor, tables: PayoffTables, players: tuple[int, ...],
                      total_labels: int | None = None) -> tuple[tf.Tensor, tuple[tf.Tensor, ...]]:
    """(R, (r_i for i in players)) at `fused` [B, L]; differentiable in `fused`, through the kernel when built.

    `total_labels`: `fused` holds a block of the L = total_labels labels (a player's own, `cdgt_keras.turns`),
    and every sum is scaled as over all L: R's addends on the block (-sum(BCE) / (B L)) and the r_i, each with
    the gradient of the whole (the same bits on the block's columns). Needs the kernel."""
    w = tf.constant(tables.rarity_w)
    masks = [tf.constant(m) for m in tables.masks]
    num_labels, op = tables.num_labels, payoff_grad()
    y = tf.convert_to_tensor(y, tf.float32)
    if total_labels is not None and op is None:
        raise ValueError("a block's payoff (total_labels) is scaled as the whole's only by cdgt's kernel, not built")
    if op is None:
        out = _values(y, fused, w, masks, players, num_labels, tables.focal_gamma)
        return out[0], tuple(out[1:])
    total = num_labels if total_labels is None else int(total_labels)
    stacked = tf.constant(tables.masks)
    values_op, gamma = payoff_values(), float(tables.focal_gamma)

    @tf.custom_gradient
    @tf.autograph.experimental.do_not_convert
    def values(f: tf.Tensor) -> tuple[tuple[tf.Tensor, ...], object]:
        def gradient(d_payoff: tf.Tensor | None, *d_parts: tf.Tensor | None) -> tf.Tensor:
            # R = -mean(BCE) and BCE = -(sum): the gradient reaching each addend of the BCE's sum, as Neg, Mean's
            # (divided by the element count) and Neg give it.
            count = tf.cast(tf.size(f), tf.float32) if total == num_labels else \
                tf.cast(tf.shape(f)[0], tf.float32) * float(total)
            scale = -((-_or_zero(d_payoff)) / count)
            # r_i = mean_b(matvec) / L: RealDiv's gradient, then Mean's (divided by the batch size).
            rows = tf.cast(tf.shape(f)[0], tf.float32)
            per_player = [tf.zeros([], tf.float32)] * len(tables.masks)
            live = [False] * len(tables.masks)
            for i, d in zip(players, d_parts):
                if d is not None:
                    per_player[i], live[i] = (d / float(total)) / rows, True
            return op(fused=f, labels=y, rarity=w, masks=stacked, scale=scale,
                      player_scale=tf.stack(per_player), players=tf.constant(live), lo=obj.EPS, hi=1.0 - obj.EPS,
                      gamma=gamma)

        if values_op is not None:
            return _summed_values(values_op, f, y, w, stacked, players, total, gamma), gradient
        out = _values(y, f, w, masks, players, total, gamma)
        if total == num_labels:
            return out, gradient
        return (out[0] * (num_labels / total), *out[1:]), gradient

    out = values(tf.convert_to_tensor(fused, tf.float32))
    return out[0], tuple(out[1:])


def _summed_values(op: object, f: tf.Tensor, y: tf.Tensor, w: tf.Tensor, masks: tf.Tensor,
                   players: tuple[int, ...], total: int, gamma: float = 0.0) -> tuple[tf.Tensor, ...]:
    """R = -bce / (B total) and r_i = parts_i / (B total) from `CdgtPayoffValues`' float64 sums (one pass; within
    float32 rounding of `_values`', whose float32 sums run in another order)."""
    bce, parts = op(fused=f, labels=y, rarity=w, masks=masks, lo=obj.EPS, hi=1.0 - obj.EPS, gamma=gamma)
    count = tf.cast(tf.shape(f)[0], tf.float64) * float(total)
    payoff = tf.cast(-bce / count, tf.float32)
    return (payoff, *(tf.cast(parts[i] / count, tf.float32) for i in players))


def _or_zero(value: tf.Tensor | None) -> tf.Tensor:
    return tf.zeros([], tf.float32) if value is None else value
