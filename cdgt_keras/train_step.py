"""The two learning schedules of SPEC §6, as functions of a CDGTModel and one batch.

`cyclic_step` is the paper's Algorithm 1 (Gauss-Seidel best response): the encoder runs once, then each
player in turn takes its gradient with the players before it already updated in this batch, and applies
it with its own optimizer; finally the shared encoder takes its step on the potential Phi.
`simultaneous_step` (Jacobi) takes one forward pass: each player's gradient is grad_theta_i J_i with the
other players held fixed by stop-gradients, the encoder's is grad Phi, all at the same parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import keras
import tensorflow as tf

if TYPE_CHECKING:
    from cdgt_keras.model import CDGTModel


def unpack(data: Any, num_labels: int) -> tuple[Any, tf.Tensor]:
    """(x, y) from a Keras batch; y becomes a dense float32 multi-hot [B, L] (it may arrive sparse)."""
    x, y, _ = keras.utils.unpack_x_y_sample_weight(data)
    if y is None:
        raise ValueError("CDGTModel trains on (features, labels) batches; got no labels")
    if isinstance(y, tf.SparseTensor):
        y = tf.sparse.to_dense(y)
    y = tf.cast(y, tf.float32)
    y.shape.assert_is_compatible_with([None, num_labels])
    return x, y


def sparse_labels(data: Any) -> tf.SparseTensor | None:
    """The batch's labels as given when they are a tf.SparseTensor (what a player's turn reads its own labels
    from, `cdgt_keras.turns.own_labels`), else None."""
    y = keras.utils.unpack_x_y_sample_weight(data)[1]
    return y if isinstance(y, tf.SparseTensor) else None


def batch_size(y: tf.Tensor) -> tf.Tensor:
    return tf.cast(tf.shape(y)[0], tf.float32)


def multi_worker() -> bool:
    """True under a MultiWorkerMirroredStrategy that spans several workers."""
    extended = tf.distribute.get_strategy().extended
    return bool(getattr(extended, "_in_multi_worker_mode", lambda: False)())


def _replica_scale() -> float:
    """Gradients are summed over replicas by the optimizers, so each replica's objective is divided by
    their number (STACK.md item 3); logged values stay unscaled."""
    return 1.0 / tf.distribute.get_strategy().num_replicas_in_sync


def reuses_first_forward(model: CDGTModel) -> bool:
    """Whether a player's turn can read its probabilities from the batch's first forward pass: when the players
    share the encoder and their heads draw no dropout, player i's head at its turn (its parameters untouched since
    the batch began, the context fixed) computes exactly what it computed then."""
    cfg = model.cdgt_config
    return not model.player_encoders and (not cfg.head_hidden or cfg.dropout == 0)


def cyclic_step(model: CDGTModel, x: Any, y: tf.Tensor, sparse_y: tf.SparseTensor | None = None) -> dict[str, Any]:
    """One batch of cyclic best response; returns the game terms at the start of the batch (as Keras logs
    the loss before its update).

    The shared encoder runs once and its gradient on Phi is taken at the batch's starting parameters (so
    N=1, alpha=0 is exactly plain BCE training); it is applied after the players' sweep. Each player's heads run
    twice a batch: in the first forward pass (whose tape, kept, gives the player its gradient at its turn when
    `reuses_first_forward`; else the player runs its head again at its turn) and once more after its update for
    the players after it (2N - 1 passes of the heads, not 3N - 1: the same numbers, tested bit for bit). The first
    player's objective is read from the first pass too (N - 1 evaluations of the game's objective after it, not N).
    Where `model.turns` apply (cdgt_keras.turns), each turn fuses and scores its player's own labels only, reading
    them from the sparse labels `sparse_y` when given, and a player's re-run after its update computes only the
    columns the players after it read: the same gradients to the bit from about a third of the columns.
    """
    scale, beta, n = _replica_scale(), model.beta_now(), model.cdgt_config.n_players
    shared, reuse = model.shared_variables(), reuses_first_forward(model)
    with tf.GradientTape(persistent=reuse) as first:
        contexts = model.contexts(x, training=True)  # the encoder runs once
        deep = [model.deep_logits(i, c, training=True) for i, c in enumerate(contexts)]
        first_probs = [model.player_probs(i, c, x, True, deep[i]) for i, c in enumerate(contexts)]
        terms = model.game(y, first_probs, contexts, beta)
        shared_loss = -terms.potential * scale
    shared_grads = first.gradient(shared_loss, shared) if shared else []
    fixed_ctx = [tf.stop_gradient(c) for c in contexts]
    probs = [tf.stop_gradient(p) for p in first_probs]

    def own_context(i: int) -> tf.Tensor:
        """What player i reads: the fixed e(x), or x through its own (just updated) encoder."""
        return model.player_encoders[i](x, training=True) if model.player_encoders else fixed_ctx[i]

    for i in range(n):
        tape = first if reuse else tf.GradientTape()
        with tape:
            if reuse and i == 0 and model.turns is None:  # nothing has moved since the first pass: J_1 is its own
                objective, logits = terms.objective[0], deep[i]  # logits: player i's deep head, as it played
            else:
                ctx = list(fixed_ctx)
                live = list(probs)
                if reuse:
                    live[i], logits = first_probs[i], deep[i]
                else:
                    ctx[i] = own_context(i)
                    logits = model.deep_logits(i, ctx[i], training=True)
                    live[i] = model.player_probs(i, ctx[i], x, True, logits)
                own_y = y if sparse_y is None or model.turns is None else sparse_y
                objective = model.turn_objective(i, own_y, live, ctx, beta, reran=True)
            loss = (model.wide_loss(i, x, y, logits) - objective) * scale
        variables = model.player_variables(i)
        model.player_optimizers[i].apply_gradients(zip(tape.gradient(loss, variables), variables))
        if i < n - 1:  # later players see player i's new parameters (where they read it: `rerun_probs`)
            probs[i] = tf.stop_gradient(model.rerun_probs(i, own_context(i), x))
    del first
    if shared:
        model.optimizer.apply_gradients(zip(shared_grads, shared))
    return terms


def simultaneous_gradients(model: CDGTModel, x: Any, y: tf.Tensor) -> tuple[list[list], list, dict[str, Any]]:
    """One forward pass: per-player gradients of -J_i (others held fixed by stop-gradients), the shared
    variables' gradient of -Phi, and the game terms. Both backward passes read the same forward."""
    scale, beta, n = _replica_scale(), model.beta_now(), model.cdgt_config.n_players
    with tf.GradientTape(persistent=True) as tape:
        contexts = model.contexts(x, training=True)
        deep = [model.deep_logits(i, c, training=True) for i, c in enumerate(contexts)]
        probs = [model.player_probs(i, c, x, True, deep[i]) for i, c in enumerate(contexts)]
        players_loss = tf.add_n([model.wide_loss(i, x, y, deep[i])
                                 - model.turn_objective(i, y, probs, contexts, beta) for i in range(n)]) * scale
        terms = model.game(y, probs, contexts, beta)
        shared_loss = -terms.potential * scale
    groups = [model.player_variables(i) for i in range(n)]
    flat = tape.gradient(players_loss, [v for group in groups for v in group])
    player_grads, start = [], 0
    for group in groups:
        player_grads.append(flat[start:start + len(group)])
        start += len(group)
    shared = model.shared_variables()
    shared_grads = tape.gradient(shared_loss, shared) if shared else []
    del tape
    return player_grads, shared_grads, terms


