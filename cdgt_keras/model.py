"""CDGTModel: N player heads on a shared encoder, fused into one prediction, trained as a game (SPEC §3-6).

Example:
    >>> import numpy as np
    >>> x, y = np.random.default_rng(0).random((64, 8), np.float32), np.eye(64, 5, dtype=np.float32)
    >>> model = CDGTModel(CDGTConfig(n_players=3, encoder_hidden=(16,)), label_freq=y.mean(0) + 0.01)
    >>> model.compile(optimizer=LazyAdam(1e-3))                 # the shared encoder's optimizer
    >>> history = model.fit(x, y, epochs=2, verbose=0)          # players use their own optimizers
    >>> model.predict(x, verbose=0).shape                       # fused p_hat [n, L]
    (64, 5)
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import tensorflow as tf

from cdgt_keras import centroids as ct
from cdgt_keras import neighbours as nb  # the module: importable first without a cycle (registration.py)
from cdgt_keras import objectives as obj
from cdgt_keras import shortlist as sl
from cdgt_keras import train_step as steps
from cdgt_keras.config import CDGTConfig
from cdgt_keras.encoders import MLP
from cdgt_keras.fusion import Fusion, fusion_weights
from cdgt_keras.game import Game, GameTerms
from cdgt_keras.kernels import in_portable_graphs
from cdgt_keras.labels import head_tail_split
from cdgt_keras.layout import PlayerLayout
from cdgt_keras.metrics import propensities
from cdgt_keras.reranking import rerank_log_weights, reranked
from cdgt_keras.sparse import LazyAdam, SparseDense, leading_block
from cdgt_keras.turns import build_turns, turn_objective, turns_apply


@keras.saving.register_keras_serializable(package="cdgt")
class CDGTModel(keras.Model):
    """The CD-GTMLL model. Input: dense features, a tf.SparseTensor (bag-of-words), or encoded features
    (set `encoder_hidden=()`). Output: fused probabilities [B, L]; `call(x, return_players=True)` also
    returns each player's probabilities over its own labels."""

    def __init__(self, config: CDGTConfig | dict[str, Any], label_freq: Any,
                 memory: nb.MemoryShape | dict[str, int] | None = None, num_train: int = 0, wide_columns: int = 0,
                 dense_columns: int = 0, **kwargs: Any):
        super().__init__(**kwargs)
        cfg = config if isinstance(config, CDGTConfig) else CDGTConfig.from_dict(config)
        self.cdgt_config = cfg
        self.label_freq = np.asarray(label_freq, dtype=np.float64)
        self.num_train = int(num_train)  # the training rows behind label_freq (the `propensity` rarity needs them)
        self.wide_columns = int(wide_columns)  # the leading input columns the wide parts read (0: every one)
        # The leading input columns every row fills (the text embedding's): the encoder's first layer multiplies
        # them as a dense block (SparseDense's `dense_columns`; 0: all on the sparse road). The same sum in
        # another order: a speed choice, not a model one.
        self.dense_columns = int(dense_columns)
        self.layout = PlayerLayout.from_frequencies(self.label_freq, cfg.n_players, cfg.overlap)
        self.num_labels = self.layout.num_labels
        act, drop = cfg.activation, cfg.dropout
        n = cfg.n_players
        inputs = cfg.input_dropout if cfg.encoder_hidden else 0.0
        dense = self.dense_columns
        self.shared_encoder = MLP(cfg.encoder_hidden, activation=act, dropout=drop, input_dropout=inputs,
                                  dense_columns=dense, name="encoder") if cfg.shared_encoder else None
        self.player_encoders = [] if cfg.shared_encoder else [
            MLP(cfg.encoder_hidden, activation=act, dropout=drop, input_dropout=inputs, dense_columns=dense,
                name=f"player{i + 1}_encoder") for i in range(n)]
        odds = _prior_odds(self.label_freq)
        bias = odds if cfg.prior_bias else np.zeros(self.label_freq.size, np.float32)
        self.heads = [MLP(cfg.head_hidden, activation=act, dropout=drop, output_units=int(labels.size),
                          output_bias=bias[labels], training_precision=cfg.head_precision, name=f"player{i + 1}_head")
                      for i, labels in enumerate(self.layout.player_labels)]
        own = cfg.wide_payoff == "own"  # a bias of its own; "residual" adds to the deep head's, which has one
        self.wide = [SparseDense(int(labels.size), use_bias=own, kernel_initializer="zeros",
                                 bias_initializer=keras.initializers.Constant(odds[labels]),
                                 name=f"player{i + 1}_wide") if _is_wide(cfg, i) else None
                     for i, labels in enumerate(self.layout.player_labels)]
        # The wide part's logits are scale * (x @ V): under Adam, whose step ignores a gradient's scale, V moving
        # by the player's step moves the map by scale times it, i.e. the wide part learns at `wide_learning_rate`.
        self.wide_scale = [cfg.wide_learning_rate / cfg.player_learning_rate(i) if cfg.wide_learning_rate else 1.0
                           for i in range(cfg.n_players)]
        self.fusion = Fusion(self.layout, cfg.fusion, cfg.core_weight, cfg.attention_dim, name="fusion")
        # Neighbour votes need the training split's shape (`memory`); a model built without it has none.
        if memory is not None and not isinstance(memory, nb.MemoryShape):
            memory = nb.MemoryShape(**memory)
        self.memory = memory  # what get_config saves: the training split's shape in the input's space
        decides = cfg.tail_decisions == "own"  # the memories hold the tail decisions' own weights
        # Label centroids live in the input's space, whatever the votes' space.
        self.centroids = None if not cfg.centroid_features or memory is None else ct.LabelCentroids(
            memory.num_features, self.num_labels, memory.centroid_nnz, decides=decides, name="centroids")
        # Label texts (cdgt_keras.label_text): the labels' names in the input's space, held as centroids are.
        self.label_text = None if not cfg.label_text or memory is None or not memory.label_text_nnz else \
            ct.LabelCentroids(memory.num_features, self.num_labels, memory.label_text_nnz, decides=decides,
                              name="label_text")
        votes = cfg.neighbours and memory is not None
        encoded = memory.in_space(cfg.encoder_hidden[-1], cfg.encoder_memory_dims, cfg.encoder_memory_rerank) \
            if votes and not memory.dense else memory
        # The votes in `neighbour_space` ("both": in the input's space here, the encoder's in encoder_neighbours)
        self.neighbours = nb.NeighbourVotes(encoded if cfg.neighbour_space == "encoder" else memory,
                                            self.num_labels, cfg.neighbours, decides=decides, name="neighbours") \
            if votes else None
        self.encoder_neighbours = nb.NeighbourVotes(encoded, self.num_labels, cfg.neighbours, decides=decides,
                                                    name="encoder_neighbours") \
            if votes and cfg.neighbour_space == "both" else None
        # The tail labels (the report's Rare-F1 labels), which may take memory weights of their own (`tail_memory`)
        tail = head_tail_split(self.label_freq, cfg.head_fraction, cfg.tail_fraction)[1]
        self.tail_mask = tf.constant(np.isin(np.arange(self.num_labels), tail))
        # Per player, 1 where its wide part scores the label, 0 on the tail labels (`wide_tail=False`; None: all 1)
        self.wide_mask = [None if cfg.wide_tail else tf.constant(~np.isin(labels, tail), tf.float32)
                          for labels in self.layout.player_labels]
        epsilon = cfg.optimizer_epsilon(self.num_labels)
        self.player_optimizers = [_player_optimizer(cfg, i, epsilon) for i in range(n)]
        self.beta_anneal_steps = keras.Variable(0.0, trainable=False, name="beta_anneal_steps")
        self.served_rows: sl.ServedRows | None = None  # the heads' copy for the shortlist's "rows" road
        # The propensity re-ranking's exponent (config rerank_slack): 0 until `settle` tunes it, so training, its
        # validation ranking and the memories' tuning read the plain answer
        self.rerank_exponent = keras.Variable(0.0, trainable=False, name="rerank_exponent") \
            if cfg.rerank_slack > 0 else None
        self._tables(cfg)
        self._trackers(n)

    # ------------------------------------------------------------------------------------------ structure
    def _tables(self, cfg: CDGTConfig) -> None:
        """The game (its constant tables) and the logit adjustment's per-player shifts."""
        self.rules = Game(cfg, self.layout, self.label_freq, self.num_train)
        # A player's turn fuses and scores its own labels only where that gives J_i's gradient (cdgt_keras.turns)
        self.turns = build_turns(self.layout, fusion_weights(self.layout, cfg.fusion, cfg.core_weight),
                                 self.rules.payoff_tables.rarity_w, self.rules.payoff_tables.focal_gamma) \
            if turns_apply(cfg.fusion, self.rules.fused_payoff, self.rules.disagreement_idle) else None
        prior = obj.log_prior(self.label_freq, cfg.logit_adjustment_prior, self.num_train, cfg.psp_a, cfg.psp_b) \
            if cfg.logit_adjustment > 0 else np.zeros(self.num_labels)
        self.logit_shift = [tf.constant((cfg.logit_adjustment * prior[p]).astype(np.float32))
                            for p in self.layout.player_labels]
        if cfg.rerank_slack > 0 and self.num_train < 1:
            raise ValueError("rerank_slack > 0 needs the number of training rows (num_train) for the propensities")
        self.rerank_log_weights = tf.constant(rerank_log_weights(propensities(
            self.label_freq * self.num_train, self.num_train, cfg.psp_a, cfg.psp_b)).astype(np.float32)) \
            if cfg.rerank_slack > 0 else None

    def _trackers(self, n: int) -> None:
        names = ["loss", "payoff", "potential", "kl_head", "kl_tail"]
        for i in range(n):
            names += [f"player{i + 1}_{part}" for part in ("loss", "curiosity", "rarity", "disagreement")]
        self.trackers = {name: keras.metrics.Mean(name=name) for name in names}

    @property
    def metrics(self) -> list[keras.metrics.Metric]:
        return list(self.trackers.values())

    def build(self, input_shape: Any) -> None:
        """Build every layer and every player's optimizer on exactly the variables it updates."""
        if self.shared_encoder is not None:
            self.shared_encoder.build(input_shape)
            context_shape = self.shared_encoder.compute_output_shape(input_shape)
            contexts = [context_shape] * self.cdgt_config.n_players
        else:
            contexts = []
            for encoder in self.player_encoders:
                encoder.build(input_shape)
                contexts.append(encoder.compute_output_shape(input_shape))
        for head, shape in zip(self.heads, contexts):
            head.build(shape)
        wide_shape = (input_shape[0], self.wide_columns) if self.wide_columns else input_shape
        for wide in self.wide:
            if wide is not None:
                wide.build(wide_shape)
        self.fusion.build(contexts_shape=contexts)
        for i, optimizer in enumerate(self.player_optimizers):
            if not optimizer.built:
                optimizer.build(self.player_variables(i))
        self.built = True
        self._build_shared_optimizer()

    def _build_shared_optimizer(self) -> None:
        """The compiled optimizer updates only the shared variables (STACK.md item 2)."""
        if getattr(self, "optimizer", None) is not None and not self.optimizer.built:
            self.optimizer.build(self.shared_variables())

    def compile_from_config(self, config: dict[str, Any]) -> None:
        """Re-compile on load and build the optimizer on the shared variables before its state loads."""
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self._build_shared_optimizer()

    def player_variables(self, i: int) -> list[keras.Variable]:
        """theta_i: player i's head (and wide part), plus its own encoder when encoders are not shared."""
        own = self.player_encoders[i].trainable_variables if self.player_encoders else []
        wide = self.wide[i].trainable_variables if self.wide[i] is not None else []
        return own + self.heads[i].trainable_variables + wide

    def shared_variables(self) -> list[keras.Variable]:
        """What ascends the potential Phi: the shared encoder and the attention-fusion parameters."""
        encoder = self.shared_encoder.trainable_variables if self.shared_encoder is not None else []
        return encoder + self.fusion.trainable_variables

    # ------------------------------------------------------------------------------------------ forward
    def contexts(self, x: Any, training: bool = False) -> list[tf.Tensor]:
        """The features each player reads: e(x) shared, or each player's own e_i(x)."""
        if self.shared_encoder is not None:
            return [self.shared_encoder(x, training=training)] * self.cdgt_config.n_players
        return [encoder(x, training=training) for encoder in self.player_encoders]

    def deep_logits(self, i: int, context: tf.Tensor, training: bool = False) -> tf.Tensor:
        """Player i's deep head on `context` [B, |L_i|]; in training shifted by the logit adjustment tau *
        log(prior) (0 unless `logit_adjustment`; the prior: `logit_adjustment_prior`). What `player_probs` and
        the residual `wide_loss` read."""
        return self._adjusted(i, self.heads[i](context, training=training), training)

    def player_probs(self, i: int, context: tf.Tensor, x: Any = None, training: bool = False,
                     logits: tf.Tensor | None = None) -> tf.Tensor:
        """pi_i = sigmoid(head_i(context) [+ wide_i(x)]) over player i's labels [B, |L_i|]; with
        `wide_payoff="own"`, the deep head's probability in training (the game's) and the weighted mean of the
        deep and the wide probabilities otherwise (what the player answers); with `"residual"`, the deep head's
        probability in training and sigmoid(deep + wide) otherwise. `logits`: `deep_logits(i, context,
        training)` when already at hand (the training step passes them on to the residual `wide_loss`).

        In training the logits carry the logit adjustment tau * log(prior) (0 unless `logit_adjustment`)."""
        logits = self.deep_logits(i, context, training) if logits is None else logits
        if self.wide[i] is None or (self.cdgt_config.wide_payoff != "joint" and training):
            return tf.sigmoid(logits)
        if self.cdgt_config.wide_payoff != "own":
            return tf.sigmoid(logits + self._wide_logits(i, x, masked=True))
        mask = self.wide_mask[i]
        weight = self.cdgt_config.wide_weight * (1.0 if mask is None else mask)
        return (1.0 - weight) * tf.sigmoid(logits) + weight * tf.sigmoid(self._wide_logits(i, x))

    def fused_probs(self, x: Any, contexts: list[tf.Tensor] | None = None) -> tf.Tensor:
        """p_hat [B, L], the players' fused answer to `x` without the memories: the model's answer while every
        memory's weight is 0, as in training. What the validation ranking reads each epoch and `settle` blends the
        memories into, traced without the memory layers. `contexts`: the players' features of `x`, when at hand."""
        contexts = self.contexts(x) if contexts is None else contexts
        return self.fusion([self.player_probs(i, c, x) for i, c in enumerate(contexts)], contexts,
                           kernel=not in_portable_graphs())

    def _adjusted(self, i: int, logits: tf.Tensor, training: bool) -> tf.Tensor:
        """Training logits shifted by the logit adjustment (served logits are not)."""
        if training and self.cdgt_config.logit_adjustment > 0:
            return logits + self.logit_shift[i]
        return logits

    def _wide_logits(self, i: int, x: Any, masked: bool = False) -> tf.Tensor:
        """Player i's wide logits [B, |L_i|]; `masked`: 0 on the labels the wide part is kept off
        (`wide_tail=False`), as they enter a sum with the deep logits."""
        if x is None:
            raise ValueError(f"player {i + 1} is wide: player_probs needs the model input x")
        logits = self.wide_scale[i] * self.wide[i](self.wide_input(x))
        mask = self.wide_mask[i]
        return logits if not masked or mask is None else logits * mask

    def wide_input(self, x: Any) -> Any:
        """x as the wide parts read it: whole, or its first `wide_columns` columns (`wide_input="embedding"`: the
        text embedding's, which come before the TF-IDF's and fill every row), dense."""
        n = self.wide_columns
        if not n:
            return x
        if isinstance(x, tf.SparseTensor):
            return leading_block(x, n)
        return x[:, :n]

    def wide_loss(self, i: int, x: Any, y: tf.Tensor, deep_logits: tf.Tensor | None = None) -> tf.Tensor:
        """The BCE of player i's wide part on its own labels (`wide_payoff="own"`), or of the deep head's training
        logits (`deep_logits`: `deep_logits(i, context, training=True)` of the step's forward pass; held fixed)
        plus the wide part's (`"residual"`); 0 under `"joint"`: what the wide part minimises beside the player's
        J_i (the two share no variable, so each part follows its own objective)."""
        payoff = self.cdgt_config.wide_payoff
        if self.wide[i] is None or payoff == "joint":
            return tf.constant(0.0)
        if payoff == "residual":
            if deep_logits is None:
                raise ValueError(f"player {i + 1}'s wide part is residual: wide_loss needs the deep head's logits")
            probs = tf.sigmoid(tf.stop_gradient(deep_logits) + self._wide_logits(i, x, masked=True))
        else:
            probs = tf.sigmoid(self._adjusted(i, self._wide_logits(i, x), True))
        own_y = tf.gather(y, self.rules.player_label_ids[i], axis=1)
        return tf.reduce_mean(obj.binary_cross_entropy(own_y, probs))

    def call(self, inputs: Any, training: bool = False, return_players: bool = False,
             deciding: bool | str = False) -> Any:
        """The answer [B, L] (with `return_players`, {"fused": it, "players": each player's}); `deciding`: the
        scores the decisions are read from, the tail labels' memories at their `decision_weight` where that is set
        (config.tail_decisions="own"; `decides_apart`); `deciding="both"`: the pair (answer, decisions' scores)
        from one pass of the network and of each memory layer (`answers`)."""
        both = deciding == "both"
        contexts = self.contexts(inputs, training)
        if not training and not return_players and self.shortlisted():
            if both:  # the shortlist itself follows the memories' shares: one network pass per answer
                ranking = self._shortlisted(inputs, contexts)
                return self._ranked(ranking), \
                    self._shortlisted(inputs, contexts, True) if self._decision_weights() else ranking
            answer = self._shortlisted(inputs, contexts, bool(deciding))
            return answer if deciding else self._ranked(answer)
        probs = [self.player_probs(i, c, inputs, training) for i, c in enumerate(contexts)]
        fused = self.fusion(probs, contexts, kernel=training or not in_portable_graphs())  # the same bits
        decided, pair = fused, both and self._decision_weights()
        if not training:
            for layer, space in self.memory_layers():
                query = contexts[0] if space == "encoder" else inputs
                if pair:
                    fused, decided = _blended_pair(fused, decided, layer, query, self.tail_mask)
                else:
                    fused = _blended(fused, layer, query, self.tail_mask, deciding is True)
        if both:
            return (fused if training else self._ranked(fused)), decided if pair else fused
        if return_players:
            return {"fused": fused, "players": probs}
        return fused if training or deciding else self._ranked(fused)

    def answers(self, inputs: Any) -> tuple[tf.Tensor, tf.Tensor]:
        """(the answer that ranks, the scores the decisions are read from), [B, L] each, from one pass: the
        network and each memory layer run once, blended at the ranking's and at the decisions' shares. The same
        tensor twice when no memory layer holds a `decision_weight` (config.tail_decisions="ranking") and the
        ranking is not re-ranked by propensity (config rerank_slack: the first re-ranked, the second plain)."""
        return self(inputs, training=False, deciding="both")

    def _ranked(self, scores: tf.Tensor) -> tf.Tensor:
        """The ranking's answer: `scores` re-ranked by propensity (cdgt_keras.reranking) when config rerank_slack is
        set, at the exponent `settle` tuned (0 before: the scores themselves); the decisions never read it."""
        if self.rerank_exponent is None:
            return scores
        return reranked(scores, self.rerank_log_weights, self.rerank_exponent)

    def reranks(self) -> bool:
        """Whether the ranking is re-ranked by propensity: config rerank_slack set and a tuned exponent > 0."""
        return self.rerank_exponent is not None and float(self.rerank_exponent.numpy()) > 0.0

    def _decision_weights(self) -> bool:
        """Whether some memory layer holds a `decision_weight` (tail_decisions="own"; -1 where it is unset)."""
        return any(layer.decision_weight is not None for layer, _ in self.memory_layers())

    def shortlisted(self) -> bool:
        """Whether predictions read the network at a shortlist of labels (cdgt_keras.shortlist): `shortlist` set
        below the number of labels, and memories to rank the labels by."""
        return 0 < self.cdgt_config.shortlist < self.num_labels and bool(self.memory_layers())

    def decides_apart(self) -> bool:
        """Whether the decisions are read from scores of their own (`call(..., deciding=True)`): the config's
        tail_decisions="own" and some memory layer's `decision_weight` set (>= 0) by `settle`, or the ranking
        re-ranked by propensity (`reranks`: config rerank_slack), which the decisions never read."""
        return self.reranks() or any(layer.decision_weight is not None and float(layer.decision_weight.numpy())
                                     >= 0.0 for layer, _ in self.memory_layers())

    def _shortlisted(self, inputs: Any, contexts: list[tf.Tensor], deciding: bool = False) -> tf.Tensor:
        """The answer a * p_hat + m with p_hat read at each row's shortlist alone (cdgt_keras.shortlist)."""
        batch = tf.shape(contexts[0])[0]
        shares, scores = [], []
        for layer, space in self.memory_layers():
            share = _share(layer, self.tail_mask, deciding)
            query = contexts[0] if space == "encoder" else inputs
            shares.append(share)
            scores.append(tf.cond(tf.reduce_max(share) > 0.0, lambda layer=layer, query=query: layer(query),
                                  lambda: tf.zeros(tf.stack([batch, self.num_labels]))))
        network_share, part = sl.combine_memories(shares, scores)

        def fused() -> tf.Tensor:
            return self.fused_probs(inputs, contexts)

        def shortlisted() -> tf.Tensor:
            ids = sl.candidates(part, self.cdgt_config.shortlist)
            whole = lambda: tf.gather(fused(), ids, batch_dims=1)  # noqa: E731
            served = self.served_rows
            if served is None:
                return sl.kept(part, network_share, whole(), ids)
            rows = tf.cast(batch, tf.float32) * float(self.cdgt_config.shortlist * self.layout.slot_index.shape[1])
            network = tf.cond(rows <= sl.ROWS_FRACTION * self.layout.flat_size,
                              lambda: served.fused(contexts[0], ids), whole)
            return sl.kept(part, network_share, network, ids)

        # with every memory weight at 0 (in training, or while `settle` scores the network alone) m orders nothing:
        # the answer is the players' own, over every label
        return tf.cond(tf.reduce_min(network_share) < 1.0, shortlisted, fused)

    def prepare_serving(self) -> sl.ServedRows | None:
        """Make the heads' transposed copy the shortlist's "rows" road reads (cdgt_keras.shortlist), when the model
        has a shortlist and the road applies to it, and return it (a SavedModel must track it); None otherwise. Call
        it once the model is trained: the copy does not follow later changes of the heads."""
        if not self.shortlisted() or not sl.rows_apply(self.cdgt_config, self.wide):
            return None
        self.served_rows = sl.ServedRows.of(self.heads, self.layout.slot_index, self.fusion.weights_table.numpy())
        return self.served_rows

    def vote_layers(self) -> list[tuple[nb.NeighbourVotes, str]]:
        """The neighbour votes in the order the answer blends them, each with its space ("input", "encoder")."""
        space = "encoder" if self.cdgt_config.neighbour_space == "encoder" else "input"
        layers = [(self.neighbours, space), (self.encoder_neighbours, "encoder")]
        return [(layer, space) for layer, space in layers if layer is not None]

    def memory_layers(self) -> list[tuple[Any, str]]:
        """Every memory layer in the order the answer blends them (the votes, the label centroids, the label
        texts), each with the space it reads ("input", "encoder")."""
        tables = [(layer, "input") for layer in (self.centroids, self.label_text) if layer is not None]
        return [*self.vote_layers(), *tables]

    def neighbour_query(self, x: Any, space: str) -> Any:
        """An input batch in a space of the neighbour votes: as given ("input"), or the shared encoder's output
        ("encoder")."""
        return self.shared_encoder(x, training=False) if space == "encoder" else x

    # ------------------------------------------------------------------------------------------ the game
    def beta_now(self) -> tf.Tensor:
        """beta, or beta decayed linearly to 0 over `beta_anneal_steps` training steps (`anneal`)."""
        beta = tf.constant(self.cdgt_config.beta, tf.float32)
        if self.cdgt_config.beta_schedule == "constant":
            return beta
        step = tf.cast(self.player_optimizers[0].iterations, tf.float32)
        total = tf.convert_to_tensor(self.beta_anneal_steps)
        return tf.where(total > 0, beta * tf.maximum(0.0, 1.0 - step / tf.maximum(total, 1.0)), beta)

    def player_objective(self, i: int, y: tf.Tensor, probs: list[tf.Tensor], contexts: list[tf.Tensor],
                         beta: tf.Tensor) -> tf.Tensor:
        """J_i = R + alpha * C_i with every other player's output held fixed (SPEC §5)."""
        fixed = [p if j == i else tf.stop_gradient(p) for j, p in enumerate(probs)]
        ctx = [c if j == i else tf.stop_gradient(c) for j, c in enumerate(contexts)]
        return self.rules.player_objective(i, y, self.fusion(fixed, ctx, kernel=True), fixed, beta)

    def turn_objective(self, i: int, y: tf.Tensor | tf.SparseTensor, probs: list[tf.Tensor],
                       contexts: list[tf.Tensor], beta: tf.Tensor, reran: bool = False) -> tf.Tensor:
        """What player i's turn differentiates: J_i (`player_objective`) or, where `turns` apply, J_i less R's
        addends off player i's labels (cdgt_keras.turns: the same gradient from a third of the columns); with
        `reran`, the players before i are given as `rerun_probs` returned them. `y` may be sparse where turns
        apply."""
        if self.turns is None:
            return self.player_objective(i, y, probs, contexts, beta)
        fixed = [p if j == i else tf.stop_gradient(p) for j, p in enumerate(probs)]
        return turn_objective(self.turns, i, y, fixed, self.cdgt_config.alpha, reran)

    def rerun_probs(self, i: int, context: tf.Tensor, x: Any = None) -> tf.Tensor:
        """Player i's training output after its update, as the players after it read it: whole, or where `turns`
        apply only on the positions they read (`TurnPlan.rerun`; [B, 0] where none does)."""
        if self.turns is None:
            return self.player_probs(i, context, x, training=True)
        positions = self.turns.rerun[i]
        if positions is None:
            return tf.zeros([tf.shape(context)[0], 0])
        if self.wide[i] is not None:
            return tf.gather(self.player_probs(i, context, x, training=True), positions, axis=1)
        logits = self.heads[i].call_columns(context, positions, training=True)
        if self.cdgt_config.logit_adjustment > 0:
            logits = logits + tf.gather(self.logit_shift[i], positions)
        return tf.sigmoid(logits)

    def game(self, y: tf.Tensor, probs: list[tf.Tensor], contexts: list[tf.Tensor], beta: tf.Tensor) -> GameTerms:
        """Every term of the game at the given outputs (cdgt_keras.game.GameTerms), differentiable everywhere."""
        return self.rules.terms(y, self.fusion(probs, contexts, kernel=True), probs, beta)

    def record(self, terms: GameTerms, batch_size: tf.Tensor) -> dict[str, tf.Tensor]:
        """Update the step metrics (global means under tf.distribute) and return their values."""
        values = terms.logged()
        for name, value in values.items():
            self.trackers[name].update_state(value, sample_weight=batch_size)
        results = {name: tracker.result() for name, tracker in self.trackers.items()}
        if steps.multi_worker():
            # Keras reduces step outputs with MEAN over axis 0 across workers; scalars have no axis 0.
            results = {name: tf.reshape(value, [1]) for name, value in results.items()}
        return results

    # ------------------------------------------------------------------------------------------ training
    def _ensure_built(self, x: Any) -> None:
        """Keras defers building to the first trace; the steps below call sub-layers, not the model."""
        if not self.built:
            self(x, training=False)

    def train_step(self, data: Any) -> dict[str, tf.Tensor]:
        x, y = steps.unpack(data, self.num_labels)
        self._ensure_built(x)
        if self.cdgt_config.schedule == "cyclic":
            terms = steps.cyclic_step(self, x, y, steps.sparse_labels(data))
        else:
            terms = steps.simultaneous_step(self, x, y)
        return self.record(terms, steps.batch_size(y))

    def test_step(self, data: Any) -> dict[str, tf.Tensor]:
        x, y = steps.unpack(data, self.num_labels)
        self._ensure_built(x)
        contexts = self.contexts(x, training=False)
        probs = [self.player_probs(i, c, x) for i, c in enumerate(contexts)]
        return self.record(self.game(y, probs, contexts, self.beta_now()), steps.batch_size(y))

    def fit(self, *args: Any, callbacks: list | None = None, **kwargs: Any) -> Any:
        """keras.Model.fit; with `beta_schedule="anneal"` it first sets the annealing horizon."""
        callbacks = list(callbacks or [])
        if self.cdgt_config.beta_schedule == "anneal":
            callbacks.insert(0, steps.BetaAnnealing())
        return super().fit(*args, callbacks=callbacks, **kwargs)

    def _maybe_symbolic_build(self, iterator: Any = None, data_batch: Any = None) -> None:
        """Skip Keras' symbolic build when everything is built already: Keras 3.12-3.15 reduce a data batch
        across replicas there, which fails under MultiWorkerMirroredStrategy (PerReplica to Tensor)."""
        if self.built and getattr(self, "optimizer", None) is not None and self.optimizer.built:
            return
        super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)

    # ------------------------------------------------------------------------------------------ saving
    def get_config(self) -> dict[str, Any]:
        remembers = bool(self.memory_layers())
        memory = self.memory.to_dict() if remembers else None
        return {"name": self.name, "config": self.cdgt_config.to_dict(), "label_freq": self.label_freq.tolist(),
                "memory": memory, "num_train": self.num_train, "wide_columns": self.wide_columns,
                "dense_columns": self.dense_columns}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> CDGTModel:
        return cls(**config)


