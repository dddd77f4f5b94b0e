"""`cdgt train`: the fast path without TFX. Same data, model code and metrics as the pipeline.

Trains CDGTModel on the train split (early stopping on validation), tunes thresholds on validation, reports
on test, and writes the run directory:
    model.keras  config.json  thresholds.json  metrics.json  history.json  logs/ (TensorBoard)
    data.json (feature kind, input width, label names)  featurizer.json (raw input -> features: vocabulary and
    document frequencies for text, mean and variance for dense)
The last two are what `cdgt export` needs to serve raw input (serving/export.py). While training, checkpoint/
holds the last completed epoch's state, from which `cdgt train --resume` continues a killed run exactly.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from cdgt.pipeline.datasets import EMBEDDED
from cdgt_keras.cadence import CHECKPOINT_EVERY_SECONDS
from cdgt_keras.config import CDGTConfig
from cdgt_keras.data import MultiLabelData
from cdgt_keras.files import atomic_write, write_json
from cdgt_keras.training import fit_model  # the one training road, shared with the benchmarks

CHECKPOINT_DIR = "checkpoint"  # in a run directory: the last epoch's training state, until the run completes
RUN_FILE = "run.json"  # in CHECKPOINT_DIR: the fingerprint of the data the run trains on


def load_embedded(name: str, seed: int = 0) -> dict[str, MultiLabelData]:
    """The embedded default data: train / validation / test splits from the synthetic generator."""
    if name not in EMBEDDED:
        raise ValueError(f"--dataset {name!r} is not known; choose one of {sorted(EMBEDDED)}")
    from cdgt.components.synthetic_source import DEFAULT_SIZE  # the size `cdgt run` writes: the same data on both paths
    from cdgt_keras.synthetic import synthetic_splits

    return synthetic_splits(**DEFAULT_SIZE, seed=seed, **EMBEDDED[name])


def load_data(data_dir: str | Path | None, dataset: str, config: CDGTConfig) -> dict[str, MultiLabelData]:
    """Splits from a built data directory as model features (cdgt_keras.featurizer, fitted on train), or an
    embedded data set."""
    return load_features(data_dir, dataset, config)[0]


def load_features(data_dir: str | Path | None, dataset: str,
                  config: CDGTConfig) -> tuple[dict[str, MultiLabelData], Any]:
    """`load_data` and the fitted `cdgt_keras.featurizer.Featurizer` (raw -> features), which serving needs.

    Embedded data sets are already model features: their featurizer passes them through (sparse) or is None.
    """
    if data_dir is None:
        return load_embedded(dataset, seed=config.seed), None
    from cdgt_keras.featurizer import Featurizer
    from cdgt_keras.label_text import label_features
    from cdgt_keras.records import read_manifest, read_splits
    from cdgt_keras.text import TextOptions

    manifest = read_manifest(data_dir)
    splits = read_splits(data_dir)
    featurizer = Featurizer.fit(manifest["feature_kind"], splits["train"].features, TextOptions.from_config(config),
                                manifest.get("feature_names"))
    labels = label_features(featurizer, splits["train"].label_names)
    embedded = featurizer.text.embedding_width if featurizer.kind == "text" else 0
    splits = {name: MultiLabelData(featurizer.transform(data.features), data.labels, data.label_names, labels,
                                   data.ids, embedded) for name, data in splits.items()}
    return splits, featurizer


def run_training(config: CDGTConfig, splits: dict[str, MultiLabelData], output: str | Path, *,
                 verbose: int = 1, featurizer: Any = None, resume: bool = False,
                 checkpoint_every: float = CHECKPOINT_EVERY_SECONDS) -> dict[str, Any]:
    """Train, tune, evaluate and write the run directory; returns the metrics dict written to metrics.json.
    `featurizer`: what made the features from raw input (from `load_features`), stored for serving.

    An epoch end checkpoints the training in `output`/checkpoint/ (with the data's fingerprint, run.json) once
    `checkpoint_every` seconds have passed since the last checkpoint (0: every epoch); `resume` continues a
    killed run from there, on the same data only (a ValueError otherwise). The checkpoint is removed once
    metrics.json, the last file, is written."""
    import keras
    import numpy as np
    import scipy.sparse as sp

    from cdgt_keras.checkpoint import clear
    from cdgt_keras.evaluation import evaluate_model
    from cdgt_keras.labels import label_frequencies

    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    config.save(output / "config.json")
    ckpt = output / CHECKPOINT_DIR
    _start_or_check_run(ckpt, splits, resume)
    train, validation, test = splits["train"], splits["validation"], splits["test"]
    counts, _ = label_frequencies(train.labels, train.num_labels)
    model, history, train_seconds = fit_model(
        config, train, validation, callbacks=[keras.callbacks.TensorBoard(str(output / "logs"))],
        progress=progress_bar if verbose else None, checkpoint_dir=ckpt, resume=resume,
        checkpoint_every=checkpoint_every)
    started = time.perf_counter()
    evaluation = evaluate_model(model, validation, test, counts, train.num_examples, config)
    atomic_write(output / "model.keras", lambda tmp: model.save(tmp), suffix=".keras")
    metrics = {
        **{f"{row}/{key}": value for row, values in evaluation.report.items() for key, value in values.items()},
        **evaluation.report["overall"],
        "train_seconds": train_seconds,
        "evaluate_seconds": time.perf_counter() - started,
        "epochs_run": len(history.history.get("loss", [])),
        "num_train": train.num_examples,
        "num_test": test.num_examples,
        "num_labels": train.num_labels,
        "num_labels_without_train_positive": int((counts == 0).sum()),
        "num_head_labels": int(evaluation.head_labels.size),
        "num_tail_labels": int(evaluation.tail_labels.size),
        "rerank_exponent": float(model.rerank_exponent.numpy()) if getattr(model, "rerank_exponent", None) is not None
        else 0.0,  # the propensity re-ranking the ranking's metrics read (config rerank_slack; 0: none)
    }
    write_json(output / "thresholds.json", {"mode": config.thresholds,
                                             "thresholds": np.asarray(evaluation.thresholds).tolist()})
    write_json(output / "history.json", {k: [float(v) for v in vs] for k, vs in history.history.items()})
    kind = featurizer.kind if featurizer is not None else ("sparse" if sp.issparse(train.features) else "dense")
    write_json(output / "data.json", {"feature_kind": kind, "input_width": int(train.num_features),
                                       "label_names": list(train.label_names)})
    if featurizer is not None:
        write_json(output / "featurizer.json", featurizer.to_dict())
    write_json(output / "metrics.json", {"report": evaluation.report, **metrics})  # last: the run is complete
    clear(str(ckpt))
    return {"report": evaluation.report, **metrics}


def _start_or_check_run(ckpt: Path, splits: dict[str, MultiLabelData], resume: bool) -> None:
    """A new run records its data's fingerprint next to its checkpoint; a resumed one must train on the same data
    (the config is checked before the data loads, in pipeline/cli/train.py)."""
    from cdgt_keras.resume import data_fingerprint

    key, path = data_fingerprint(splits), ckpt / RUN_FILE
    if resume and path.is_file():
        started = json.loads(path.read_text())["data"]
        if started != key:
            raise ValueError(f"--resume: the run in {ckpt.parent} was trained on other data (fingerprint {started}, "
                             f"these splits {key}); pass the same --data/--dataset, or --overwrite to start again")
        return
    ckpt.mkdir(parents=True, exist_ok=True)
    write_json(path, {"data": key})


def progress_bar(start: int = 0):  # a factory, so that keras and tqdm load only when training runs
    """A tqdm bar over all training steps with the headline game terms; one summary line per epoch. `start`:
    epochs a resumed run had completed before (the bar starts there)."""
    import keras
    from tqdm.auto import tqdm

    class _ProgressBar(keras.callbacks.Callback):
        shown = ("payoff", "potential", "val_payoff", "val_p_at_1", "val_psp_at_5")

        def on_train_begin(self, logs=None):
            steps = self.params.get("steps") or 0
            self.bar = tqdm(total=steps * self.params["epochs"], initial=steps * start, unit="step",
                            dynamic_ncols=True, leave=False)

        def on_train_batch_end(self, batch, logs=None):
            self.bar.update(1)

        def on_epoch_end(self, epoch, logs=None):
            logs = logs or {}
            values = "  ".join(f"{k} {logs[k]:.4f}" for k in self.shown if k in logs)
            self.bar.write(f"epoch {epoch + 1}/{self.params['epochs']}  {values}")

        def on_train_end(self, logs=None):
            self.bar.close()

    return _ProgressBar()
