"""Weight averaging (cdgt_keras.averaging): the snapshot steps against hand values; the weights kept are the mean of
the snapshots (against NumPy's mean of the same weights); the validation monitors see the mean and training goes on
from its own weights, to the bit the weights of a run without averaging."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from cdgt_keras.averaging import WeightAveraging, snapshot_steps
from cdgt_keras.config import CDGTConfig
from cdgt_keras.learning import FitSetup
from cdgt_keras.model import CDGTModel


def test_snapshot_steps_hand_values():
    assert snapshot_steps(10, 0.4, 2) == [8, 10]
    assert snapshot_steps(10, 0.5, 2) == [6, 8, 10]  # the last step, then every 2nd before it within steps 6-10
    assert snapshot_steps(100, 0.5, 10) == [60, 70, 80, 90, 100]
    assert snapshot_steps(10, 1.0, 1) == list(range(1, 11))
    assert snapshot_steps(10, 0.0, 1) == [] and snapshot_steps(10, 0.04, 1) == []  # round(0.4) = 0 steps


def test_the_config_checks_the_averaging_fields():
    with pytest.raises(ValueError, match="averaging_fraction"):
        CDGTConfig(averaging_fraction=1.5)
    with pytest.raises(ValueError, match="averaging_every"):
        CDGTConfig(averaging_every=0)


class _Record(keras.callbacks.Callback):
    """The model's trainable weights after every step (`steps`) and at every epoch end (`epochs`)."""

    def __init__(self) -> None:
        super().__init__()
        self.steps: list[list[np.ndarray]] = []
        self.epochs: list[list[np.ndarray]] = []

    def on_train_batch_end(self, batch, logs=None):
        self.steps.append([np.array(w.numpy()) for w in self.model.trainable_weights])

    def on_epoch_end(self, epoch, logs=None):
        self.epochs.append([np.array(w.numpy()) for w in self.model.trainable_weights])


def _train(averaging: WeightAveraging | None) -> tuple[CDGTModel, _Record, _Record]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((48, 10)).astype(np.float32)
    y = (x[:, :6] + 0.3 * rng.standard_normal((48, 6)) > 0.8).astype(np.float32)
    y[0] = 1.0
    config = CDGTConfig(n_players=2, encoder_hidden=(8,), head_hidden=(), dropout=0.2, epochs=3)
    keras.utils.set_random_seed(0)
    model = CDGTModel(config, y.mean(0))
    model.compile(optimizer=keras.optimizers.Adam(0.01))
    monitor, after = _Record(), _Record()  # where the validation monitors run, and where the checkpoint runs
    callbacks = FitSetup(model, None, 6, 3, averaging).callbacks(config, [monitor], [after])
    model.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0, callbacks=callbacks)
    return model, monitor, after


def test_the_kept_weights_are_the_mean_and_training_is_unchanged():
    plain_model, _, plain = _train(None)
    averaging = WeightAveraging(total_steps=18, fraction=0.5, every=4)  # snapshots after steps 10, 14, 18
    model, monitor, after = _train(averaging)
    assert averaging.count == 3
    for a, b in zip(plain.steps, after.steps, strict=True):  # the training weights, to the bit
        assert all(np.array_equal(u, v) for u, v in zip(a, b))
    snaps = [plain.steps[s - 1] for s in (10, 14, 18)]
    mean = [np.mean([s[i] for s in snaps], axis=0) for i in range(len(snaps[0]))]
    for kept, want in zip(model.trainable_weights, mean, strict=True):
        np.testing.assert_allclose(kept.numpy(), want, rtol=1e-5, atol=1e-7)
    assert not all(np.array_equal(k.numpy(), w.numpy())
                   for k, w in zip(model.trainable_weights, plain_model.trainable_weights))
    # the monitors see epoch 1's own weights (no snapshot yet), then the mean so far: step 12 ends epoch 2, after
    # the snapshot of step 10 alone; after the swap, the checkpoint's place sees the training weights again
    for got, want in zip(monitor.epochs[0], plain.steps[5]):
        assert np.array_equal(got, want)
    for got, want in zip(monitor.epochs[1], plain.steps[9]):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    for got, want in zip(monitor.epochs[2], mean):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    for got, want in zip(after.epochs[1], plain.steps[11]):
        assert np.array_equal(got, want)


def test_a_restored_mean_continues():
    averaging = WeightAveraging(total_steps=10, fraction=1.0, every=5)
    model = CDGTModel(CDGTConfig(n_players=1, encoder_hidden=(4,), head_hidden=()), np.full(3, 0.3))
    model(np.zeros((1, 5), np.float32))
    weights = [np.array(w.numpy()) for w in model.trainable_weights]
    averaging.restore(1, [w + 2.0 for w in weights])  # a checkpoint's mean of one snapshot
    averaging.finish(model)
    for kept, w in zip(model.trainable_weights, weights):
        np.testing.assert_allclose(kept.numpy(), w + 2.0)
    averaging.snapshot(model)  # (w + 2) again: the mean of two equal snapshots
    assert averaging.count == 2
    np.testing.assert_allclose(averaging.state()[1][0], weights[0] + 2.0, rtol=1e-6)


def test_the_mean_is_in_every_replica_under_mirrored_strategy():
    """Under MirroredStrategy on 2 logical CPUs (a fresh process: _averaging_worker.py), each replica's copy of
    every trainable weight ends as the mean of the four steps' weights."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    worker = Path(__file__).with_name("_averaging_worker.py")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2",
           "PYTHONPATH": os.pathsep.join([str(worker.parents[2]), str(worker.parent),
                                          *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run([sys.executable, str(worker)], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    run = json.loads(proc.stdout.strip().splitlines()[-1])
    assert run["count"] == 4 and run["replicas"] == 2 and run["copies"] == 2
    assert run["max_abs_change"] > 1e-4  # the steps moved the weights (100x the tolerance): a stale copy shows
    assert run["max_abs_diff"] < 1e-6, run
