"""Fault-tolerant training: save the full training state at an epoch end, resume from it after a crash.

Why not keras.callbacks.BackupAndRestore alone: its weights file does hold every optimizer (the shared one and
CDGTModel's `player_optimizers`, checked), but not the dropout RNG state (SeedGenerator variables are not
weights) nor EarlyStopping's progress, and it writes weights and epoch number in two non-atomic steps. A resumed
run therefore drifts from an uninterrupted one. This checkpoint stores, atomically per epoch:
weights + optimizer state (`model.save_weights`), seed-generator states, the epoch, EarlyStopping's wait/best
and its best weights, and the weight averaging's mean so far (cdgt_keras.averaging). With a data order that
depends only on (seed, epoch), a killed and resumed run ends with the same weights as an uninterrupted one.

How often: at the end of an epoch once `every_seconds` have passed since the last checkpoint or the training's
start (cdgt_keras.cadence: why, and the default); 0 checkpoints at every epoch's end.

Example:
    >>> start = restore(model, ckpt_dir, early_stopping)  # doctest: +SKIP
    >>> model.fit(ds, initial_epoch=start, epochs=cfg.epochs,
    ...           callbacks=[early_stopping, TrainingCheckpoint(ckpt_dir, early_stopping)])  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import keras
import numpy as np

from cdgt_keras.cadence import CHECKPOINT_EVERY_SECONDS, Cadence

STATE_FILE = "state.json"


def _seed_variables(model: keras.Model) -> list[Any]:
    """The RNG state variables of every SeedGenerator in the model (dropout masks), in a stable order."""
    return [v for v in model.variables if "seed_generator" in v.path]


def completed_epochs(directory: str) -> int:
    """Epochs finished by the run that wrote `directory` (0 if none)."""
    path = os.path.join(directory, STATE_FILE)
    if not os.path.exists(path):
        return 0
    with open(path, encoding="utf-8") as handle:
        return int(json.load(handle)["epoch"])


def stopped_early(directory: str) -> bool:
    """Whether the run that wrote `directory` had been stopped early (nothing left to train)."""
    path = os.path.join(directory, STATE_FILE)
    if not os.path.exists(path):
        return False
    with open(path, encoding="utf-8") as handle:
        return bool(json.load(handle).get("stopped"))


def finish_without_training(model: keras.Model, early_stopping: keras.callbacks.EarlyStopping | None,
                            averaging: Any = None) -> None:
    """When a resumed run has no epoch left, do what the weight averaging's and EarlyStopping's on_train_end would
    have done."""
    if averaging is not None:
        averaging.finish(model)
    state = getattr(early_stopping, "cdgt_restored_state", None)
    if early_stopping is not None and early_stopping.restore_best_weights and state and state[3] is not None:
        model.set_weights(state[3])


def restore(model: keras.Model, directory: str, early_stopping: keras.callbacks.EarlyStopping | None = None,
            averaging: Any = None) -> int:
    """Load the last checkpoint into a built model (and `averaging`, a cdgt_keras.averaging.WeightAveraging, its
    mean so far); return the epoch to resume at (0 = fresh start)."""
    path = os.path.join(directory, STATE_FILE)
    if not os.path.exists(path):
        return 0
    with open(path, encoding="utf-8") as handle:
        state = json.load(handle)
    model.load_weights(os.path.join(directory, state["weights"]))
    for var, value in zip(_seed_variables(model), state["seeds"]):
        var.assign(np.asarray(value, dtype=var.dtype))
    if early_stopping is not None and state.get("early_stopping"):
        es, best_weights = state["early_stopping"], None
        if state.get("best"):
            best_weights = _load_arrays(os.path.join(directory, state["best"]))
        # EarlyStopping.on_train_begin resets its progress; TrainingCheckpoint puts this back at the first epoch.
        first = es.get("first_rows")
        early_stopping.cdgt_restored_state = (es["wait"], es["best"], es["best_epoch"], best_weights,
                                              None if first is None else np.asarray(first, np.float64))
    if averaging is not None and state.get("averaged"):
        averaging.restore(state["averaged"], _load_arrays(os.path.join(directory, state["mean"])))
    return int(state["epoch"])


def resume_epoch(model: keras.Model, directory: str, early_stopping: keras.callbacks.EarlyStopping | None,
                 epochs: int, averaging: Any = None) -> int:
    """`restore` the last checkpoint in `directory` into `model` and return the epoch to resume at: `epochs` or more
    when the run had been stopped early (nothing left to train), else restore's epoch (0 = fresh start). The one
    resume rule of `cdgt train` and the TFX Trainer."""
    start = epochs if stopped_early(directory) else 0
    return max(start, restore(model, directory, early_stopping, averaging))


class TrainingCheckpoint(keras.callbacks.Callback):
    """Write the training state to `directory` at the end of an epoch once `every_seconds` have passed since the
    last write (or the training's start; 0: every epoch), atomically: a new state.json is renamed into place only
    after its weights file is complete. The best weights' file is rewritten only when they changed."""

    def __init__(self, directory: str, early_stopping: keras.callbacks.EarlyStopping | None = None,
                 averaging: Any = None, every_seconds: float = CHECKPOINT_EVERY_SECONDS):
        super().__init__()
        self.directory = directory
        self.early_stopping = early_stopping
        self.averaging = averaging
        self.cadence = Cadence(every_seconds)
        self._best_written: int | None = None  # the epoch whose best weights were last written

    def on_train_begin(self, logs: dict | None = None) -> None:
        self.cadence.restart()

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        es = self.early_stopping
        state = getattr(es, "cdgt_restored_state", None)
        if state is not None:  # after EarlyStopping.on_train_begin has reset it
            es.wait, es.best, es.best_epoch, es.best_weights, first_rows = state
            if hasattr(es, "first_rows"):  # cdgt_keras.stopping.EarlyStopping's test against the first epoch
                es.first_rows = first_rows
            es.cdgt_restored_state = None
            self._best_written = es.best_epoch if es.best_weights is not None else None  # restored from that file

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if self.cadence.due():
            self.write(epoch)

    def write(self, epoch: int) -> None:
        """Write the state after epoch `epoch` (0-based). Every file is new (named by its epoch) and state.json,
        renamed into place last, names the ones it goes with, so a kill at any point leaves a consistent set;
        the files it no longer names are removed after it."""
        os.makedirs(self.directory, exist_ok=True)
        weights = f"epoch{epoch + 1}.weights.h5"
        self.model.save_weights(os.path.join(self.directory, weights), overwrite=True)
        state: dict[str, Any] = {"epoch": epoch + 1, "weights": weights, "stopped": bool(self.model.stop_training),
                                 "seeds": [np.asarray(v).tolist() for v in _seed_variables(self.model)]}
        es = self.early_stopping
        if es is not None:
            best = None if es.best is None else float(es.best)
            state["early_stopping"] = {"wait": int(es.wait), "best": best, "best_epoch": int(es.best_epoch)}
            if getattr(es, "first_rows", None) is not None:
                state["early_stopping"]["first_rows"] = es.first_rows.tolist()
            if es.best_weights is not None:
                state["best"] = f"best_epoch{es.best_epoch + 1}.npz"
                if es.best_epoch != self._best_written:  # else that file is already there
                    _save_arrays(self.directory, state["best"], es.best_weights)
                    self._best_written = es.best_epoch
        if self.averaging is not None and self.averaging.count:
            count, mean = self.averaging.state()
            state["averaged"], state["mean"] = count, f"averaged_epoch{epoch + 1}.npz"
            _save_arrays(self.directory, state["mean"], mean)
        tmp = os.path.join(self.directory, STATE_FILE + ".tmp")
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(state, handle)
        os.replace(tmp, os.path.join(self.directory, STATE_FILE))
        kept = {state[key] for key in ("weights", "best", "mean") if key in state}
        for name in os.listdir(self.directory):
            if name.endswith((".weights.h5", ".npz")) and name not in kept:
                os.remove(os.path.join(self.directory, name))


def _save_arrays(directory: str, name: str, arrays: list[Any]) -> None:
    """Write `arrays` to directory/name as an npz (w0, w1, ...) whole or not at all: a temporary file, then a
    rename over the old one, so that a run killed while writing leaves the previous file."""
    tmp = os.path.join(directory, "tmp_" + name)
    np.savez(tmp, **{f"w{i}": np.asarray(a) for i, a in enumerate(arrays)})
    os.replace(tmp, os.path.join(directory, name))


def _load_arrays(path: str) -> list[np.ndarray]:
    """The arrays `_save_arrays` wrote, in their order."""
    with np.load(path) as data:
        return [data[f"w{i}"] for i in range(len(data.files))]


def clear(directory: str) -> None:
    """Remove a finished run's checkpoint (nothing left to resume)."""
    shutil.rmtree(directory, ignore_errors=True)
