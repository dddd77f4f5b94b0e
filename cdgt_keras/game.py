"""The game of CD-GTMLL (SPEC §5) as one object built from the config: the payoff R of the fused prediction, each
player's curiosity C_i (rarity part + beta * disagreement part), its objective J_i = R + alpha * C_i, and the
potential Phi = R + alpha * sum_i C_i. A new payoff or curiosity form is a change to `cdgt_keras/objectives.py`
(the formula) and this module (where it enters the game); the model only fuses the players' outputs.

Example:
    >>> import numpy as np, tensorflow as tf
    >>> layout = PlayerLayout.from_frequencies(np.array([0.5, 0.3, 0.1, 0.05]), n_players=2, overlap=0.0)
    >>> game = Game(CDGTConfig(n_players=2, overlap=0.0, alpha=0.5), layout, np.array([0.5, 0.3, 0.1, 0.05]))
    >>> y = tf.constant([[1.0, 0.0, 0.0, 1.0]])
    >>> probs = [tf.constant([[0.9, 0.2]]), tf.constant([[0.1, 0.6]])]
    >>> terms = game.terms(y, tf.concat(probs, axis=1), probs, beta=tf.constant(0.2))
    >>> round(float(terms.potential - terms.payoff - 0.5 * (terms.curiosity[0] + terms.curiosity[1])), 6)
    0.0
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from cdgt_keras import objectives as obj
from cdgt_keras.columns import ColumnTable, combine
from cdgt_keras.config import CDGTConfig
from cdgt_keras.layout import PlayerLayout
from cdgt_keras.payoff_grad import PayoffTables, fused_road, payoff_and_rarity


@dataclass(frozen=True)
class GameTerms:
    """Every term of the game at one batch (scalars; per-player tuples in player order)."""

    payoff: tf.Tensor  # R
    rarity: tuple[tf.Tensor, ...]  # each C_i's rarity part
    disagreement: tuple[tf.Tensor, ...]  # each C_i's disagreement part, before beta
    curiosity: tuple[tf.Tensor, ...]  # C_i = rarity + beta * disagreement
    objective: tuple[tf.Tensor, ...]  # J_i = R + alpha * C_i
    potential: tf.Tensor  # Phi = R + alpha * sum_i C_i
    kl_head: tf.Tensor  # mean KL(own || peers) over overlap labels in the upper (head) half of their block
    kl_tail: tf.Tensor  # ... and in the lower (tail) half

    def logged(self) -> dict[str, tf.Tensor]:
        """{name: value} of what training logs: loss = -Phi, the game's scalars and each player's parts."""
        out = {"loss": -self.potential, "payoff": self.payoff, "potential": self.potential,
               "kl_head": self.kl_head, "kl_tail": self.kl_tail}
        for i, (j, c, r, d) in enumerate(zip(self.objective, self.curiosity, self.rarity, self.disagreement)):
            out.update({f"player{i + 1}_loss": -j, f"player{i + 1}_curiosity": c, f"player{i + 1}_rarity": r,
                        f"player{i + 1}_disagreement": d})
        return out


class Game:
    """The game's constant tables (rarity weights, label blocks, overlaps, peers) and its terms."""

    def __init__(self, config: CDGTConfig, layout: PlayerLayout, label_freq: np.ndarray, num_train: int = 0):
        self.config, self.num_labels = config, layout.num_labels
        rarity = obj.rarity_weights(np.asarray(label_freq), config.rarity, config.rarity_clip, num_train,
                                    config.psp_a, config.psp_b)
        self.rarity_w = tf.constant(rarity)
        self.player_label_ids = [tf.constant(p, dtype=tf.int32) for p in layout.player_labels]
        # Column gathers of [B, L] tensors and their gradients (transposed copies, segment sums) were a large
        # share of a step at 18.6k labels: the same sums and selections as products with static tables.
        masks = np.stack([np.isin(np.arange(layout.num_labels), p).astype(np.float32) for p in layout.player_labels])
        self.player_mask = [tf.constant(m) for m in masks]
        # The BCE or focal payoff and the rarity take their gradient from one kernel pass (cdgt_keras.payoff_grad)
        gamma = config.focal_gamma if config.payoff == "focal" else 0.0
        self.payoff_tables = PayoffTables(rarity, masks, gamma)
        self.fused_payoff = fused_road(config.payoff, config.correctness, config.listwise_weight, layout.coverage)
        self.own_select = [_selection(pos, np.ones(pos.size, np.float32), int(p.size))
                           for pos, p in zip(layout.overlap_positions, layout.player_labels)]
        self.peer_matrix = [_peer_matrix(idx, msk, layout.flat_size)
                            for idx, msk in zip(layout.peer_index, layout.peer_mask)]
        # beta = 0 throughout: the disagreement is logged, but its gradient (beta times it) is 0, so not taken
        self.disagreement_idle = config.beta == 0.0 and config.beta_schedule == "constant"
        upper = [layout.upper_half[labels] for labels in layout.overlap_labels]
        self.overlap_upper = tf.constant(np.concatenate(upper).astype(np.float32) if upper else np.zeros(0, np.float32))

    def payoff(self, y: tf.Tensor, fused: tf.Tensor) -> tf.Tensor:
        """R = E[M(p_hat, y)] of the config's payoff, with its parameters."""
        cfg = self.config
        value = obj.payoff(y, fused, cfg.payoff, label_weights=self.rarity_w, focal_gamma=cfg.focal_gamma,
                           asl_gamma_pos=cfg.asl_gamma_pos, asl_gamma_neg=cfg.asl_gamma_neg, asl_clip=cfg.asl_clip)
        if cfg.listwise_weight:
            listwise = tf.reduce_mean(obj.listwise_cross_entropy(y, fused))
            value -= cfg.listwise_weight / self.num_labels * listwise
        return value

    def payoff_and_rarity(self, y: tf.Tensor, fused: tf.Tensor,
                          players: tuple[int, ...]) -> tuple[tf.Tensor, tuple[tf.Tensor, ...]]:
        """R and the named players' rarity parts (the first term of C_i) at `fused`."""
        if self.fused_payoff:
            return payoff_and_rarity(y, fused, self.payoff_tables, players)
        value = self.payoff(y, fused)
        if not players:
            return value, ()
        weighted = self.weighted_correctness(y, fused)
        return value, tuple(obj.masked_rarity_part(weighted, self.player_mask[i], self.num_labels) for i in players)

    def disagreement_parts(self, i: int, probs: list[tf.Tensor],
                           flat: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tuple[tf.Tensor, tf.Tensor]]:
        """Player i's disagreement part (before beta), its values per label [B, |O_i|] and (own, peers)
        probabilities [B, |O_i|]; `flat`: the players' probabilities concatenated."""
        cfg = self.config
        own = combine(probs[i], self.own_select[i])
        peers = combine(flat, self.peer_matrix[i])  # the peers' mean (peer_mean)
        values = obj.disagreement(own, peers, cfg.disagreement, cfg.disagreement_cap)
        part = obj.disagreement_part(values, self.num_labels)
        return tf.stop_gradient(part) if self.disagreement_idle else part, values, (own, peers)

    def curiosity_parts(self, i: int, weighted: tf.Tensor, probs: list[tf.Tensor],
                        flat: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tuple[tf.Tensor, tf.Tensor]]:
        """Player i's rarity part, disagreement part (before beta), and (own, peers) probabilities [B, |O_i|].

        `weighted`: w * c [B, L] (`weighted_correctness`); `flat`: the players' probabilities concatenated."""
        rarity = obj.masked_rarity_part(weighted, self.player_mask[i], self.num_labels)
        dis, _, pair = self.disagreement_parts(i, probs, flat)
        return rarity, dis, pair

    def weighted_correctness(self, y: tf.Tensor, fused: tf.Tensor) -> tf.Tensor:
        """w_l * c_l [B, L], what every player's rarity part sums over its own labels."""
        return obj.correctness(y, fused, self.config.correctness) * self.rarity_w

    def player_objective(self, i: int, y: tf.Tensor, fused: tf.Tensor, probs: list[tf.Tensor],
                         beta: tf.Tensor) -> tf.Tensor:
        """J_i = R + alpha * C_i at `fused` = the fusion of `probs` (the caller holds the other players fixed).

        With beta held at 0 the disagreement part is left out: beta times it adds 0 to the value and nothing to
        the gradient."""
        alpha = self.config.alpha
        value, parts = self.payoff_and_rarity(y, fused, (i,) if alpha > 0 else ())
        if alpha > 0:
            if self.disagreement_idle:
                value += alpha * parts[0]
            else:
                dis, _, _ = self.disagreement_parts(i, probs, tf.concat(probs, axis=1))
                value += alpha * (parts[0] + beta * dis)
        return value

    def terms(self, y: tf.Tensor, fused: tf.Tensor, probs: list[tf.Tensor], beta: tf.Tensor) -> GameTerms:
        """Every term at the given outputs, differentiable everywhere (`fused` = the fusion of `probs`)."""
        alpha, flat = self.config.alpha, tf.concat(probs, axis=1)
        R, rarity = self.payoff_and_rarity(y, fused, tuple(range(len(probs))))
        dis, curiosity, kl = [], [], []
        for i, r in enumerate(rarity):
            d, values, (own, peers) = self.disagreement_parts(i, probs, flat)
            dis.append(d)
            curiosity.append(r + beta * d)
            kl.append(values if self.config.disagreement == "kl" else obj.bernoulli_kl(own, peers))
        kl = tf.concat(kl, axis=1)  # [B, sum |O_i|]
        return GameTerms(
            payoff=R, rarity=tuple(rarity), disagreement=tuple(dis), curiosity=tuple(curiosity),
            objective=tuple(R + alpha * c for c in curiosity), potential=R + alpha * tf.add_n(curiosity),
            kl_head=_masked_mean(kl, self.overlap_upper), kl_tail=_masked_mean(kl, 1.0 - self.overlap_upper))


