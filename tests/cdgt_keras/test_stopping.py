"""cdgt's EarlyStopping decides as Keras' does and restores the same weights, keeping them on the device."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from cdgt_keras.stopping import EarlyStopping


def _model() -> keras.Model:
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    return model


def _run(stop: keras.callbacks.EarlyStopping, scores: list[float]) -> tuple[int, int, list[np.ndarray]]:
    model = _model()
    stop.set_model(model)
    stop.on_train_begin()
    for epoch, score in enumerate(scores):
        model.set_weights([np.full(w.shape, epoch + 1.0, "float32") for w in model.weights])
        stop.on_epoch_end(epoch, {"val_p_at_5": score})
        if getattr(model, "stop_training", False):
            break
    stop.on_train_end()
    return stop.stopped_epoch, stop.best_epoch, model.get_weights()


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("patience", [1, 3])
def test_it_stops_and_restores_as_keras_does(seed: int, patience: int) -> None:
    scores = list(np.random.default_rng(seed).random(10).round(2))
    args = {"monitor": "val_p_at_5", "mode": "max", "patience": patience, "restore_best_weights": True}
    mine, theirs = _run(EarlyStopping(**args), scores), _run(keras.callbacks.EarlyStopping(**args), scores)
    assert mine[:2] == theirs[:2]
    for a, b in zip(mine[2], theirs[2]):
        np.testing.assert_array_equal(a, b)
    assert mine[2][0][0, 0] == mine[1] + 1.0  # the best epoch's weights, not the last one's


def test_its_best_weights_read_as_arrays_and_a_restored_list_is_put_back() -> None:
    stop = EarlyStopping(monitor="val_p_at_5", mode="max", patience=2, restore_best_weights=True)
    _run(stop, [0.2, 0.4, 0.1])
    assert [np.asarray(w).shape for w in stop.best_weights] == [(3, 2), (2,)]  # what the checkpoint saves
    model = _model()
    stop.set_model(model)
    stop.best_weights = [np.zeros((3, 2), "float32"), np.ones(2, "float32")]  # as a resumed run sets it
    stop.on_train_end()
    np.testing.assert_array_equal(model.get_weights()[1], np.ones(2))


def _run_rows(stop: EarlyStopping, scores: list[float], rows: list[np.ndarray]) -> tuple[int, int, float]:
    """Like _run, with each epoch's per-example rows for the test against the first epoch; (stopped epoch, kept
    epoch, the restored weights' epoch number)."""
    current: list[np.ndarray] = []
    stop.rows = lambda: current[-1]
    model = _model()
    stop.set_model(model)
    stop.on_train_begin()
    for epoch, score in enumerate(scores):
        model.set_weights([np.full(w.shape, epoch + 1.0, "float32") for w in model.weights])
        current.append(rows[epoch])
        stop.on_epoch_end(epoch, {"val_p_at_5": score})
        if getattr(model, "stop_training", False):
            break
    stop.on_train_end()
    return stop.stopped_epoch, stop.best_epoch, float(model.get_weights()[0][0, 0]) - 1.0


def test_paired_z_against_hand_values() -> None:
    from cdgt_keras.stopping import paired_z

    # differences 0.2, 0.4, 0, 0.2: mean 0.2, sample sd sqrt(0.08 / 3), standard error sd / 2
    assert paired_z(np.array([0.4, 0.6, 0.2, 0.8]), np.array([0.2, 0.2, 0.2, 0.6])) == pytest.approx(
        0.2 / (np.sqrt(0.08 / 3) / 2))
    assert paired_z(np.array([0.2, 0.2]), np.array([0.2, 0.2])) == 0.0
    assert paired_z(np.array([0.4, 0.4]), np.array([0.2, 0.2])) == np.inf
    assert paired_z(np.array([0.0, 0.0]), np.array([0.2, 0.2])) == -np.inf


def _rows_with_mean_gain(gain_rows: int, n: int = 100) -> np.ndarray:
    """Per-example P@1 rows: the first epoch's hits on rows 0-49, a later epoch's on rows 0-49 plus `gain_rows`
    more (a paired gain of gain_rows / n, every difference 0 or 1)."""
    rows = np.zeros(n)
    rows[: 50 + gain_rows] = 1.0
    return rows


def test_a_later_epoch_that_beats_the_first_by_noise_alone_keeps_the_first_epochs_weights() -> None:
    # epoch 2's mean is higher by 1 row in 100 (z = 1.0): not kept; patience counts from it as Keras would
    scores = [0.50, 0.51, 0.505, 0.505]
    rows = [_rows_with_mean_gain(0), _rows_with_mean_gain(1), _rows_with_mean_gain(0), _rows_with_mean_gain(0)]
    args = {"monitor": "val_p_at_5", "mode": "max", "patience": 2, "restore_best_weights": True}
    stopped, kept, restored = _run_rows(EarlyStopping(**args, min_z=2.0), scores, rows)
    assert (stopped, kept, restored) == (3, 0, 0.0)
    assert _run(keras.callbacks.EarlyStopping(**args), scores)[:2] == (3, 1)  # Keras: the same stop, epoch 2's


def test_a_later_epoch_that_beats_the_first_by_more_than_min_z_standard_errors_is_kept() -> None:
    # 9 rows gained of 100, none lost: z = 0.09 / (sd 0.2876 / 10) = 3.13
    from cdgt_keras.stopping import paired_z

    rows = [_rows_with_mean_gain(0), _rows_with_mean_gain(9), _rows_with_mean_gain(2)]
    assert paired_z(rows[1], rows[0]) == pytest.approx(3.13, abs=0.01)
    args = {"monitor": "val_p_at_5", "mode": "max", "patience": 5, "restore_best_weights": True}
    assert _run_rows(EarlyStopping(**args, min_z=3.0), [0.50, 0.59, 0.52], rows)[1:] == (1, 1.0)
    assert _run_rows(EarlyStopping(**args, min_z=3.2), [0.50, 0.59, 0.52], rows)[1:] == (0, 0.0)


def test_a_new_training_forgets_the_last_ones_first_epoch() -> None:
    stop = EarlyStopping(monitor="val_p_at_5", mode="max", patience=5, restore_best_weights=True, min_z=2.0)
    _run_rows(stop, [0.5, 0.6], [_rows_with_mean_gain(0), _rows_with_mean_gain(10)])
    assert stop.first_rows is not None and stop.first_rows.sum() == 50
    _run_rows(stop, [0.5], [_rows_with_mean_gain(30)])
    assert stop.first_rows.sum() == 80


def test_min_z_without_rows_is_a_clear_error() -> None:
    stop = EarlyStopping(monitor="val_p_at_5", mode="max", patience=5, restore_best_weights=True, min_z=2.0)
    stop.rows = lambda: None
    stop.set_model(_model())
    stop.on_train_begin()
    with pytest.raises(ValueError, match="no per-example rows of val_p_at_5 were scored at epoch 1"):
        stop.on_epoch_end(0, {"val_p_at_5": 0.5})
