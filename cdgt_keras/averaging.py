"""Weight averaging: the model kept is the mean of its weights over the last steps of training.

Late in training, each step moves the weights around a region of low training loss rather than down into it; the
mean of the weights taken along those steps sits nearer the middle of that region, and predicts better than any one
of them (stochastic weight averaging: Izmailov et al. 2018; AttentionXML and LightXML average their extreme
classifiers' weights this way). `averaging_fraction` of the steps at the end of training (the training's planned
steps, `epochs` x steps per epoch) each give a snapshot every `averaging_every` steps, the last step's included,
and the trainable weights kept are their mean. Memory layers are not trained (they are filled after training) and
optimizer states are not weights: neither is averaged.

Validation sees the mean: at each epoch end after the first snapshot, the model holds the mean while the ranking
monitor scores it and early stopping keeps it (`SwapIn`, before them), and then the weights it trains on again
(`SwapOut`, after them, before the checkpoint, which saves both). When training ends the model holds the mean, or
early stopping's best weights, which are a mean too once averaging has begun.

Example (snapshots after steps 8 and 10 of 10: the last 40 % of the steps, one every 2 steps):
    >>> snapshot_steps(total=10, fraction=0.4, every=2)
    [8, 10]
    >>> snapshot_steps(total=10, fraction=0.0, every=2)   # off
    []
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np

from cdgt_keras.stopping import variable_copies


def snapshot_steps(total: int, fraction: float, every: int) -> list[int]:
    """The steps (1-based counts of completed steps) after which a snapshot is taken: the last step, and every
    `every`-th before it within the last round(fraction x total) steps."""
    window = round(fraction * total)
    if window <= 0 or total <= 0:
        return []
    return sorted(range(total, total - window, -max(1, int(every))))


class WeightAveraging:
    """The running mean of a model's trainable weights over `snapshot_steps`, and the callbacks that take the
    snapshots and put the mean in place for validation (`callbacks()`)."""

    def __init__(self, total_steps: int, fraction: float, every: int):
        self.steps = frozenset(snapshot_steps(int(total_steps), float(fraction), int(every)))
        self.count = 0  # snapshots in the mean so far
        self.mean: list[Any] | None = None  # the mean, one variable per trainable weight (made at the first snapshot)
        self._kept: list[Any] | None = None  # the weights training goes on from, while the mean is in place
        self._restored: tuple[int, list[np.ndarray]] | None = None
        self._swapped = False

    def snapshot(self, model: keras.Model) -> None:
        """Add the model's trainable weights to the mean: m <- m + (w - m) / (count + 1)."""
        weights = model.trainable_weights
        if self.mean is None:
            self.mean = variable_copies(weights, "mean")
        else:
            scale = 1.0 / (self.count + 1)
            for m, w in zip(self.mean, weights):
                m.assign_add((w.value - m.value) * scale)
        self.count += 1

    def swap_in(self, model: keras.Model) -> None:
        """Put the mean in place of the trainable weights, keeping those to train on (no-op before a snapshot)."""
        if not self.count or self._swapped:
            return
        weights = model.trainable_weights
        if self._kept is None:
            self._kept = variable_copies(weights, "kept")
        for k, w, m in zip(self._kept, weights, self.mean):
            k.assign(w.value)
            w.assign(m.value)
        self._swapped = True

    def swap_out(self, model: keras.Model) -> None:
        """Put back the weights training goes on from (no-op unless the mean is in place)."""
        if not self._swapped:
            return
        for w, k in zip(model.trainable_weights, self._kept):
            w.assign(k.value)
        self._swapped = False

    def state(self) -> tuple[int, list[np.ndarray]]:
        """(count, the mean as arrays): what a checkpoint saves."""
        return self.count, [np.asarray(m.numpy()) for m in (self.mean or [])]

    def restore(self, count: int, mean: list[np.ndarray]) -> None:
        """Continue from a checkpoint's `state()` (the variables are made when the model's weights are)."""
        self._restored = (int(count), list(mean))

    def _apply_restored(self, model: keras.Model) -> None:
        if self._restored is None:
            return
        count, mean = self._restored
        self._restored = None
        if count:
            self.mean = [keras.Variable(np.asarray(a, dtype=w.dtype), trainable=False, name=f"mean_{i}",
                                        dtype=w.dtype) for i, (a, w) in enumerate(zip(mean, model.trainable_weights))]
        self.count = count

    def finish(self, model: keras.Model) -> None:
        """The end of training: the model holds the mean (early stopping may then put its best weights back)."""
        self._apply_restored(model)
        self.swap_out(model)
        if self.count:
            for w, m in zip(model.trainable_weights, self.mean):
                w.assign(m.value)

    def callbacks(self) -> tuple[keras.callbacks.Callback, keras.callbacks.Callback]:
        """(SwapIn, SwapOut): SwapIn takes the snapshots and puts the mean in place at each epoch end, before the
        validation monitors and early stopping; SwapOut puts the training weights back after them."""
        return _SwapIn(self), _SwapOut(self)


class _SwapIn(keras.callbacks.Callback):
    def __init__(self, averaging: WeightAveraging):
        super().__init__()
        self.averaging = averaging

    def on_train_begin(self, logs: dict | None = None) -> None:
        self.averaging._apply_restored(self.model)

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        step = int(self.model.player_optimizers[0].iterations.numpy())  # completed steps; resumes with the run
        if step in self.averaging.steps:
            self.averaging.snapshot(self.model)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.averaging.swap_in(self.model)

    def on_train_end(self, logs: dict | None = None) -> None:
        self.averaging.finish(self.model)


class _SwapOut(keras.callbacks.Callback):
    def __init__(self, averaging: WeightAveraging):
        super().__init__()
        self.averaging = averaging

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.averaging.swap_out(self.model)
