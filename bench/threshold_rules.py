"""`cdgt bench thresholds`: decision rules compared on the same probabilities (SPEC §4 and beyond).

One model per (data set, seed) of one method; its validation probabilities tune each rule's thresholds and the test
split is scored under each: Micro-F1, Macro-F1 and Rare-F1. A rule is "mode", "mode:k" (k = min_positives for
per_label / grouped, prior_positives for shrunk), and either with "@h": the labels with h or more validation
positives take the global tau (`threshold_shared_positives`). Results go to OUTPUT/thresholds/*.json, one per run,
so a rerun only prints (the table is the mean over seeds, then over data sets).

Example:
    >>> parse_rule("shrunk:20")
    ('shrunk', {'prior_positives': 20.0})
    >>> parse_rule("shrunk:10@20")
    ('shrunk', {'prior_positives': 10.0, 'shared_positives': 20})
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from cdgt.bench.verdicts import md_table

RULES = ("per_label:5", "per_label:10", "per_label:20", "global", "grouped:5", "shrunk:5", "shrunk:10", "shrunk:20",
         "shrunk:50")
METRICS = ("micro_f1", "macro_f1", "rare_f1")


def parse_rule(rule: str) -> tuple[str, dict[str, float | int]]:
    """The mode and `tune_thresholds` options of a rule ("shrunk:10@20" -> prior_positives 10, shared_positives
    20); ValueError for an unknown mode or a number that is not one."""
    from cdgt_keras.thresholds import MODES

    head, _, shared = rule.partition("@")
    mode, _, k = head.partition(":")
    if mode not in MODES:
        raise ValueError(f"unknown threshold rule {rule!r}; modes: {', '.join(MODES)} (optionally mode:k, then @h)")
    options: dict[str, float | int] = {}
    try:
        if k:
            options.update({"prior_positives": float(k)} if mode == "shrunk" else {"min_positives": int(k)})
        if shared:
            options["shared_positives"] = int(shared)
    except ValueError:
        raise ValueError(f"threshold rule {rule!r}: k and h must be numbers (mode:k@h)") from None
    return mode, options


def score_rules(val_probs: np.ndarray, val_labels: Any, test_probs: np.ndarray, test_labels: Any,
                tail: np.ndarray, rules: tuple[str, ...] = RULES) -> dict[str, dict[str, float]]:
    """{rule: {micro_f1, macro_f1, rare_f1}} on test, thresholds tuned on validation by each rule."""
    from cdgt_keras import metrics as M
    from cdgt_keras.thresholds import apply_thresholds, tune_thresholds

    out = {}
    for rule in rules:
        mode, options = parse_rule(rule)
        pred = apply_thresholds(test_probs, tune_thresholds(val_probs, val_labels, mode=mode, **options))
        out[rule] = {"micro_f1": M.micro_f1(test_labels, pred), "macro_f1": M.macro_f1(test_labels, pred),
                     "rare_f1": M.rare_f1(test_labels, pred, tail)}
    return out


def run_one(dataset: str, method: str, seed: int, out_dir: Path, rules: tuple[str, ...] = RULES,
            epochs: int | None = None) -> dict[str, Any]:
    """Train `method` on `dataset` with `seed` (or read the earlier result) and score every rule."""
    from cdgt.bench.methods import resolve

    resolved = resolve(method) if epochs is None else resolve(method).with_overrides(epochs=epochs)
    name = resolved.name
    path = out_dir / f"{dataset}__{name}__s{seed}.json"
    if path.is_file():
        cached = json.loads(path.read_text())
        if set(rules) <= set(cached["rules"]):
            return cached
    import keras

    from cdgt.bench.datasets import load_dataset
    from cdgt.bench.runner import write_json
    from cdgt_keras.evaluation import answer_scorer, predict_answers
    from cdgt_keras.labels import head_tail_split, label_frequencies
    from cdgt_keras.training import fit_model

    config = resolved.config(seed)
    data = load_dataset(dataset, features=config)  # the method's own text features (the runner's road)
    train, validation, test = (data.splits[s] for s in ("train", "validation", "test"))
    model, _, _ = fit_model(config, train, validation)
    # the F1 metrics read the decisions' scores: the model's own when its tail decides apart (tail_decisions="own")
    score = answer_scorer(model)
    val_probs, test_probs = (_deciding(*predict_answers(model, s, config.batch_size, score))
                             for s in (validation, test))
    _, freq = label_frequencies(train.labels, train.num_labels)
    _, tail = head_tail_split(freq, config.head_fraction, config.tail_fraction)
    result = {"dataset": dataset, "method": name, "seed": seed, "config": config.to_dict(),
              "rules": score_rules(val_probs, validation.labels, test_probs, test.labels, tail, rules)}
    write_json(path, result)
    del model
    keras.backend.clear_session()
    return result


def _deciding(ranking: np.ndarray, deciding: np.ndarray | None) -> np.ndarray:
    """The scores decisions are read from: `deciding`, or the ranking's when None (`predict_answers`)."""
    return ranking if deciding is None else deciding


def table(results: list[dict[str, Any]], rules: tuple[str, ...] = RULES) -> str:
    """Markdown: a row per rule, Micro / Macro / Rare-F1 (percent) per data set (mean over seeds) and their mean."""
    datasets = sorted({r["dataset"] for r in results})
    rows = []
    for rule in rules:
        per_set = [np.mean([[r["rules"][rule][m] for m in METRICS] for r in results if r["dataset"] == d], axis=0)
                   * 100 for d in datasets]
        rows.append([f"`{rule}`", *(" / ".join(f"{v:.1f}" for v in values)
                                   for values in [*per_set, np.mean(per_set, axis=0)])])
    return "\n".join(md_table(["rule", *(f"{d} Micro / Macro / Rare" for d in datasets), "mean"], rows))