def _blended(fused: tf.Tensor, layer: Any, query: Any, tail: tf.Tensor, deciding: bool = False) -> tf.Tensor:
    """(1 - w) p_hat + w layer(query), w the memory layer's share per label (`_share`); the layer is not run while
    every share is 0."""
    share = _share(layer, tail, deciding)
    return tf.cond(tf.reduce_max(share) > 0.0, lambda: (1.0 - share) * fused + share * layer(query), lambda: fused)


def _blended_pair(ranking: tf.Tensor, decided: tf.Tensor, layer: Any, query: Any,
                  tail: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """`_blended` of the ranking's running answer and of the decisions' (`deciding=True`), the layer run once."""
    share, decision_share = _share(layer, tail), _share(layer, tail, deciding=True)

    def both() -> tuple[tf.Tensor, tf.Tensor]:
        memory = layer(query)
        return (1.0 - share) * ranking + share * memory, (1.0 - decision_share) * decided + decision_share * memory

    return tf.cond(tf.reduce_max(tf.maximum(share, decision_share)) > 0.0, both, lambda: (ranking, decided))


def _share(layer: Any, tail: tf.Tensor, deciding: bool = False) -> tf.Tensor:
    """A memory layer's weight per label [L]: its `weight`, or on the tail labels (`tail`, [L] bool) its
    `tail_weight` when that is set (>= 0), and when `deciding`, its `decision_weight` before that when set."""
    w, tail_w = tf.convert_to_tensor(layer.weight), tf.convert_to_tensor(layer.tail_weight)
    if deciding and layer.decision_weight is not None:
        decision_w = tf.convert_to_tensor(layer.decision_weight)
        tail_w = tf.where(decision_w >= 0.0, decision_w, tail_w)
    return tf.where(tail & (tail_w >= 0.0), tail_w, w)


def _player_optimizer(config: CDGTConfig, player: int, epsilon: float) -> LazyAdam:
    """Player `player`'s (0-based) optimizer: LazyAdam at its learning rate, with `player_weight_decay` (AdamW's
    decoupled decay) on every weight but the biases when that is set."""
    decay = config.player_weight_decay or None
    optimizer = LazyAdam(config.player_learning_rate(player), epsilon=epsilon, weight_decay=decay,
                         name=f"player{player + 1}_adam")
    if decay:
        optimizer.exclude_from_weight_decay(var_names=["bias"])
    return optimizer


def _prior_odds(freq: np.ndarray) -> np.ndarray:
    """log(freq / (1 - freq)) per label (frequencies floored as `objectives.floored`, capped at 1/2): the output biases
    under which every label starts at its training frequency."""
    f = np.minimum(obj.floored(freq), 0.5)
    return np.log(f / (1.0 - f)).astype(np.float32)


def _is_wide(config: CDGTConfig, player: int) -> bool:
    """Whether player `player` (0-based) has a wide (linear on the raw input) part: `wide` all, tail (not 0) or
    head (0 alone)."""
    return config.wide == "all" or (config.wide == "tail" and player > 0) or (config.wide == "head" and player == 0)
