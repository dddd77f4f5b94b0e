"""Named presets: sets of CDGTConfig overrides on top of the dataclass defaults (the paper's values).

`CDGTConfig.preset(NAME)` applies one; the command line starts from `default_preset(the data's feature kind and
label count)`: `recommended_text` on raw text of up to 4,096 labels, `recommended` on anything else. Each preset
says why it is what it is; the figures behind the shipped ones are in bench/REPORT.md.

Example:
    >>> sorted(PRESETS)[:2]
    ['no_curiosity', 'paper']
"""

from __future__ import annotations

from typing import Any

# What the benchmarks ship (bench/REPORT.md, "The learner"): three players on a shared 512-unit encoder over
# the sparse input, the plain BCE payoff of the fused output, the log-scoring curiosity on rare positives
# (weights freq^-1/2, alpha 2; no disagreement reward: every form of it cost quality), output biases that start
# at each label's prior, trained with dropout 0.5, a step of 6e-3 decayed by a cosine over 10 epochs of at
# least 100 steps, early stopping on validation P@5 with the best weights kept, and per-label thresholds shrunk
# toward the pooled one. On debtags (one seed each, the same features) the prior biases took P@1 from 83.5 to
# 84.9 and Macro-F1 from 29.9 to 33.5, and the 512-unit encoder kept that at 70 % of the time. P@1 over
# debtags' 3,148 validation documents moves by +-0.3 between epochs: stopping on it ended one seed of three at
# epoch 6 with its tail undertrained; P@5 rose smoothly. Logit adjustment (0.25) and dropout 0.3 helped debtags
# (PSP@5 +1.6, P@1 +0.3) but cost delicious 3 points of P@1, so neither ships. Neighbour votes (the labels of
# the 30 training documents nearest to the input, blended in with the weight validation P@5 picks) added P@1
# +1.5 on yeast and +1.4 on delicious (three seeds each) and nothing on debtags or bibtex, where validation
# gives them a weight of 0 to 0.1. Label centroids (each label's training documents summed, kept to 300
# entries, scored by cosine and blended in as validation P@5 picks) added PSP@5 +0.6 on debtags and bibtex
# (three seeds) and +2.5 on deps with P@1 +0.5, and validation gives them 0 where they add nothing. Votes in
# both spaces (the TF-IDF rows', then the trained encoder's, each weight picked by validation P@5 with the
# ones before it in) added P@1 +0.5 on debtags and delicious and +1.2 on deps, Micro-F1 +0.6 on debtags and
# bibtex and +1.0 on deps, and nothing on yeast or emotions, where validation gives the encoder's votes 0.
# The tail labels' own memory weights (picked on validation Rare-F1, P@1 and P@5 kept within 0.1 points) added
# Rare-F1 +3.8 and Macro-F1 +0.7 on debtags, Rare-F1 +0.6 on bibtex and +0.8 on yeast (three seeds), with the
# head's ranking unchanged (P@1 within 0.1), delicious -0.3 (within its spread) and emotions unchanged.
# Label texts (each label's name, its last `::` part, scored by cosine like a centroid and blended in last,
# its weight picked on validation P@5 and the tail's on Rare-F1) added Rare-F1 +14.4, Macro-F1 +2.1 and PSP@5
# +0.95 on debtags (three seeds, P@1 -0.04); the leaf was chosen over the whole name on validation Rare-F1.
# Label documents (a label that names a training record, as a dependency target names a package, is known by
# that record's features beside its name) added P@1 +0.46, PSP@5 +0.53 and Rare-F1 +2.05 on deps (three seeds;
# Micro-F1 -0.13, Macro-F1 -0.04); where no label names a record (debtags, bibtex, delicious) they change nothing.
# Early stopping reads validation P@5, so the objective is not evaluated on validation each epoch (the same
# model to the bit, without val_payoff in the logs; on deps 1.6 s of each 48 s epoch).
# Adam's epsilon is 5.98e-5 / L: the payoff averages over the labels, so a weight's gradient shrinks as 1/L, and
# at deps' 18.6k labels Keras' 1e-7 was 10^2.5 to 10^4 times Adam's sqrt(v), setting the step in place of the
# learning rate. Per label it took deps from P@1 67.6 to 70.3 and PSP@5 from 35.9 to 38.3 (three seeds); at
# debtags' 598 labels it is 1e-7 exactly, so the model the rest of this comment measures is kept to the bit.
# The step rises over the first 5 % of the steps (warmup_fraction): under the larger steps of the per-label
# epsilon, a third of deps' 512 encoder units were dead after the first epoch. Three seeds against no warm-up:
# deps P@1 +0.28, Macro-F1 +0.99; bibtex Macro-F1 +0.62; delicious PSP@5 +0.31; yeast and emotions Macro-F1
# +1.1 and +1.6; debtags P@1 -0.34, PSP@5 +0.74 (bench/learner_notes.md, round 20).
# The input-space memories keep at most 5,000 entries per word, the largest (memory_list_cap): a single
# prediction reads a word's posting list, and a common word's holds up to 39k training documents on deps, all
# at the word's smallest weights. Three seeds against every entry: deps P@1 +0.00, PSP@5 +0.06, Micro-F1 -0.21;
# debtags P@1 +0.08, PSP@5 +0.06; the other sets' lists are all shorter (the same model to the bit); the served
# deps-all model answers a single prediction in 25.3 ms against 37.1 (bench/learner_notes.md, round 23).
# A label space beyond 4,096 labels trains longer (label_epoch_growth 0.1: 10 % more epochs per doubling, so
# deps' 18.6k labels train 12 epochs and deps-all's 41k 13; every other set here has under 1,000 labels and
# trains its 10, the same model to the bit). deps' validation P@5 was still rising at epoch 10; three seeds
# against ten epochs: P@1 +0.21, P@5 +0.23, PSP@5 +1.04, Macro-F1 +0.46, for 20 % more training time. Beside
# Bonsai in the same run: P@1 +0.09, PSP@5 +3.18 (bench/learner_notes.md, rounds 33-34). The same two epochs on
# the small sets cost bibtex Rare-F1 -0.90 and debtags Macro-F1 -0.83, hence a rule on the label count.
_RECOMMENDED: dict[str, Any] = {
    "n_players": 3, "overlap": 0.2, "alpha": 2.0, "beta": 0.0, "fusion": "mean", "schedule": "cyclic",
    "rarity": "inverse_sqrt", "correctness": "log_positives", "payoff": "bce", "disagreement": "kl",
    "beta_schedule": "constant", "thresholds": "shrunk", "threshold_prior": 10.0,
    "encoder_hidden": (512,), "head_hidden": (), "dropout": 0.5, "learning_rate": 0.006,
    "lr_schedule": "cosine", "warmup_fraction": 0.05, "epochs": 10, "min_steps_per_epoch": 100,
    "label_epoch_growth": 0.1,
    "early_stopping_metric": "p_at_5",
    "prior_bias": True, "neighbours": 30, "neighbour_space": "both", "centroid_features": 300,
    "tail_memory": "own", "label_text": True, "label_documents": True,
    "validation_objective": False, "adam_epsilon": 5.98e-5, "adam_epsilon_per_label": True,
    "memory_list_cap": 5000, "threshold_shared_positives": 20,
}

