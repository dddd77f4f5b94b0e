"""A player's turn on its own labels: J_i's gradient from the fused answer on L_i alone, with the same bits.

At player i's turn (`cdgt_keras.train_step.cyclic_step`) the other players are held fixed, so J_i = R + alpha C_i
depends on player i's parameters only through the fused probabilities of its own labels L_i: on every other label
the fused answer, and R's addends there, are constants. A turn therefore fuses and scores L_i's columns only,
[B, |L_i|] instead of [B, L] for the fusion, the payoff's gradient and the label gathers: at three players with
overlap 0.2 a block holds 37 % of the labels. Each fused column adds the same products in the same order (the
other players' columns are read in the order of the players' flat row), and the payoff's kernel scales each element
by 1 / (B L) as the whole objective does, so the gradient is the whole objective's to the bit (a test holds it). The
value a turn returns is J_i less R's addends off L_i, a constant to player i.

It applies where the fusion's weights are static (`mean`, `core`), the payoff's gradient is cdgt's kernel (the
BCE or focal payoff and log-scoring rarity, `cdgt_keras.payoff_grad.fused_road`) and the disagreement is idle
(beta held at 0): `turns_apply`. Elsewhere a turn scores the whole fused answer.

    >>> import numpy as np
    >>> from cdgt_keras.fusion import fusion_weights
    >>> layout = PlayerLayout.from_frequencies(np.linspace(0.5, 0.05, 8), 2, overlap=0.5)
    >>> plan = build_turns(layout, fusion_weights(layout, "mean"), np.ones(8, np.float32))
    >>> turn = plan.turns[1]
    >>> [(r.player, None if r.positions is None else r.positions.numpy().tolist()) for r in turn.reads]
    [(0, [3, 4]), (1, None)]
    >>> plan.rerun[0].numpy().tolist(), plan.rerun[1]   # after its update, player 0 is needed there only
    ([3, 4], None)
    >>> probs = [tf.fill([1, 5], 0.2), tf.fill([1, 5], 0.6)]
    >>> np.round(fused_block(turn, probs).numpy().astype(float), 6).tolist()   # labels 3..7: 3, 4 the mean of both
    [[0.4, 0.4, 0.6, 0.6, 0.6]]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from cdgt_keras.columns import ColumnTable, combine
from cdgt_keras.layout import PlayerLayout
from cdgt_keras.payoff_grad import PayoffTables, payoff_and_rarity


@dataclass(frozen=True)
class Read:
    """Columns of player j's output that a turn reads: `positions` in j's block (None: all of them, the turn's own
    player); for a player before the turn's (`before`), its re-run output holds only `TurnPlan.rerun[j]`'s
    columns, of which these are `rerun_index` (None: all of them, in order)."""

    player: int
    positions: tf.Tensor | None
    before: bool
    rerun_index: tf.Tensor | None


@dataclass(frozen=True)
class Turn:
    """What player i's turn reads (`reads`, in player order: the order of the players' flat row) and scores: the
    fusion of those columns onto L_i (`table`), L_i's label ids and the payoff's tables on them."""

    player: int
    reads: tuple[Read, ...]
    table: ColumnTable
    labels: tf.Tensor
    payoff: PayoffTables


@dataclass(frozen=True)
class TurnPlan:
    """Every player's Turn, and for each player the positions of its block that the players after it read
    (`rerun`; None where none does): after its update a player's output is needed only there."""

    turns: list[Turn]
    rerun: list[tf.Tensor | None]
    label_column: tf.Tensor  # [N, L] int32: label l's column in player i's block, -1 where it has none


def turns_apply(fusion: str, fused_payoff: bool, disagreement_idle: bool) -> bool:
    """Whether a turn may score its own labels only: static fusion weights, the kernel's payoff, beta held at 0."""
    return fusion in ("mean", "core") and fused_payoff and disagreement_idle