def _selection(rows: np.ndarray, values: np.ndarray, height: int) -> ColumnTable:
    """[height, len(rows)] with values[j] at (rows[j], j): x @ it = x[:, rows] * values."""
    rows = np.asarray(rows, np.int64)
    return ColumnTable(rows, np.arange(rows.size), values, height, rows.size)


def _peer_matrix(peer_index: np.ndarray, peer_mask: np.ndarray, flat_size: int) -> ColumnTable:
    """[flat_size, |O_i|]: column o holds 1/k at the flat positions of the k other players covering label o, so
    that flat @ it is `objectives.peer_mean` (padding slots, masked, are left out)."""
    counts = np.maximum(peer_mask.sum(axis=1), 1.0)
    cols, slots = np.nonzero(peer_mask > 0)
    rows = peer_index[cols, slots].astype(np.int64)
    return ColumnTable(rows, cols, (1.0 / counts[cols]).astype(np.float32), flat_size, peer_index.shape[0])


def _masked_mean(values: tf.Tensor, column_mask: tf.Tensor) -> tf.Tensor:
    """Mean of values [B, C] over the columns where column_mask [C] is 1 (0 when none)."""
    total = tf.reduce_sum(values * column_mask)
    count = tf.reduce_sum(column_mask) * tf.cast(tf.shape(values)[0], tf.float32)
    return tf.math.divide_no_nan(total, count)

