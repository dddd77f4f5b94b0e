"""Named benchmark methods: CDGTConfig variants (a preset plus `key=value` overrides) and the peer libraries.

A name is a base method, optionally with overrides in brackets: "cdgt", "rarity_bce", "cdgt[alpha=0.3]",
"cdgt[n_players=5,schedule=simultaneous]"; tuple values use ":" ("cdgt[head_hidden=512:256]", empty = none).
Overrides equal to the base's own values are dropped, so "cdgt[alpha=0.5]" is "cdgt" and their runs are shared;
a "cdgt[...]" or "recommended[...]" whose config is exactly another preset's (ALIASES) takes that preset's name, so
its runs are shared too.

Example:
    >>> resolve("cdgt[alpha=0.3]").config(seed=1).alpha
    0.3
    >>> resolve("cdgt[alpha=0.5]").name
    'cdgt'
    >>> resolve("cdgt[alpha=2,beta=0,correctness=log_positives,rarity=inverse_sqrt,thresholds=shrunk,dropout=0.5,"
    ...         "early_stopping_metric=p_at_5,encoder_hidden=512,head_hidden=,lr_schedule=cosine,epochs=10,"
    ...         "learning_rate=0.006,min_steps_per_epoch=100,prior_bias=true,neighbours=30,neighbour_space=both,"
    ...         "centroid_features=300,tail_memory=own,label_text=true,label_documents=true,warmup_fraction=0.05,"
    ...         "validation_objective=false,adam_epsilon=5.98e-5,adam_epsilon_per_label=true,"
    ...         "memory_list_cap=5000,threshold_shared_positives=20,label_epoch_growth=0.1]").name
    'recommended'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from cdgt_keras.config import CDGTConfig, parse_assignments
from cdgt_keras.text import TEXT_CONFIG_FIELDS

PEERS = ("omikuji", "omikuji_bonsai", "libmultilabel", "libmultilabel_tree")  # cdgt.bench.peers.PEERS


@dataclass(frozen=True)
class Base:
    """A base method: what it is, how it is built (a preset and overrides, or a peer library)."""

    label: str
    kind: str = "cdgt"  # cdgt, or a peer of PEERS
    preset: str | None = None
    overrides: tuple[str, ...] = ()


_N1 = ("n_players=1", "alpha=0", "beta=0")
BASES: dict[str, Base] = {
    "cdgt": Base("CD-GTMLL, the paper's literal form (CDGTConfig() = preset paper: N=3, alpha 0.5, beta 0.2, KL, "
                 "cyclic)"),
    "bce": Base("N=1 plain BCE", overrides=_N1),
    "single_predictor": Base("variant B: N=1 rarity-weighted BCE (w = 1/(1+freq))", preset="single_predictor"),
    "no_curiosity": Base("variant A: N=3, alpha=0", preset="no_curiosity"),
    "focal": Base("N=1 focal loss (gamma 2)", overrides=(*_N1, "payoff=focal")),
    "asl": Base("N=1 asymmetric loss (ASL)", overrides=(*_N1, "payoff=asl")),
    "rarity_bce": Base("the bar (SPEC 5a): N=1 BCE weighted by freq^-1/2", preset="rarity_bce"),
    "paper": Base("the paper's literal form (preset paper)", preset="paper"),
    "recommended": Base("CD-GTMLL, the shipped default (preset recommended: N=3, cyclic, BCE payoff, alpha 2 x "
                        "log-scoring curiosity on rare positives, beta 0; 512-unit encoder, prior output biases, "
                        "dropout 0.5, step 6e-3 warmed up over 5 % of the steps, then a cosine decay, 10 epochs "
                        "of >= 100 steps, early stop on P@5; neighbour votes of the 30 nearest training rows by "
                        "TF-IDF and by the encoder's output, label centroids of 300 features and label texts "
                        "(each label's name, and its own training record where it names one), each weighted as "
                        "validation P@5 picks; shrunk thresholds, the pooled one for labels of >= 20 validation "
                        "positives; Adam's epsilon 5.98e-5 / L)",
                        preset="recommended"),
    "recommended_text": Base("CD-GTMLL, the shipped default for raw text (preset recommended_text: recommended with "
                             "a sentence embedding of each text, all-MiniLM-L6-v2 to 128 and to 32 word pieces, "
                             "before the TF-IDF columns; a 384-unit encoder, epochs of one pass (no 100-step "
                             "minimum); every player's wide linear part on the embedding; alpha 1; "
                             "logits adjusted by 2 x log propensity; the tail deciding apart; propensity re-ranking "
                             "below each row's first label within 0.3 points of validation P@5)",
                             preset="recommended_text"),
    "omikuji": Base("Omikuji 0.5.2, Parabel settings", kind="omikuji"),
    "omikuji_bonsai": Base("Omikuji 0.5.2, Bonsai settings (unbalanced 100-means, depth 3)", kind="omikuji_bonsai"),
    "libmultilabel": Base("LibMultiLabel 0.10.0 linear one-vs-rest (LIBLINEAR)", kind="libmultilabel"),
    "libmultilabel_tree": Base("LibMultiLabel 0.10.0 tree (train_tree: degree 100, depth <= 10, beam 10)",
                               kind="libmultilabel_tree"),
}
# Presets a plain "cdgt[...]" resolves to when its config equals theirs exactly (the research grid's finalist is
# the shipped default: one name, one set of runs).
ALIASES = ("recommended", "recommended_text")
_NAME = re.compile(r"^(?P<base>[a-z_0-9]+)(\[(?P<args>[^\]]*)\])?$")


@dataclass(frozen=True)
class Method:
    """A resolved method: canonical name, base, and the typed overrides on top of the base's config."""

    name: str
    base: str
    overrides: tuple[tuple[str, Any], ...] = ()

    @property
    def kind(self) -> str:
        return BASES[self.base].kind

    @property
    def label(self) -> str:
        extra = ", ".join(f"{k}={_fmt(v)}" for k, v in self.overrides)
        return BASES[self.base].label + (f"; {extra}" if extra else "")

    def config(self, seed: int = 0) -> CDGTConfig:
        """The CDGTConfig of this method (peers use it for thresholds and evaluation settings only)."""
        return base_config(self.base).replace(**dict(self.overrides), seed=seed)

    def with_overrides(self, **changes: Any) -> Method:
        """The same method with more overrides (e.g. epochs for a profile); peers are returned unchanged."""
        if self.kind != "cdgt":
            return self
        return resolve(_compose(self.base, {**dict(self.overrides), **changes}))