def build_turns(layout: PlayerLayout, weights: np.ndarray, rarity: np.ndarray, focal_gamma: float = 0.0) -> TurnPlan:
    """The TurnPlan of a layout, the fusion's static weights [L, K], the rarity weights [L] and the payoff's focal
    gamma (0: BCE)."""
    reads = [_reads(layout, i) for i in range(layout.n_players)]
    rerun = []
    for j in range(layout.n_players):
        later = [pos for i in range(j + 1, layout.n_players) for k, pos in reads[i] if k == j]
        rerun.append(np.unique(np.concatenate(later)) if later else None)
    turns = []
    for i, block in enumerate(layout.player_labels):
        column = np.full(layout.num_labels, -1, np.int64)
        column[block] = np.arange(block.size)
        entries, rows, cols, values, start = [], [], [], [], 0
        for j, positions in reads[i]:
            labels = layout.player_labels[j][positions]
            slot = np.argmax(layout.slot_player[labels] == j, axis=1)
            rows.append(start + np.arange(positions.size))
            cols.append(column[labels])
            values.append(weights[labels, slot])
            start += positions.size
            index = np.searchsorted(rerun[j], positions) if j < i else None
            whole = index is None or np.array_equal(index, np.arange(rerun[j].size))
            entries.append(Read(j, None if j == i else tf.constant(positions.astype(np.int32)), j < i,
                                None if whole else tf.constant(index.astype(np.int32))))
        table = ColumnTable(np.concatenate(rows), np.concatenate(cols), np.concatenate(values), start, block.size)
        payoff = PayoffTables(np.asarray(rarity, np.float32)[block], np.ones((1, block.size), np.float32),
                              focal_gamma)
        turns.append(Turn(i, tuple(entries), table, tf.constant(block.astype(np.int32)), payoff))
    label_column = np.full((layout.n_players, layout.num_labels), -1, np.int32)
    for i, block in enumerate(layout.player_labels):
        label_column[i, block] = np.arange(block.size)
    return TurnPlan(turns, [None if r is None else tf.constant(r.astype(np.int32)) for r in rerun],
                    tf.constant(label_column))


def own_labels(plan: TurnPlan, i: int, y: tf.Tensor | tf.SparseTensor) -> tf.Tensor:
    """The batch's labels on player i's block [B, |L_i|], dense, from the dense [B, L] or the sparse labels (a
    batch's few positives placed directly: a column gather of the dense [B, L] copies it element by element)."""
    turn = plan.turns[i]
    if not isinstance(y, tf.SparseTensor):
        return tf.gather(y, turn.labels, axis=1)
    columns = tf.gather(plan.label_column[i], y.indices[:, 1])
    kept = columns >= 0
    rows = tf.boolean_mask(y.indices[:, 0], kept)
    at = tf.stack([rows, tf.cast(tf.boolean_mask(columns, kept), tf.int64)], axis=1)
    shape = tf.stack([y.dense_shape[0], tf.cast(tf.shape(turn.labels, out_type=tf.int64)[0], tf.int64)])
    return tf.scatter_nd(at, tf.cast(tf.boolean_mask(y.values, kept), tf.float32), shape)


def _reads(layout: PlayerLayout, i: int) -> list[tuple[int, np.ndarray]]:
    """(player j, the positions of j's block holding player i's labels), in player order, j's with none left out."""
    out = []
    for j, other in enumerate(layout.player_labels):
        positions = np.nonzero(np.isin(other, layout.player_labels[i]))[0]
        if positions.size:
            out.append((j, positions))
    return out


def fused_block(turn: Turn, probs: list[tf.Tensor], reran: bool = False) -> tf.Tensor:
    """The fused answer on the turn's labels [B, |L_i|] from the players' outputs (each [B, |L_j|]; with
    `reran`, the players before i given on their `TurnPlan.rerun` positions only)."""
    parts = []
    for read in turn.reads:
        given = probs[read.player]
        if read.positions is None or (reran and read.before and read.rerun_index is None):
            parts.append(given)
        else:
            parts.append(tf.gather(given, read.rerun_index if reran and read.before else read.positions, axis=1))
    return combine(tf.concat(parts, axis=1), turn.table)


def turn_objective(plan: TurnPlan, i: int, y: tf.Tensor | tf.SparseTensor, probs: list[tf.Tensor], alpha: float,
                   reran: bool = False) -> tf.Tensor:
    """J_i less R's addends off L_i: what player i's turn differentiates (`probs`: the others' held fixed, as in
    `fused_block`; `y`: the batch's multi-hot labels [B, L], dense or sparse)."""
    turn, num_labels = plan.turns[i], int(plan.label_column.shape[1])
    own_y = own_labels(plan, i, y)
    players = (0,) if alpha > 0 else ()
    fused = fused_block(turn, probs, reran)
    value, parts = payoff_and_rarity(own_y, fused, turn.payoff, players, total_labels=num_labels)
    return value + alpha * parts[0] if alpha > 0 else value
