"""The training checkpoint (cdgt_keras.checkpoint) on a clock: written at the first epoch's end `every_seconds`
after the last one, each write a consistent set of files named in state.json, the best weights written only when
they changed, and a restore that gives back what was written."""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest

from cdgt_keras import cadence, checkpoint
from cdgt_keras.stopping import EarlyStopping

SCORES = [0.3, 0.5, 0.4, 0.6, 0.6, 0.55, 0.7]  # the monitored metric after epochs 1..7: best after 2, 4, 7


class _Epochs(keras.callbacks.Callback):
    """Each epoch takes 100 s of a fake clock and logs SCORES[epoch]; the weights are set to the epoch's number."""

    def __init__(self, clock: list[float]):
        super().__init__()
        self.clock = clock

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.clock[0] += 100.0
        self.model.layers[-1].kernel.assign(np.full((2, 1), epoch + 1, "float32"))
        logs["val_score"] = SCORES[epoch]


def _fit(directory, every: float, monkeypatch) -> list[tuple[str, float]]:
    """Fit 7 epochs with a checkpoint every `every` seconds of the fake clock; the best weights' writes (name,
    time)."""
    clock, written = [0.0], []
    monkeypatch.setattr(cadence.time, "monotonic", lambda: clock[0])
    real = checkpoint._save_arrays
    monkeypatch.setattr(checkpoint, "_save_arrays",
                        lambda d, name, arrays: (written.append((name, clock[0])), real(d, name, arrays)))
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, use_bias=False)])
    model.compile(optimizer="adam", loss="mse")
    stop = EarlyStopping(monitor="val_score", mode="max", patience=10, restore_best_weights=True)
    x, y = np.ones((4, 2), "float32"), np.ones((4, 1), "float32")
    saving = checkpoint.TrainingCheckpoint(str(directory), stop, every_seconds=every)
    model.fit(x, y, epochs=len(SCORES), verbose=0, callbacks=[_Epochs(clock), stop, saving])
    return written


def test_a_checkpoint_is_written_once_the_interval_has_passed_and_names_every_file_it_keeps(tmp_path, monkeypatch):
    written = _fit(tmp_path, 250.0, monkeypatch)
    state = json.loads((tmp_path / checkpoint.STATE_FILE).read_text())
    # epochs end at 100, 200, ..., 700 s: due at 300 (epoch 3) and 600 (epoch 6), 300 s apart
    assert state["epoch"] == 6
    assert state["early_stopping"]["best_epoch"] == 3  # 0-based: epoch 4's 0.6, not beaten by epoch 5's tie
    assert written == [("best_epoch2.npz", 300.0), ("best_epoch4.npz", 600.0)]
    assert state["weights"] == "epoch6.weights.h5" and state["best"] == "best_epoch4.npz"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best_epoch4.npz", "epoch6.weights.h5", "state.json"]


def test_every_epoch_with_zero_and_the_best_weights_rewritten_only_when_they_change(tmp_path, monkeypatch):
    written = _fit(tmp_path, 0.0, monkeypatch)
    # best after epochs 1, 2, 4, 7: each written once, at the first checkpoint that holds it
    assert [name for name, _ in written] == ["best_epoch1.npz", "best_epoch2.npz", "best_epoch4.npz",
                                             "best_epoch7.npz"]
    assert checkpoint.completed_epochs(str(tmp_path)) == 7
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best_epoch7.npz", "epoch7.weights.h5", "state.json"]


def test_no_checkpoint_before_the_interval_and_a_restore_gives_back_what_was_written(tmp_path, monkeypatch):
    _fit(tmp_path / "never", 10_000.0, monkeypatch)
    assert not (tmp_path / "never").exists()
    _fit(tmp_path / "run", 250.0, monkeypatch)
    fresh = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, use_bias=False)])
    fresh.compile(optimizer="adam", loss="mse")
    fresh.optimizer.build(fresh.trainable_variables)
    stop = EarlyStopping(monitor="val_score", mode="max", patience=10, restore_best_weights=True)
    assert checkpoint.restore(fresh, str(tmp_path / "run"), stop) == 6
    np.testing.assert_array_equal(fresh.get_weights()[0], np.full((2, 1), 6, "float32"))  # after epoch 6
    wait, best, best_epoch, best_weights, first_rows = stop.cdgt_restored_state
    assert (best, best_epoch, wait, first_rows) == (0.6, 3, 2, None)  # no test against the first epoch here
    np.testing.assert_array_equal(best_weights[0], np.full((2, 1), 4, "float32"))  # epoch 4's


@pytest.mark.parametrize("every", [-1.0, float("inf"), float("nan")])
def test_an_interval_that_is_not_a_finite_number_of_seconds_is_refused(every):
    with pytest.raises(ValueError, match="checkpoint every"):
        cadence.Cadence(every)


def test_the_first_epochs_rows_of_early_stoppings_test_are_written_and_put_back(tmp_path):
    """Under early_stopping_min_z the first epoch's per-example rows are part of the training state: a resumed run
    tests its later epochs against the same rows as an uninterrupted one."""
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, use_bias=False)])
    model.stop_training = False  # as model.fit sets it
    stop = EarlyStopping(monitor="val_score", mode="max", patience=10, restore_best_weights=True, min_z=2.0)
    first = np.array([0.0, 0.2, 0.4, 1.0 / 3.0])
    stop.rows = lambda: first
    saving = checkpoint.TrainingCheckpoint(str(tmp_path), stop, every_seconds=0.0)
    for callback in (stop, saving):
        callback.set_model(model)
    stop.on_train_begin()
    stop.on_epoch_end(0, {"val_score": 0.5})
    saving.on_epoch_end(0)
    fresh = EarlyStopping(monitor="val_score", mode="max", patience=10, restore_best_weights=True, min_z=2.0)
    assert checkpoint.restore(model, str(tmp_path), fresh) == 1
    fresh.set_model(model)
    fresh.on_train_begin()  # resets the state; the checkpoint's first epoch puts it back
    saving = checkpoint.TrainingCheckpoint(str(tmp_path / "again"), fresh)
    saving.on_epoch_begin(1)
    np.testing.assert_array_equal(fresh.first_rows, first)  # to the bit (JSON keeps a float64's repr)
    assert (fresh.best, fresh.best_epoch) == (0.5, 0)
