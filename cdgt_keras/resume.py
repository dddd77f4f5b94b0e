"""Resuming a training exactly where it stopped, on both roads (`cdgt train` and the TFX Trainer).

checkpoint.py saves the model's state at every epoch end (weights, every optimizer, the dropout RNG,
early stopping). What else a resumed run needs to end where an uninterrupted run ends is here:
- `epoch_batches`: the training batches of epochs start..end-1, each epoch shuffled with a seed of
  (seed, epoch, pass) only, never by a stateful iterator, so epoch e is the same wherever a run starts;
- `EpochHistory` (`cdgt train`): the per-epoch logs kept next to the checkpoint, so that history.json and
  `epochs_run` cover the whole run, not only its last attempt;
- `data_fingerprint` (`cdgt train`): a hash of the splits, so that --resume refuses to continue on other data.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from pathlib import Path
from typing import Any

import keras
import numpy as np
import scipy.sparse as sp
import tensorflow as tf

from cdgt_keras.files import write_json

HISTORY_FILE = "history.json"


def epoch_batches(examples: tf.data.Dataset, num_examples: int, batch_size: int, seed: int, start_epoch: int,
                  epochs: int, steps_per_epoch: int | None = None, buffer: int | None = None) -> tf.data.Dataset:
    """Batches of epochs start_epoch..epochs-1 of the unbatched `examples`, each shuffled with a seed of
    (seed, epoch, pass) only and batched on its own, so a run resumed at epoch k sees exactly the batches an
    uninterrupted run sees from epoch k on. An epoch of more steps than one pass has (`min_steps_per_epoch`) is
    that many batches of several such passes. `buffer` caps the shuffle window (default: the whole split).

        >>> ds = epoch_batches(tf.data.Dataset.range(10), 10, 4, seed=0, start_epoch=1, epochs=3)  # 2 epochs
    """
    buffer = max(1, min(num_examples, buffer or num_examples))
    per_pass = max(1, math.ceil(num_examples / batch_size))
    passes = max(1, math.ceil((steps_per_epoch or per_pass) / per_pass))

    def epoch(e: int) -> tf.data.Dataset:
        runs = [examples.shuffle(buffer, seed=seed * 100_003 + e + 1_000_003 * p, reshuffle_each_iteration=False)
                .batch(batch_size) for p in range(passes)]
        ds = functools.reduce(lambda a, b: a.concatenate(b), runs)
        return ds.take(steps_per_epoch) if passes > 1 else ds

    per_epoch = [epoch(e) for e in range(start_epoch, epochs)]
    if not per_epoch:
        return examples.take(0).batch(batch_size)
    return functools.reduce(lambda a, b: a.concatenate(b), per_epoch)


class EpochHistory(keras.callbacks.Callback):
    """The logs of every epoch of a run across its attempts, in `directory`/history.json.

    The epochs before `start` come from the file an earlier attempt wrote; each new epoch is appended and the
    file rewritten atomically at the epoch's end. It runs before TrainingCheckpoint, so the checkpoint never
    claims an epoch the file lacks (the file may hold one epoch more: `start` cuts it off). `.history` is what
    keras' History gives, for the whole run.
    """

    def __init__(self, directory: str | Path, start: int = 0):
        super().__init__()
        self.path = Path(directory) / HISTORY_FILE
        earlier = json.loads(self.path.read_text()) if start and self.path.exists() else {}
        self.history: dict[str, list[float]] = {key: values[:start] for key, values in earlier.items()}

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        for key, value in (logs or {}).items():
            self.history.setdefault(key, []).append(float(value))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_json(self.path, self.history)


def data_fingerprint(splits: dict[str, Any]) -> str:
    """A short sha256 of every split's features, labels and label names (what a resumed run must train on)."""
    digest = hashlib.sha256()
    for name in sorted(splits):
        data = splits[name]
        digest.update(json.dumps([name, list(data.label_names)]).encode())
        for part in (data.features, data.labels):
            digest.update(str(part.shape).encode())
            if sp.issparse(part):
                csr = sp.csr_matrix(part)
                for array in (csr.indptr, csr.indices, csr.data):
                    digest.update(np.ascontiguousarray(array).tobytes())
            else:
                digest.update(np.ascontiguousarray(part).tobytes())
    return digest.hexdigest()[:16]
