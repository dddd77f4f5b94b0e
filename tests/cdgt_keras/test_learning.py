"""The training setup every path shares (cdgt_keras.learning): the learning-rate multiplier against hand values,
the ranking monitor against cdgt_keras.metrics, early stopping on the configured metric, and wide players."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest

from cdgt_keras.config import CDGTConfig
from cdgt_keras.learning import StepSchedule, early_stopping, multiplier, training_epochs
from cdgt_keras.model import CDGTModel


def test_multiplier_hand_values():
    assert multiplier(0, 100, 10, "cosine") == pytest.approx(0.1)  # warm-up: (step + 1) / warmup
    assert multiplier(9, 100, 10, "cosine") == pytest.approx(1.0)
    assert multiplier(10, 100, 10, "cosine") == pytest.approx(1.0)  # the decay starts at 1
    assert multiplier(55, 100, 10, "cosine") == pytest.approx(0.5)  # halfway: (1 + cos(pi / 2)) / 2
    assert multiplier(100, 100, 10, "cosine") == pytest.approx(0.0)
    assert multiplier(70, 100, 0, "constant") == 1.0
    assert multiplier(25, 100, 0, "cosine") == pytest.approx((1 + math.cos(math.pi / 4)) / 2)


def test_early_stopping_watches_the_configured_metric():
    assert early_stopping(CDGTConfig()).monitor == "val_payoff"
    stop = early_stopping(CDGTConfig(early_stopping_metric="psp_at_5"))
    assert stop.monitor == "val_psp_at_5" and stop.mode == "max" and stop.restore_best_weights
    assert early_stopping(CDGTConfig(early_stopping_patience=0)) is None
    with pytest.raises(ValueError, match="early_stopping_metric"):
        CDGTConfig(early_stopping_metric="loss")


def _data(n: int = 64, d: int = 10, labels: int = 6, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)).astype(np.float32)
    y = (x[:, :labels] + 0.3 * rng.standard_normal((n, labels)) > 0.8).astype(np.float32)
    y[0] = 1.0
    return x, y


def test_step_schedule_sets_every_optimizer_each_step():
    x, y = _data()
    config = CDGTConfig(n_players=2, learning_rate=0.01, player_learning_rates=(0.01, 0.02), lr_schedule="cosine",
                        warmup_fraction=0.25, encoder_hidden=(8,), head_hidden=())
    model = CDGTModel(config, y.mean(0))
    model.compile(optimizer=keras.optimizers.Adam(0.01))
    schedule = StepSchedule(config, total_steps=8)
    seen = []

    class Spy(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append([float(o.learning_rate.numpy()) for o in (model.optimizer, *model.player_optimizers)])

    model.fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=[schedule, Spy()])
    factors = [multiplier(s, 8, 2, "cosine") for s in range(8)]
    np.testing.assert_allclose(seen, [[0.01 * f, 0.01 * f, 0.02 * f] for f in factors], rtol=1e-6)


def test_wide_players_add_a_linear_part_that_is_theirs():
    x, y = _data()
    config = CDGTConfig(n_players=3, wide="tail", encoder_hidden=(8,), head_hidden=())
    model = CDGTModel(config, y.mean(0) + 1e-3)
    model(x[:2])
    assert [w is None for w in model.wide] == [True, False, False]
    names = [v.path for v in model.player_variables(1)]
    assert any("player2_wide" in n for n in names) and not any("wide" in v.path for v in model.player_variables(0))
    model.compile(optimizer=keras.optimizers.Adam(0.01))
    before = [v.numpy().copy() for v in model.wide[2].trainable_variables]
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    assert any(np.abs(b - v.numpy()).max() > 0 for b, v in zip(before, model.wide[2].trainable_variables))
    with pytest.raises(ValueError, match="wide"):
        model.player_probs(1, model.contexts(x)[1])


def test_wide_head_gives_the_head_player_alone_a_linear_part():
    x, y = _data()
    model = CDGTModel(CDGTConfig(n_players=3, wide="head", encoder_hidden=(8,), head_hidden=()), y.mean(0) + 1e-3)
    model(x[:2])
    assert [w is None for w in model.wide] == [False, True, True]
    assert any("player1_wide" in v.path for v in model.player_variables(0))


def test_an_epoch_of_a_small_split_is_at_least_min_steps_per_epoch():
    import scipy.sparse as sp

    from cdgt_keras.data import MultiLabelData
    from cdgt_keras.training import fit_model

    x, y = _data(n=40)
    data = MultiLabelData(x, sp.csr_matrix(y.astype(np.uint8)), [str(i) for i in range(y.shape[1])])
    config = CDGTConfig(n_players=1, alpha=0.0, beta=0.0, encoder_hidden=(8,), head_hidden=(), batch_size=16,
                        epochs=2, min_steps_per_epoch=7, early_stopping_patience=0)
    model, history, _ = fit_model(config, data, data)
    assert int(model.player_optimizers[0].iterations.numpy()) == 14  # 2 epochs x 7 steps (3 batches a pass)
    assert len(history.history["loss"]) == 2


def test_training_epochs_grow_with_each_doubling_of_the_labels_beyond_4096():
    config = CDGTConfig(epochs=10, label_epoch_growth=0.1)
    assert [training_epochs(config, n) for n in (2, 4096, 8192, 16384, 32768)] == [10, 10, 11, 12, 13]
    assert training_epochs(config, 6000) == 11  # 10 x (1 + 0.1 x log2(6000 / 4096)) = 10.55
    assert training_epochs(config, 5500) == 10  # 10.43
    assert training_epochs(config.replace(epochs=20), 6000) == 21  # 21.10
    assert training_epochs(config.replace(epochs=5), 8192) == 6  # 5.5 rounds half up
    assert training_epochs(CDGTConfig(epochs=10), 10**6) == 10  # growth 0: the paper's budget at any label count


def test_a_large_label_space_trains_the_grown_epochs_with_its_schedule_over_them():
    import scipy.sparse as sp

    from cdgt_keras.data import MultiLabelData
    from cdgt_keras.training import fit_model

    x, y = _data(n=40)
    wide = np.zeros((40, 8192), np.uint8)
    wide[:, :y.shape[1]] = y
    data = MultiLabelData(x, sp.csr_matrix(wide), [str(i) for i in range(wide.shape[1])])
    config = CDGTConfig(n_players=1, alpha=0.0, beta=0.0, encoder_hidden=(8,), head_hidden=(), batch_size=16,
                        epochs=2, label_epoch_growth=0.5, early_stopping_patience=0, lr_schedule="cosine")
    model, history, _ = fit_model(config, data, data)
    assert len(history.history["loss"]) == 3  # 2 x (1 + 0.5 x log2(8192 / 4096))
    assert int(model.player_optimizers[0].iterations.numpy()) == 9  # 3 epochs x 3 batches
    # the cosine runs over all 9 steps: the last step's rate is its 9th point, not 0 (as over 2 x 3 steps)
    last = multiplier(8, 9, 0, "cosine") * config.learning_rate
    assert float(model.player_optimizers[0].learning_rate.numpy()) == pytest.approx(last, rel=1e-5) and last > 0


def test_without_the_validation_objective_the_same_model_trains_without_val_payoff():
    """validation_objective=false drops Keras' evaluation of the objective on validation (val_loss, val_payoff):
    the ranking monitor's figures stay, early stopping on them stops at the same epoch, and the weights are the
    same to the bit (evaluating draws no dropout mask and moves no weight)."""
    import scipy.sparse as sp

    from cdgt_keras.data import MultiLabelData
    from cdgt_keras.training import fit_model

    x, y = _data(n=96)
    data = MultiLabelData(x, sp.csr_matrix(y.astype(np.uint8)), [str(i) for i in range(y.shape[1])])
    base = CDGTConfig(n_players=2, encoder_hidden=(8,), head_hidden=(), batch_size=16, epochs=4, dropout=0.3,
                      early_stopping_metric="p_at_1", early_stopping_patience=2)
    runs = [fit_model(base.replace(validation_objective=flag), data, data)[:2] for flag in (True, False)]
    (with_model, with_history), (without_model, without_history) = runs
    assert "val_payoff" in with_history.history and "val_loss" in with_history.history
    assert not any(k in without_history.history for k in ("val_payoff", "val_loss", "val_potential"))
    assert without_history.history["val_p_at_1"] == with_history.history["val_p_at_1"]
    assert without_history.history["loss"] == with_history.history["loss"]
    for a, b in zip(with_model.get_weights(), without_model.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_early_stopping_on_the_payoff_needs_the_validation_objective():
    with pytest.raises(ValueError, match="validation_objective"):
        CDGTConfig(validation_objective=False)  # early_stopping_metric="payoff"
    CDGTConfig(validation_objective=False, early_stopping_patience=0)  # no early stopping: nothing reads it
    CDGTConfig(validation_objective=False, early_stopping_metric="psp_at_5")


@pytest.mark.parametrize("min_z, kept", [(0.0, "best"), (1e6, "first")])
def test_early_stopping_min_z_keeps_the_first_epoch_unless_a_later_one_beats_it_by_that_many_errors(min_z, kept):
    """Through fit_model, the ranking monitor's rows reach early stopping's test: with min_z = 0 the weights kept
    are the best epoch's (the model ranks validation as that epoch did), with an unreachable min_z the first's."""
    import scipy.sparse as sp

    from cdgt_keras import metrics as M
    from cdgt_keras.data import MultiLabelData
    from cdgt_keras.training import fit_model

    x, y = _data(n=96)
    data = MultiLabelData(x, sp.csr_matrix(y.astype(np.uint8)), [str(i) for i in range(y.shape[1])])
    config = CDGTConfig(n_players=2, encoder_hidden=(8,), head_hidden=(), batch_size=16, epochs=4, dropout=0.0,
                        learning_rate=0.02, early_stopping_metric="p_at_1", early_stopping_patience=4,
                        validation_objective=False, early_stopping_min_z=min_z)
    model, history, _ = fit_model(config, data, data)
    curve = history.history["val_p_at_1"]
    assert max(curve) > curve[0]  # a later epoch is better: the two settings keep different weights
    now = M.precision_at_k(y, np.asarray(model.fused_probs(x)), 1)
    assert now == pytest.approx(max(curve) if kept == "best" else curve[0], abs=1e-9)


def test_early_stopping_min_z_needs_a_ranking_metric():
    with pytest.raises(ValueError, match="early_stopping_min_z"):
        CDGTConfig(early_stopping_min_z=2.0)  # early_stopping_metric="payoff"
    with pytest.raises(ValueError, match="early_stopping_min_z"):
        CDGTConfig(early_stopping_metric="p_at_5", early_stopping_min_z=-1.0)
    assert early_stopping(CDGTConfig(early_stopping_metric="p_at_5", early_stopping_min_z=2.0)).min_z == 2.0
