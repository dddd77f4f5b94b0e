"""Fusion of the players' outputs into one prediction per label (SPEC §4, paper Eq. 3).

p_hat_l = sum over the players i covering l of w_{i,l} * pi_{i,l}, weights summing to 1 per label; or the max.

Example:
    >>> layout = PlayerLayout.from_frequencies(np.linspace(0.5, 0.05, 8), 2, overlap=0.5)
    >>> fusion_weights(layout, "mean")[3].tolist()   # label 3 is covered by both players
    [0.5, 0.5]
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from cdgt_keras.columns import ColumnTable, combine
from cdgt_keras.layout import PlayerLayout


def fusion_weights(layout: PlayerLayout, mode: str, core_weight: float = 0.75) -> np.ndarray:
    """Static per-slot weights [L, K] for `mean` and `core` fusion; each row sums to 1 over real slots.

    `core`: the player whose core block holds the label gets `core_weight`, the others share the rest.
    """
    mask = layout.slot_mask
    coverage = mask.sum(axis=1, keepdims=True)
    if mode == "mean":
        return (mask / coverage).astype(np.float32)
    if mode != "core":
        raise ValueError(f"static fusion weights exist for 'mean' and 'core', not {mode!r}")
    owner = np.full(layout.num_labels, -1, dtype=np.int32)
    for player, labels in enumerate(layout.core_labels):
        owner[labels] = player
    is_owner = (layout.slot_player == owner[:, None]) & (mask > 0)
    others = np.maximum(coverage - 1, 1)
    weights = np.where(is_owner, core_weight, (1.0 - core_weight) / others) * mask
    weights = np.where(coverage == 1, mask, weights)  # a label with one player takes it whole
    return weights.astype(np.float32)


def slot_table(layout: PlayerLayout, weights: np.ndarray) -> ColumnTable:
    """The static fusion as a sparse [sum |L_i|, L] table: entry (flat position of player i's label l, l) holds
    w_{i,l}, so that p_hat = concat(players) @ table (`cdgt_keras.columns.combine`).

    A gather of [B, L, K] slots costs a transposed copy of the batch's scores and, backward, a segment sum over
    them; at 18.6k labels it was the largest part of a training step. The product touches each weight once.

        >>> layout = PlayerLayout.from_frequencies(np.linspace(0.5, 0.05, 8), 2, overlap=0.5)
        >>> table = slot_table(layout, fusion_weights(layout, "mean"))
        >>> table.sparse.dense_shape.numpy().tolist(), tf.sparse.to_dense(table.sparse).numpy()[:, 3].tolist()
        ([10, 8], [0.0, 0.0, 0.0, 0.5, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0])
    """
    labels, slots = np.nonzero(layout.slot_mask)
    rows = layout.slot_index[labels, slots]
    return ColumnTable(rows, labels, weights[labels, slots], layout.flat_size, layout.num_labels)


def flatten_players(player_probs: list[tf.Tensor]) -> tf.Tensor:
    """Concatenate player blocks [B, |L_i|] into the flat row [B, sum |L_i| + 1] (last column = padding 0)."""
    pad = tf.zeros_like(player_probs[0][:, :1])
    return tf.concat([*player_probs, pad], axis=1)


class Fusion(keras.layers.Layer):
    """Fuse player probabilities into p_hat [B, L] with mean, core, max or attention weights.

    Attention: w_{i,l}(x) = softmax over covering players of u_i(x) . v_l, with u_i(x) = W_i e_i(x) a
    player-context vector and v_l a learned label embedding: O(N * L * attention_dim) per example.
    """

    def __init__(self, layout: PlayerLayout, mode: str = "mean", core_weight: float = 0.75,
                 attention_dim: int = 32, **kwargs):
        super().__init__(**kwargs)
        self.layout, self.mode = layout, mode
        self.slot_index = tf.constant(layout.slot_index)
        self.slot_mask = tf.constant(layout.slot_mask)
        if mode in ("mean", "core"):
            self.weights_table = tf.constant(fusion_weights(layout, mode, core_weight))
            self.table = slot_table(layout, fusion_weights(layout, mode, core_weight))
        if mode == "attention":
            self.context = [keras.layers.Dense(attention_dim, use_bias=False, name=f"context_{i}")
                            for i in range(layout.n_players)]
            self.label_embedding = self.add_weight(
                shape=(layout.num_labels, attention_dim), initializer="random_normal", name="label_embedding")
            # flat index of (player, label) in the [N * L] score row; padding slots point at player 0
            self.score_index = tf.constant(
                np.maximum(layout.slot_player, 0) * layout.num_labels + np.arange(layout.num_labels)[:, None],
                dtype=tf.int32)

    def build(self, player_probs_shape=None, contexts_shape=None):
        """Build the attention context projections on the shapes of what each player reads."""
        if self.mode == "attention" and contexts_shape is not None:
            for layer, shape in zip(self.context, contexts_shape):
                if not layer.built:
                    layer.build(shape)
        self.built = True

    def call(self, player_probs: list[tf.Tensor], contexts: list[tf.Tensor] | None = None,
             kernel: bool = False) -> tf.Tensor:
        """p_hat [B, L]; `kernel`: static weights through cdgt's kernel (training, and prediction in process; a
        SavedModel keeps TensorFlow's ops, which give the same bits: cdgt_keras.kernels.portable_graphs)."""
        if self.mode in ("mean", "core"):  # static weights: one sparse product (slot_table)
            return combine(tf.concat(player_probs, axis=1), self.table, fused=kernel)
        slots = tf.gather(flatten_players(player_probs), self.slot_index, axis=1)  # [B, L, K]
        if self.mode == "max":
            return tf.reduce_max(slots * self.slot_mask, axis=-1)
        return tf.reduce_sum(slots * self.attention_weights(contexts), axis=-1)

    def attention_weights(self, contexts: list[tf.Tensor]) -> tf.Tensor:
        """Softmax weights [B, L, K] over the players covering each label."""
        if contexts is None:
            raise ValueError("attention fusion needs the players' context features")
        u = tf.stack([layer(c) for layer, c in zip(self.context, contexts)], axis=1)  # [B, N, d]
        scores = tf.einsum("bnd,ld->bnl", u, self.label_embedding)
        scores = tf.reshape(scores, [-1, self.layout.n_players * self.layout.num_labels])
        slot_scores = tf.gather(scores, self.score_index, axis=1)  # [B, L, K]
        slot_scores = tf.where(self.slot_mask > 0, slot_scores, tf.fill(tf.shape(slot_scores), -1e9))
        return tf.nn.softmax(slot_scores, axis=-1) * self.slot_mask
