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