# Presets: named sets of overrides on top of the defaults.
PRESETS: dict[str, dict[str, Any]] = {
    # The paper's literal method (SPEC §5): the formulas exactly as published.
    "paper": {
        "n_players": 3, "overlap": 0.2, "alpha": 0.5, "beta": 0.2, "fusion": "mean", "schedule": "cyclic",
        "rarity": "paper", "correctness": "all", "payoff": "bce", "disagreement": "kl",
        "beta_schedule": "constant",
    },
    # The strongest simple baseline of the method's research: one predictor, BCE weighted by freq^-1/2, no game.
    "rarity_bce": {
        "n_players": 1, "alpha": 0.0, "beta": 0.0, "payoff": "weighted_bce", "rarity": "inverse_sqrt",
    },
    "recommended": _RECOMMENDED,
    # What the benchmarks ship for raw text (the command line's default when the data's features are text, as
    # debtags' catalogue descriptions, of at most TEXT_PRESET_MAX_LABELS labels): `recommended` with a sentence
    # embedding of each text (all-MiniLM-L6-v2 to 128 word pieces, and a second block of its first 32: a catalogue
    # entry's name and first sentence) before the TF-IDF columns, every player's wide linear part on the embedding
    # (step 0.02), a lower curiosity weight (alpha 1) with the logits adjusted by 2 x log propensity, the tail's
    # decisions taken apart from its ranking, and the ranking re-ordered by propensity below each row's first
    # label, the exponent picked on validation within 0.3 points of P@5; a 384-unit encoder, and epochs of one pass
    # over the training split (no 100-step minimum: debtags' 95 batches). On debtags (three seeds, one run) it is
    # above the best of Omikuji and LibMultiLabel as they ship on all six figures (P@1 +1.39, P@5 +0.51, PSP@5
    # +4.78, Micro-F1 +1.73, Macro-F1 +6.96, Rare-F1 +18.27) and trains in 3.9x Omikuji's time on TF-IDF; against
    # them on its own columns it is a little behind on P@1 (-0.20) and ahead on the rest (P@5 +0.12, PSP@5 +2.52,
    # Macro-F1 +3.09, Rare-F1 +11.25), where `recommended` on TF-IDF leaves P@1 1.4 points below Omikuji. The 512-unit
    # encoder of 100-step epochs (round 65's) adds P@1 +0.34 and Micro-F1 +0.28 in the same run for 23 % more time,
    # 4.7x Omikuji's; 384 units alone or one-pass epochs alone missed 4x (bench/learner_notes.md, rounds 50-59, 64-66).
    # Without raw text (bibtex, delicious, yeast, emotions: features as given) there is nothing to embed.
    "recommended_text": {
        **_RECOMMENDED,
        "alpha": 1.0, "logit_adjustment": 2.0, "logit_adjustment_prior": "propensity", "rerank_slack": 0.003,
        "tail_decisions": "own", "text_embedding": "all-MiniLM-L6-v2", "text_embedding_lead_tokens": 32,
        "wide": "all", "wide_input": "embedding", "wide_learning_rate": 0.02,
        "encoder_hidden": (384,), "min_steps_per_epoch": 0,
    },
    # The paper's ablations (Experiments): variant A (no curiosity), variant B (single predictor).
    "no_curiosity": {"alpha": 0.0},
    "single_predictor": {"n_players": 1, "alpha": 0.0, "payoff": "weighted_bce", "rarity": "paper"},
}