def base_config(base: str) -> CDGTConfig:
    """The base's config: its preset (or the defaults) plus its own overrides."""
    spec = BASES[base]
    config = CDGTConfig.preset(spec.preset) if spec.preset else CDGTConfig()
    return config.with_overrides(list(spec.overrides))


def resolve(name: str) -> Method:
    """Parse "base[key=value,...]" into a canonical Method; errors name the bad part."""
    match = _NAME.match(name.strip())
    if not match or match["base"] not in BASES:
        raise ValueError(f"unknown method {name!r}; bases: {sorted(BASES)} (overrides as cdgt[alpha=0.3])")
    base, args = match["base"], match["args"] or ""
    assignments = [a.replace(":", ",") for a in args.split(",") if a.strip()]
    peer_fields = {a.split("=", 1)[0].strip() for a in assignments} - set(TEXT_CONFIG_FIELDS)
    if BASES[base].kind != "cdgt" and peer_fields:
        raise ValueError(f"method {name!r}: a peer takes only the text features' options "
                         f"({', '.join(TEXT_CONFIG_FIELDS)}), not {', '.join(sorted(peer_fields))}")
    reference = base_config(base)
    try:
        typed = parse_assignments(assignments)
        applied = reference.replace(**typed)  # validates the values now, not in the middle of a benchmark
    except ValueError as err:
        raise ValueError(f"method {name!r}: {str(err).removeprefix('--set ')}") from None
    kept = {k: getattr(applied, k) for k in typed if getattr(applied, k) != getattr(reference, k)}
    if base in ("cdgt", *ALIASES) and kept:
        alias = next((a for a in ALIASES if a != base and applied == base_config(a)), None)
        if alias:
            return Method(alias, alias)
    return Method(_compose(base, kept), base, tuple(sorted(kept.items())))


def split_names(text: str) -> list[str]:
    """Split a comma-separated method list, keeping commas inside brackets: "a,b[x=1,y=2]" -> ["a", "b[x=1,y=2]"]."""
    out, depth, current = [], 0, ""
    for char in text:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            out.append(current)
            current = ""
        else:
            current += char
    return [n.strip() for n in [*out, current] if n.strip()]


def _fmt(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ":".join(str(v) for v in value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def _compose(base: str, overrides: dict[str, Any]) -> str:
    inner = ",".join(f"{k}={_fmt(v)}" for k, v in sorted(overrides.items()))
    return f"{base}[{inner}]" if inner else base
