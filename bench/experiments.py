"""The named experiment grids (the paper's tables re-run, plus extra rows) and the two profiles.

An experiment is a list of data sets and a list of method names (cdgt.bench.methods); runs are shared
between experiments (the `cdgt` run on bibtex serves `main`, every `sensitivity_*` and `extras`).

Example:
    >>> [s.method.name for s in expand(EXPERIMENTS["sensitivity_alpha"], datasets=["yeast"], seeds=1)][:2]
    ['cdgt[alpha=0.0]', 'cdgt[alpha=0.1]']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cdgt.bench.methods import PEERS, resolve
from cdgt.bench.runner import RunSpec
from cdgt.pipeline.datasets import text_features
from cdgt_keras.text import TEXT_CONFIG_FIELDS

BASELINES = ("bce", "single_predictor", "no_curiosity", "focal", "asl", "rarity_bce")
SMALL = ("yeast", "emotions", "bibtex", "corel5k")
FIXED_EPOCHS = "early_stopping_patience=0,epochs=5"  # overhead runs: the same number of epochs for every N


def _grid(key: str, values: Sequence[object]) -> tuple[str, ...]:
    return tuple(f"cdgt[{key}={v}]" for v in values)


@dataclass(frozen=True)
class Experiment:
    """A table of the report: which data sets, which methods, how many seeds by default."""

    title: str
    what: str
    datasets: tuple[str, ...]
    methods: tuple[str, ...]
    seeds: int = 3


# Issue 8: what makes the game pay off. The bar, the one-seed screen and the three-seed confirmation.
RESEARCH_BAR = "rarity_bce"
# The bar at a larger step: at 1e-3 it was still improving after 20 epochs on debtags and bibtex (a fair bar is a
# trained one); the candidates are compared with both.
RESEARCH_BAR_FAST = "rarity_bce[learning_rate=0.003]"
_LOGPOS = "beta=0,correctness=log_positives,rarity=inverse_sqrt"
RESEARCH_SCREEN = (
    RESEARCH_BAR, "bce", "no_curiosity", "cdgt", "cdgt[beta=0]",
    "cdgt[beta=0,correctness=positives,rarity=inverse_sqrt]",
    f"cdgt[{_LOGPOS}]", f"cdgt[{_LOGPOS},n_players=1]", "cdgt[beta=0,correctness=log_positives,rarity=inverse]",
    "cdgt[correctness=log_positives,disagreement=js,rarity=inverse_sqrt]",
    "cdgt[beta=0,correctness=log,rarity=inverse_sqrt]",
    f"cdgt[{_LOGPOS},alpha=1]", f"cdgt[{_LOGPOS},alpha=2]", f"cdgt[{_LOGPOS},schedule=simultaneous]",
    "rarity_bce[learning_rate=0.003]", f"cdgt[{_LOGPOS},learning_rate=0.003]",
    "rarity_bce[head_hidden=768]", f"cdgt[{_LOGPOS},head_hidden=768,n_players=1]",
    f"cdgt[{_LOGPOS},alpha=2,learning_rate=0.003,payoff=weighted_bce]",
    f"cdgt[{_LOGPOS},alpha=2,learning_rate=0.003,n_players=1,payoff=weighted_bce]",
    f"cdgt[{_LOGPOS},alpha=2,payoff=weighted_bce]",
)
# The game on the bar's own payoff (rarity-weighted BCE of the fused output) plus the log-scoring curiosity.
_BG = f"{_LOGPOS},alpha=2,learning_rate=0.003,payoff=weighted_bce"
# The finalist (index 3, per-label thresholds) is what preset "recommended" (index 2) ships, with shrunk thresholds.
_BGS = f"{_LOGPOS},alpha=2,payoff=weighted_bce"
RESEARCH_FINAL = (RESEARCH_BAR, RESEARCH_BAR_FAST, "recommended[label_epoch_growth=0.0,threshold_shared_positives=0]",
                  f"cdgt[{_BGS}]",
                  f"cdgt[{_BG}]",
                  f"cdgt[{_BG},n_players=1]", f"cdgt[{_LOGPOS},alpha=2]", f"cdgt[{_LOGPOS},alpha=2,n_players=1]")


# Rows measured before round 28 (2026-11-29, fourth session) on the text sets (debtags, deps, deps-all): their
# features had no parts of compound identifiers (`libfoo-dev` -> `libfoo`, `dev`). The dense and sparse sets have
# no text, so there the option changes nothing and their rows keep their names.
_F27 = "text_identifier_parts=false"


def _on_f27(name: str) -> str:
    """`name` on the text features before round 28, canonically spelled:
    "omikuji" -> "omikuji[text_identifier_parts=false]" (a `recommended` row: also its thresholds before round 32)."""
    return _with(_before_r32(name), _F27)


# Rows of `recommended` measured before round 32 (2026-11-30): every label kept its own shrunk threshold.
_T0 = "threshold_shared_positives=0"


def _before_r32(name: str) -> str:
    """A `recommended` row as measured before round 32, canonically spelled: "recommended" ->
    "recommended[label_epoch_growth=0.0,threshold_shared_positives=0]"; other methods as they are."""
    method = resolve(name)
    if method.base == "recommended" and "threshold_shared_positives" not in dict(method.overrides):
        name = _with(name, _T0)
    return _before_r34(name)


# Rows of `recommended` measured before round 34 (2026-11-30, third session): every label count trained `epochs`
# (on the sets under 4,096 labels, every set but deps and deps-all, the same model to the bit).
_G0 = "label_epoch_growth=0.0"


def _before_r34(name: str) -> str:
    """A `recommended` row as measured before round 34, canonically spelled: "recommended" ->
    "recommended[label_epoch_growth=0.0]"; other methods as they are."""
    method = resolve(name)
    if method.base != "recommended" or "label_epoch_growth" in dict(method.overrides):
        return method.name
    return _with(name, _G0)


def _with(name: str, overrides: str) -> str:
    inner = f"{name[:-1]},{overrides}]" if name.endswith("]") else f"{name}[{overrides}]"
    return resolve(inner).name


# Rows measured before round 23 (2026-11-28, fifth session), when `recommended` kept every entry of its memories'
# posting lists (on the sets whose lists are all shorter than the cap, yeast, emotions, bibtex, delicious, the same
# model to the bit).
_R22 = "memory_list_cap=0"
# Rows measured before round 21 (2026-11-28, third session), when `recommended` had no warm-up.
_R20 = f"{_R22},warmup_fraction=0.0"
# Rows measured before round 20 (2026-11-28), when `recommended` took Keras' Adam epsilon (1e-7 at every label
# count): its per-label rule gives debtags the same 1e-7, so there a row and its `_EPS7` spelling are one model.
_EPS7 = f"adam_epsilon=1e-07,adam_epsilon_per_label=false,{_R20}"

# The learner (what the shipped preset's training is made of), on debtags: each row one change on the one above it;
# the previous shipped preset first, the current one (`recommended`) last; N=1 BCE rows under the same training.
_PREVIOUS = "alpha=2.0,beta=0.0,correctness=log_positives,rarity=inverse_sqrt,thresholds=shrunk"
_WIDE_NET = "dropout=0.5,early_stopping_metric=p_at_1,encoder_hidden=1024,head_hidden=,lr_schedule=cosine"
_MLP = _WIDE_NET
# The preset shipped before the prior biases (session of 2026-11-23), and the tail tools measured on top of it.
_SHIPPED_1024 = f"{_PREVIOUS},{_WIDE_NET},epochs=10,learning_rate=0.006,min_steps_per_epoch=100"
_LEARNER_F27 = (
    f"cdgt[{_PREVIOUS},payoff=weighted_bce]",
    f"cdgt[{_PREVIOUS},payoff=weighted_bce,dropout=0.5,early_stopping_metric=psp_at_5,learning_rate=0.003,"
    "lr_schedule=cosine,warmup_fraction=0.05]",
    f"cdgt[{_PREVIOUS},payoff=weighted_bce,dropout=0.5,early_stopping_metric=psp_at_5,learning_rate=0.003,"
    "lr_schedule=cosine,warmup_fraction=0.05,wide=tail]",
    f"cdgt[{_PREVIOUS},payoff=weighted_bce,{_WIDE_NET},epochs=15,learning_rate=0.002]",
    f"cdgt[{_PREVIOUS},payoff=weighted_bce,{_WIDE_NET},epochs=10,learning_rate=0.006]",
    f"cdgt[{_PREVIOUS},{_WIDE_NET},epochs=10,learning_rate=0.006,alpha=0.5]",
    f"cdgt[{_PREVIOUS},{_WIDE_NET},epochs=10,learning_rate=0.006]",
    f"cdgt[{_SHIPPED_1024}]",
    f"cdgt[{_SHIPPED_1024},wide=tail]",
    f"cdgt[{_SHIPPED_1024},wide=all,wide_learning_rate=0.06]",
    f"cdgt[{_SHIPPED_1024},logit_adjustment=1.0]",
    f"cdgt[{_SHIPPED_1024},prior_bias=true]",
    f"cdgt[{_SHIPPED_1024},prior_bias=true,logit_adjustment=0.5]",
    f"cdgt[{_SHIPPED_1024},prior_bias=true,wide=tail,wide_learning_rate=0.02]",
    f"cdgt[{_SHIPPED_1024},prior_bias=true,wide=all,wide_learning_rate=0.02]",
    f"cdgt[{_SHIPPED_1024},prior_bias=true,encoder_hidden=512]",
    f"cdgt[{_SHIPPED_1024},prior_bias=true,encoder_hidden=512,learning_rate=0.01]",
    f"cdgt[{_SHIPPED_1024},prior_bias=true,encoder_hidden=512,logit_adjustment=0.25]",
    f"cdgt[{_SHIPPED_1024},prior_bias=true,encoder_hidden=512,dropout=0.3]",
    f"recommended[{_EPS7},centroid_features=0,dropout=0.3,early_stopping_metric=p_at_1,label_text=false,logit_adjustment=0.25,neighbours=0]",
    f"recommended[{_EPS7},centroid_features=0,dropout=0.3,label_text=false,logit_adjustment=0.25,neighbours=0]",
    f"recommended[{_EPS7},centroid_features=0,label_text=false,neighbours=0]",
    # Round 3 (session of 2026-11-25): input dropout, wide parts with a payoff of their own, the budget.
    f"recommended[{_EPS7},centroid_features=0,input_dropout=0.2,label_text=false,neighbours=0]",
    f"recommended[{_EPS7},centroid_features=0,input_dropout=0.4,label_text=false,neighbours=0]",
    f"recommended[{_EPS7},centroid_features=0,label_text=false,neighbours=0,wide=all,wide_learning_rate=0.02,wide_payoff=own]",
    f"recommended[{_EPS7},centroid_features=0,label_text=false,neighbours=0,wide=all,wide_learning_rate=0.05,wide_payoff=own]",
    f"recommended[{_EPS7},centroid_features=0,epochs=6,label_text=false,neighbours=0]",
    f"recommended[{_EPS7},centroid_features=0,epochs=15,label_text=false,neighbours=0]",
    f"recommended[{_EPS7},centroid_features=0,epochs=20,label_text=false,neighbours=0]",
    # Round 4 (session of 2026-11-25): the shared encoder's rows trained by Adagrad's fused kernel.
    f"recommended[{_EPS7},centroid_features=0,encoder_learning_rate=0.03,encoder_optimizer=adagrad,label_text=false,neighbours=0]",
    f"recommended[{_EPS7},centroid_features=0,encoder_learning_rate=0.1,encoder_optimizer=adagrad,label_text=false,neighbours=0]",
    f"recommended[{_EPS7},centroid_features=0,encoder_learning_rate=0.3,encoder_optimizer=adagrad,label_text=false,neighbours=0]",
    # Round 5 (session of 2026-11-25, later): a listwise term in the payoff; neighbour votes (round 5's `recommended`).
    f"recommended[{_EPS7},centroid_features=0,label_text=false,listwise_weight=1.0,neighbours=0]",
    f"recommended[{_EPS7},centroid_features=0,label_text=false,listwise_weight=3.0,neighbours=0]",
    f"recommended[{_EPS7},centroid_features=0,label_text=false,listwise_weight=10.0,neighbours=0]",
    # round 5's `recommended`: the votes, no centroids
    f"recommended[{_EPS7},centroid_features=0,label_text=false,neighbour_space=input,tail_memory=shared]",
    # Round 7 (session of 2026-11-26): label centroids (round 7's `recommended`).
    f"recommended[{_EPS7},label_text=false,neighbour_space=input,tail_memory=shared]",
    # Round 8 (session of 2026-11-26, later): a narrower encoder for the training time.
    f"recommended[{_EPS7},encoder_hidden=256,label_text=false,neighbour_space=input,tail_memory=shared]",
    f"recommended[{_EPS7},encoder_hidden=384,label_text=false,neighbour_space=input,tail_memory=shared]",
    # Round 11 (session of 2026-11-26, fifth): votes in the encoder's space beside the input's.
    f"recommended[{_EPS7},label_text=false,tail_memory=shared]",
    # Round 12 (2026-11-26, sixth): the tail labels' own memory weights.
    f"recommended[{_EPS7},label_text=false]",
    # Round 16 (2026-11-27, fourth): label texts; round 18 added the label documents (no label of debtags names a
    # record), so this is the preset before round 20.
    f"recommended[{_EPS7}]",
    # Round 20 (2026-11-28): Adam's epsilon per label, 1e-7 at debtags' 598 labels.
    f"recommended[{_R20}]",
    # Round 21 (2026-11-28, third): the step warmed up over the first 5 % of the steps.
    f"recommended[{_R22}]",
    # Round 23 (2026-11-28, fifth): the input-space memories' posting lists capped at 5,000.
    "recommended",
    f"bce[{_MLP},epochs=15,learning_rate=0.002]",
    f"bce[{_MLP},epochs=15,learning_rate=0.002,wide=all]",
    f"bce[{_MLP},epochs=15,learning_rate=0.006]",
    f"bce[{_MLP},epochs=10,learning_rate=0.015]",
)
# Every row above ran on the features before round 28; round 28 added the parts of compound identifiers (today's
# `recommended`, the row after round 23's).
_AT_F27 = [_on_f27(name) for name in _LEARNER_F27]
LEARNER = (*_AT_F27[:_LEARNER_F27.index("recommended") + 1], _before_r32("recommended"), _before_r34("recommended"),
           "recommended",
           *_AT_F27[_LEARNER_F27.index("recommended") + 1:])


# The embedding's columns the text preset reads (two blocks: 128 and 32 word pieces), given to the peers too so that
# every method of a text set's comparison also runs on the same features (round 59).
TEXT_COLUMNS = "text_embedding=all-MiniLM-L6-v2,text_embedding_lead_tokens=32"
_MAIN = ("recommended", "recommended_text", *(f"{peer}[{TEXT_COLUMNS}]" for peer in PEERS),
         _before_r34("recommended"), *(_before_r32(name) for name in (
    "recommended", f"recommended[{_R22}]", f"recommended[{_R20}]", f"recommended[{_EPS7}]",
    f"recommended[{_EPS7},label_documents=false]", f"recommended[{_EPS7},label_text=false]",
    f"recommended[{_EPS7},label_text=false,tail_memory=shared]",
    f"recommended[{_EPS7},label_text=false,neighbour_space=input,tail_memory=shared]")),
         "cdgt", *BASELINES, *PEERS)


EXPERIMENTS: dict[str, Experiment] = {
    "main": Experiment(
        "Main comparison", "CD-GTMLL (the shipped default and the paper's literal form) vs the paper's ablations, "
        "focal loss, ASL, the bar (rarity_bce) and the peers", (*SMALL, "debtags", "delicious", "deps"),
        # `recommended[_G0]`: the shipped preset before its last change (the epochs grown with the label count,
        # round 34; every `recommended` row after it was measured before that change too, and says so);
        # `recommended[_T0]`: the one before (the frequent labels' shared threshold, round 32);
        # `recommended[_R22]`: the one before (the lists' cap); `recommended[_R20]`, the
        # one before (the warm-up); `recommended[_EPS7]`, the one before (Adam's epsilon per label; the same model
        # on debtags); with `label_documents=false`, the one before (the label documents; on deps and deps-all, the
        # only data whose labels name training records); `label_text=false`, the one before (the label texts); with
        # `tail_memory=shared`, the one before that (the tail's own weights); with `neighbour_space=input` too, the
        # one before that (deps' three seeds, deps-all's row)
        # On the text sets every row before round 28 also names the features it ran on (`_F27`).
        tuple(dict.fromkeys((*_MAIN, *(_on_f27(name) for name in _MAIN))))),
    "learner": Experiment(
        "The learner", "what the shipped preset is made of, in two rounds: the training (each CD-GTMLL row one change "
        "on the row before it, from the preset shipped before this work to the 1024-unit preset), then the tail tools "
        "(each row one or two on the 1024-unit preset, to today's `recommended`); and N=1 BCE under the same training",
        ("debtags",), LEARNER, seeds=1),
    "sensitivity_alpha": Experiment("Sensitivity to alpha", "curiosity weight", ("yeast", "bibtex", "corel5k"),
                                    _grid("alpha", (0.0, 0.1, 0.3, 0.5, 0.7, 1.0))),
    "sensitivity_beta": Experiment("Sensitivity to beta", "disagreement weight", ("yeast", "bibtex", "corel5k"),
                                   _grid("beta", (0.0, 0.05, 0.1, 0.2, 0.5, 1.0))),
    "sensitivity_rho": Experiment("Sensitivity to rho", "overlap ratio", ("yeast", "bibtex", "corel5k"),
                                  _grid("overlap", (0.0, 0.1, 0.2, 0.3, 0.4, 0.5))),
    "sensitivity_n": Experiment("Sensitivity to N", "number of players", ("yeast", "bibtex", "corel5k"),
                                _grid("n_players", range(1, 9))),
    "rare": Experiment(
        "Rare-focused (-R) variants", "30 % / 50 % of the rarest labels' training positives removed",
        ("corel5k", "corel5k-R30", "corel5k-R50", "bibtex", "bibtex-R30", "bibtex-R50",
         "debtags", "debtags-R30", "debtags-R50"),
        ("recommended", "cdgt", "bce", "single_predictor", "no_curiosity", "rarity_bce", *PEERS)),
    "specialisation": Experiment("Player specialisation", "each player's F1 on its head and tail labels",
                                 SMALL, ("cdgt", "cdgt[correctness=positives,rarity=inverse_sqrt]")),
    "disagreement": Experiment("Disagreement and the potential over training", "kl_head, kl_tail, Phi per epoch",
                               SMALL, ("cdgt", "cdgt[disagreement=js]", "cdgt[beta_schedule=anneal]")),
    "overhead": Experiment(
        "Overhead", "time per epoch and inference time for N = 1, 3, 5, both schedules (5 epochs, no early stop)",
        ("bibtex",), tuple(f"cdgt[{FIXED_EPOCHS},n_players={n},schedule={s}]"
                           for s in ("cyclic", "simultaneous") for n in (1, 3, 5)), seeds=1),
    "extras": Experiment(
        "Beyond the paper", "one change at a time on top of the paper's form (`cdgt`)", ("bibtex", "corel5k"),
        ("cdgt", "rarity_bce", "cdgt[rarity=inverse_sqrt]", "cdgt[rarity=inverse]", "cdgt[correctness=positives]",
         "cdgt[disagreement=js]", "cdgt[disagreement=kl_clipped]", "cdgt[beta_schedule=anneal]",
         "cdgt[head_hidden=]", "cdgt[shared_encoder=false]")),
    "research_screen": Experiment(
        "Research screen: making the game pay off", "one change at a time against the bar, one seed",
        ("bibtex", "corel5k", "debtags", "yeast", "emotions"), RESEARCH_SCREEN, seeds=1),
    "research": Experiment(
        "Research confirmation: making the game pay off",
        "the finalists and their ablations against the bar, three seeds",
        ("debtags", "bibtex", "corel5k", "yeast", "emotions", "delicious", "bibtex-R30", "corel5k-R30"),
        RESEARCH_FINAL),
}


@dataclass(frozen=True)
class Profile:
    """Defaults a profile puts on every experiment (None: the experiment's own)."""

    what: str
    datasets: tuple[str, ...] | None = None
    methods: tuple[str, ...] | None = None
    seeds: int | None = None
    epochs: int | None = None
    experiments: tuple[str, ...] = ("main",)


PROFILES: dict[str, Profile] = {
    "full": Profile("every experiment's own data sets, methods and 3 seeds (hours)"),
    "quick": Profile("yeast + emotions + a small synthetic set, 3 methods, 1 seed, 2 epochs (a few minutes; CI)",
                     datasets=("yeast", "emotions", "synthetic"), methods=("cdgt", "rarity_bce", "omikuji"),
                     seeds=1, epochs=2),
}


def expand(experiment: Experiment, *, datasets: Sequence[str] | None = None, methods: Sequence[str] | None = None,
           seeds: int | None = None, epochs: int | None = None) -> list[RunSpec]:
    """The runs of an experiment, in order data set -> method -> seed; `epochs` overrides every CD-GTMLL run."""
    specs = []
    for dataset in datasets or experiment.datasets:
        for name in methods or experiment.methods:
            method = resolve(name)
            row = method.name
            if methods is None and not text_features(dataset) and _reads_text(method):
                continue  # a row of the text sets' features: on a set without text it is another row's run, or none
            if epochs is not None and "early_stopping_patience=0" not in row:
                method = method.with_overrides(epochs=epochs)
            specs += [RunSpec(dataset, method, seed, row) for seed in range(seeds or experiment.seeds)]
    return specs


def _reads_text(method) -> bool:
    """Whether a method sets a text option (its overrides or its preset, as `recommended_text`'s embedding)."""
    if set(dict(method.overrides)) & set(TEXT_CONFIG_FIELDS):
        return True
    return method.kind == "cdgt" and bool(method.config().text_embedding)
