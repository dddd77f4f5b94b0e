"""Early stopping whose best weights are copied on the device, not to NumPy.

Keras' EarlyStopping keeps the best epoch's weights as `model.get_weights()`: a new NumPy copy of every weight at each
better epoch (on debtags the 100k x 512 encoder and the remembered training rows, about 230 MB, some ten times a
run: 4 s of a 50 s training). `EarlyStopping` here decides exactly as Keras' does and keeps the best weights in
variables of their own, allocated once and overwritten by one assign per weight; `best_weights` is then that list
of variables (NumPy reads it as arrays, so the checkpoint of `cdgt train --resume` saves it unchanged) or, after a
resume, the list of arrays it was restored from.

    >>> import keras, numpy as np
    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, use_bias=False)])
    >>> stop = EarlyStopping(monitor="val_p_at_5", mode="max", patience=1, restore_best_weights=True)
    >>> stop.set_model(model); stop.on_train_begin()
    >>> for epoch, score in enumerate([0.3, 0.5, 0.4]):
    ...     model.set_weights([np.full((1, 1), epoch, "float32")])
    ...     stop.on_epoch_end(epoch, {"val_p_at_5": score})
    >>> stop.on_train_end(); float(model.get_weights()[0][0, 0]), stop.best_epoch   # epoch 1's weights are back
    (1.0, 1)

With `min_z` > 0 a later epoch's weights replace the kept ones only when the paired test of its validation rows
against the first epoch's says it is better by `min_z` standard errors (`paired_z`): on a small validation split
a later epoch can win by noise alone (bibtex's 452 rows: bench/learner_notes.md, rounds 67-68). When to stop is
decided as before, on the metric's mean.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras
import numpy as np


def variable_copies(weights: list[Any], prefix: str) -> list[Any]:
    """A non-trainable variable holding a copy of each of `weights`' values, named `prefix`_i: storage that later
    copies overwrite with one assign each (best weights, a running mean, weights set aside).

        >>> [v.numpy().tolist() for v in variable_copies([keras.Variable([1.0, 2.0])], "best")]
        [[1.0, 2.0]]
    """
    return [keras.Variable(keras.ops.copy(w.value), trainable=False, name=f"{prefix}_{i}", dtype=w.dtype)
            for i, w in enumerate(weights)]


def paired_z(rows: np.ndarray, base: np.ndarray) -> float:
    """How many standard errors `rows`' mean lies above `base`'s, paired by example: the mean of the differences
    over their standard error (sample standard deviation / sqrt(n)); +-inf when every difference is the same
    non-zero number, 0 when none differs.

        >>> round(paired_z(np.array([0.4, 0.6, 0.2, 0.8]), np.array([0.2, 0.2, 0.2, 0.6])), 4)  # 0.2 / (0.1633 / 2)
        2.4495
    """
    diff = np.asarray(rows, np.float64) - np.asarray(base, np.float64)
    if diff.size == 0 or not diff.any():
        return 0.0
    spread = float(diff.std(ddof=1)) if diff.size > 1 else 0.0
    if spread == 0.0:
        return float(np.sign(diff.mean()) * np.inf)
    return float(diff.mean() / (spread / np.sqrt(diff.size)))


class EarlyStopping(keras.callbacks.EarlyStopping):
    """keras.callbacks.EarlyStopping (the same rule, the same attributes) with the best weights copied in place.

    `min_z` > 0 (with `rows`, a function giving the monitored metric's per-example values of the epoch just scored,
    their mean being the metric: cdgt_keras.metrics.ranking_rows) keeps a later epoch's weights only when
    `paired_z` of its rows against the first epoch's reaches `min_z`; `best` stays the best mean seen (what
    patience counts from), `best_epoch` names the weights kept."""

    _copies: list[Any] | None = None

    def __init__(self, *args: Any, min_z: float = 0.0, rows: Callable[[], np.ndarray | None] | None = None,
                 **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.min_z, self.rows = float(min_z), rows
        self.first_rows: np.ndarray | None = None  # the first epoch's rows (a checkpoint keeps them)

    def _significant(self, epoch: int) -> bool:
        """Whether epoch `epoch`'s weights may be kept: always without a test, else the first epoch's and those
        that beat the first by `min_z` standard errors."""
        if self.min_z <= 0 or self.rows is None:
            return True
        rows = self.rows()
        if rows is None:
            raise ValueError(f"early stopping with min_z={self.min_z}: no per-example rows of {self.monitor} "
                             f"were scored at epoch {epoch + 1}")
        if self.first_rows is None:
            self.first_rows = np.asarray(rows, np.float64).copy()
            return True
        return paired_z(rows, self.first_rows) >= self.min_z

    def _keep_best(self) -> list[Any]:
        """Copy every model weight into this callback's own variables (made at the first call) and return them."""
        weights = self.model.weights
        if self._copies is None or len(self._copies) != len(weights):
            self._copies = variable_copies(weights, "best")
        else:
            for copy, weight in zip(self._copies, weights):
                copy.assign(weight.value)
        return self._copies

    def on_train_begin(self, logs: dict | None = None) -> None:
        super().on_train_begin(logs)
        self.first_rows = None

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if self.monitor_op is None:
            self._set_monitor_op()  # after the model's metrics are built, as Keras does
        current = self.get_monitor_value(logs)
        if current is None or epoch < self.start_from_epoch:
            return
        improved = self._is_improvement(current, self.best)
        kept = self._significant(epoch)
        if self.restore_best_weights and self.best_weights is None and not improved:  # else kept just below
            self.best_weights, self.best_epoch = self._keep_best(), epoch
        self.wait += 1
        if improved:
            self.best = current
            if kept:
                self.best_epoch = epoch
                if self.restore_best_weights:
                    self.best_weights = self._keep_best()
            if self.baseline is None or self._is_improvement(current, self.baseline):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.model.stop_training = True

    def on_train_end(self, logs: dict | None = None) -> None:
        if self.restore_best_weights and self.best_weights is not None:
            for weight, best in zip(self.model.weights, self.best_weights, strict=True):
                weight.assign(best.value if isinstance(best, keras.Variable) else best)