def simultaneous_step(model: CDGTModel, x: Any, y: tf.Tensor) -> dict[str, Any]:
    """Jacobi step: player i applies grad_theta_i J_i, the shared encoder grad Phi, all at the same parameters."""
    player_grads, shared_grads, terms = simultaneous_gradients(model, x, y)
    for i, grads in enumerate(player_grads):
        model.player_optimizers[i].apply_gradients(zip(grads, model.player_variables(i)))
    if shared_grads:
        model.optimizer.apply_gradients(zip(shared_grads, model.shared_variables()))
    return terms


def player_gradients(model: CDGTModel, x: Any, y: tf.Tensor, training: bool = False) -> list[list[tf.Tensor]]:
    """grad_theta_i J_i for every player at the current parameters, one tape each (the reference the
    simultaneous schedule is tested against)."""
    beta, out = model.beta_now(), []
    for i in range(model.cdgt_config.n_players):
        with tf.GradientTape() as tape:
            contexts = model.contexts(x, training=training)
            deep = [model.deep_logits(j, c, training=training) for j, c in enumerate(contexts)]
            probs = [model.player_probs(j, c, x, training, deep[j]) for j, c in enumerate(contexts)]
            value = model.player_objective(i, y, probs, contexts, beta) - model.wide_loss(i, x, y, deep[i])
        out.append(tape.gradient(value, model.player_variables(i)))
    return out


class BetaAnnealing(keras.callbacks.Callback):
    """Sets the model's beta-annealing horizon to the number of training steps of this fit."""

    def on_train_begin(self, logs: dict | None = None) -> None:
        steps, epochs = self.params.get("steps"), self.params.get("epochs")
        if not steps:
            raise ValueError("beta_schedule='anneal' needs a dataset of known length: pass steps_per_epoch")
        done = float(self.model.player_optimizers[0].iterations.numpy())
        self.model.beta_anneal_steps.assign(done + float(steps) * float(epochs))
