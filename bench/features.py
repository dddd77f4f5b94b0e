"""`cdgt bench features`: which text choices measure best, on a text data set, with a fast peer on every choice.

Each setting is a set of the featurizer's text options (`text_ngrams`, `text_min_df`, `text_sublinear_tf`,
`text_identifier_parts`, `vocabulary_size`); the same built splits are featurized under each and the peer
(Omikuji by default) is trained and scored on them, thresholds tuned on validation with the shipped rule. One JSON
per (setting, seed) in OUTPUT/features/.

Example:
    >>> SETTINGS["unigram-20k"]["text_ngrams"], SETTINGS["bigram-100k-sublinear-parts"]["text_identifier_parts"]
    (1, True)
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from cdgt.bench.verdicts import md_table
from cdgt_keras.config import CDGTConfig
from cdgt_keras.metrics import HEADLINE_METRICS

_PLAIN = {"text_identifier_parts": False}
SETTINGS: dict[str, dict[str, Any]] = {
    "unigram-20k": {"text_ngrams": 1, "text_min_df": 1, "text_sublinear_tf": False, "vocabulary_size": 20000,
                    **_PLAIN},
    "unigram-20k-sublinear": {"text_ngrams": 1, "text_min_df": 1, "text_sublinear_tf": True,
                              "vocabulary_size": 20000, **_PLAIN},
    "bigram-100k": {"text_ngrams": 2, "text_min_df": 2, "text_sublinear_tf": False, "vocabulary_size": 100000,
                    **_PLAIN},
    "bigram-100k-sublinear": {"text_ngrams": 2, "text_min_df": 2, "text_sublinear_tf": True,
                              "vocabulary_size": 100000, **_PLAIN},
    "bigram-100k-sublinear-parts": {"text_ngrams": 2, "text_min_df": 2, "text_sublinear_tf": True,
                                    "vocabulary_size": 100000, "text_identifier_parts": True},
}
KEYS = tuple(HEADLINE_METRICS)


def run_setting(dataset: str, name: str, peer: str, cache_dir: Path | None = None) -> dict[str, Any]:
    """Featurize `dataset` under setting `name`, train `peer` (a peer, or a CD-GTMLL method such as `recommended`)
    on it and report the test metrics (thresholds: the method's rule; peers: the shipped preset's)."""
    from cdgt.bench.datasets import REPO, build_dataset, data_root
    from cdgt.bench.methods import resolve
    from cdgt.pipeline.train import load_data
    from cdgt_keras.evaluation import evaluate_probs
    from cdgt_keras.labels import label_frequencies

    method = resolve(peer)
    config = (method.config() if method.kind == "cdgt" else CDGTConfig.preset("recommended")).replace(
        **SETTINGS[name])
    directory = build_dataset(dataset, data_root(), cache_dir or REPO / "runs" / "bench-data")
    started = time.perf_counter()
    splits = load_data(directory, dataset, config)
    featurize_seconds = time.perf_counter() - started
    train, validation, test = splits["train"], splits["validation"], splits["test"]
    (val_scores, val_deciding), (test_scores, test_deciding), train_seconds = _fit_predict(method, config, splits)
    counts, _ = label_frequencies(train.labels, train.num_labels)
    report = evaluate_probs(val_scores, validation, test_scores, test, counts, train.num_examples,
                            config, val_deciding, test_deciding).report["overall"]
    return {"dataset": dataset, "setting": name, "options": SETTINGS[name], "peer": method.name,
            "input_width": int(train.num_features), "featurize_seconds": featurize_seconds,
            "train_seconds": train_seconds, **{k: report[k] for k in KEYS}}


def _fit_predict(method: Any, config: CDGTConfig, splits: dict[str, Any]) -> tuple[Any, Any, float]:
    """((validation scores, its decisions' or None), (the same of test), train seconds) of a peer or of CD-GTMLL
    under `config` (decisions' scores of their own: tail_decisions="own", `predict_answers`)."""
    if method.kind != "cdgt":
        from cdgt.bench.peers import fit_predict

        out = fit_predict(method.kind, splits)
        return (out.validation_scores, None), (out.test_scores, None), out.train_seconds
    from cdgt_keras.evaluation import answer_scorer, predict_answers
    from cdgt_keras.training import fit_model

    model, _, seconds = fit_model(config, splits["train"], splits["validation"])
    score = answer_scorer(model)
    return (predict_answers(model, splits["validation"], config.batch_size, score),
            predict_answers(model, splits["test"], config.batch_size, score), seconds)


def run_grid(dataset: str, peer: str, output: Path) -> list[dict[str, Any]]:
    """Every setting (a result already in OUTPUT/features/ is reused); returns the rows."""
    rows = []
    for name in SETTINGS:
        path = output / "features" / f"{dataset}__{peer}__{name}.json"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(run_setting(dataset, name, peer), indent=1) + "\n")
        rows.append(json.loads(path.read_text()))
    return rows


def format_rows(rows: list[dict[str, Any]]) -> list[str]:
    """A markdown table of the rows (percent)."""
    return md_table(["setting", "width", *KEYS, "train s"],
                    [[r["setting"], f"{r['input_width']:,}", *(f"{100 * r[k]:.2f}" for k in KEYS),
                      f"{r['train_seconds']:.1f}"] for r in rows])
