"""The label shortlist: at prediction, the network is read at the labels the memories rank highest, not at all L.

A trained model with memories answers, per label l, p_l = a_l * p_hat_l + m_l (the blend of `CDGTModel.call`
unrolled): p_hat the players' fused answer, m the memories' part (every memory layer's scores, each weighted by its
tuned weight and by the ones blended after it), a_l = prod (1 - w) the network's share. With the tuned weights of a
large catalogue the network's share is small (deps-all: a = 0.1 * 0.8 * ... for the neighbours' weight 0.9), so m
already orders the labels, and the network need only be read where m is high. With `shortlist` = C, each row reads
p_hat at the C labels of its largest m (ties: the lower id) and every other label scores m alone: a label off the
shortlist is off by at most a_l * p_hat_l <= a_l.

The answer is defined row by row, and computed by one of two roads that give it alike (to float rounding; a test
holds them together):
- "whole": the players over all labels, as without a shortlist, then p_hat kept at each row's shortlist;
- "rows": only the shortlist's rows of the players' output layers, from a transposed copy of them (`ServedRows`,
  made for serving by `CDGTModel.prepare_serving`: a [512, L] kernel's columns are scattered, its transpose's rows are
  not). A one-row query then reads C * K rows of the output layers (K: players covering a label) instead of all of
  them: at 41k labels, about 2 MB instead of 96 MB.
The "rows" road is taken where the batch's shortlists hold fewer rows than a quarter of the output layers
(`ROWS_FRACTION`), and only for models it applies to (`rows_apply`: a shared encoder, linear heads, `mean` or
`core` fusion, no wide part); evaluation's large batches take the "whole" road.

Example (a label's share of the network, and the memories' part, from two layers' weights and scores):
    >>> import numpy as np
    >>> share, part = combine_memories([np.array([0.5, 0.5]), np.array([0.2, 0.0])],
    ...                                [tf.constant([[0.4, 0.0]]), tf.constant([[1.0, 1.0]])])
    >>> [np.round(t.numpy().astype(float), 6).tolist() for t in (share, part)]  # (1 - .5)(1 - .2), .8 * .5 * .4 + .2
    [[0.4, 0.5], [[0.36, 0.0]]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

# the "rows" road is taken when the batch's shortlists hold at most this fraction of the output layers' rows
ROWS_FRACTION = 0.25


def combine_memories(shares: Sequence[Any], scores: Sequence[Any]) -> tuple[tf.Tensor, tf.Tensor]:
    """The network's share a [L] and the memories' part m [B, L] of the blend p = a * p_hat + m, from each memory
    layer's share [L] (its weight per label) and scores [B, L], in the order the answer blends them."""
    a = tf.ones_like(tf.convert_to_tensor(shares[0], tf.float32))
    m = tf.zeros_like(scores[0])
    for share, score in zip(shares, scores):
        share = tf.convert_to_tensor(share, tf.float32)
        m = (1.0 - share) * m + share * score
        a = (1.0 - share) * a
    return a, m


def candidates(memory_part: tf.Tensor, size: int) -> tf.Tensor:
    """Each row's shortlist [B, C]: the ids of its `size` largest memory scores (ties: the lower id)."""
    return tf.math.top_k(memory_part, k=size).indices


def kept(memory_part: tf.Tensor, share: tf.Tensor, network: tf.Tensor, ids: tf.Tensor) -> tf.Tensor:
    """The answer [B, L]: m everywhere, plus a * p_hat at each row's shortlist `ids` [B, C] (`network` [B, C], p_hat
    there)."""
    batch = tf.shape(ids)[0]
    rows = tf.repeat(tf.range(batch), tf.shape(ids)[1])
    at = tf.stack([rows, tf.reshape(ids, [-1])], axis=1)
    return tf.tensor_scatter_nd_add(memory_part, at, tf.reshape(tf.gather(share, ids) * network, [-1]))


def rows_apply(config: Any, wide: Sequence[Any]) -> bool:
    """Whether the "rows" road can compute this model's p_hat: one shared encoder, heads without hidden layers,
    static fusion weights (`mean`, `core`) and no wide part."""
    return bool(config.shared_encoder and config.encoder_hidden and not config.head_hidden
                and config.fusion in ("mean", "core") and all(part is None for part in wide))


class ServedRows(tf.Module):
    """The players' output layers transposed and stacked in the fusion's flat order: `kernel` [sum |L_i| + 1, d]
    and `bias` [sum |L_i| + 1] (the last row: the padding slot's zeros), with the fusion's `slots` [L, K] (flat
    positions) and `weights` [L, K]. A copy made from the trained heads (`of`), for serving; not trained."""

    def __init__(self, kernel: np.ndarray, bias: np.ndarray, slots: np.ndarray, weights: np.ndarray):
        super().__init__(name="served_rows")
        self.kernel = tf.Variable(kernel, trainable=False, name="kernel")
        self.bias = tf.Variable(bias, trainable=False, name="bias")
        self.slots = tf.constant(slots)
        self.weights = tf.constant(weights)

    @classmethod
    def of(cls, heads: Sequence[Any], slots: np.ndarray, weights: np.ndarray) -> ServedRows:
        """The copy of these heads' output layers (each an MLP with its output layer last)."""
        layers = [head.blocks[-1] for head in heads]
        width = int(layers[0].kernel.shape[0])
        kernel = np.concatenate([np.asarray(layer.kernel).T for layer in layers] + [np.zeros((1, width))], axis=0)
        bias = np.concatenate([np.asarray(layer.bias) for layer in layers] + [np.zeros(1)])
        return cls(kernel.astype(np.float32), bias.astype(np.float32), slots, weights)

    def fused(self, context: tf.Tensor, ids: tf.Tensor) -> tf.Tensor:
        """p_hat [B, C] at the labels `ids` [B, C] from the shared encoder's output `context` [B, d]."""
        slots = tf.gather(self.slots, ids)  # [B, C, K]
        logits = tf.einsum("bd,bckd->bck", context, tf.gather(self.kernel, slots)) + tf.gather(self.bias, slots)
        return tf.reduce_sum(tf.gather(self.weights, ids) * tf.sigmoid(logits), axis=-1)