# The preset the command line starts from when none is named (`cdgt train/run/kubeflow --preset`): TEXT_PRESET when
# the data's features are raw text, DEFAULT_PRESET otherwise (default_preset). The dataclass field defaults stay the
# paper's literal values, so `CDGTConfig()` and `CDGTConfig.preset("paper")` agree.
DEFAULT_PRESET = "recommended"
TEXT_PRESET = "recommended_text"
# The text preset was measured on debtags' 598 labels. On deps' 18.6k its wide parts (768 x |L_i| weights a player)
# cost several times `recommended`'s training time and its first epochs trail it on validation P@5 (round 59), so
# beyond this many labels raw text keeps `recommended` until a measurement says otherwise.
TEXT_PRESET_MAX_LABELS = 4096


def default_preset(feature_kind: str | None, num_labels: int = 0) -> str:
    """The preset for data whose manifest records `feature_kind` (text, sparse, dense; None: unknown) and
    `num_labels` (0: unknown).

    Example:
        >>> default_preset("text", 598), default_preset("text", 18_632), default_preset("sparse", 159)
        ('recommended_text', 'recommended', 'recommended')
    """
    text = feature_kind == "text" and num_labels <= TEXT_PRESET_MAX_LABELS
    return TEXT_PRESET if text else DEFAULT_PRESET
