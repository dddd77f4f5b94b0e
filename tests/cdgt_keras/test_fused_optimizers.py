"""The fused sparse optimizers of the shared encoder (cdgt_keras/sparse.py): SparseAdagrad and SparseRMSprop
compute their formulas by hand, on the named rows only, with duplicate rows summed first; the config picks the
encoder's optimizer and its rate; a model trained with either saves and loads with its state."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from cdgt_keras.config import CDGTConfig
from cdgt_keras.learning import encoder_optimizer
from cdgt_keras.sparse import LazyAdam, SparseAdagrad, SparseRMSprop


def _adagrad_by_hand(start: np.ndarray, grads: list[np.ndarray], lr: float, acc0: float, eps: float) -> np.ndarray:
    """accumulator += g^2; w -= lr g / (sqrt(accumulator) + eps), in float64."""
    w, acc = start.astype(np.float64), np.full(start.shape, acc0)
    for g in grads:
        acc += g ** 2
        w -= lr * g / (np.sqrt(acc) + eps)
    return w


def test_adagrad_dense_step_is_adagrad_by_hand():
    start = np.array([[1.0, -1.0], [0.5, 2.0]], np.float32)
    var, grad = keras.Variable(start.copy()), np.array([[0.3, -1.0], [2.0, 0.0]], np.float32)
    opt = SparseAdagrad(0.05, initial_accumulator_value=0.1, epsilon=1e-7)
    for _ in range(3):
        opt.apply_gradients([(tf.constant(grad), var)])
    np.testing.assert_allclose(var.numpy(), _adagrad_by_hand(start, [grad] * 3, 0.05, 0.1, 1e-7), rtol=1e-6)


def test_the_config_picks_the_encoder_optimizer_and_its_rate():
    adam = encoder_optimizer(CDGTConfig(learning_rate=0.004))
    adagrad = encoder_optimizer(CDGTConfig(learning_rate=0.004, encoder_optimizer="adagrad",
                                           encoder_learning_rate=0.05))
    assert isinstance(adam, LazyAdam) and float(adam.learning_rate.numpy()) == pytest.approx(0.004)
    assert isinstance(adagrad, SparseAdagrad) and float(adagrad.learning_rate.numpy()) == pytest.approx(0.05)
    with pytest.raises(ValueError, match="encoder_optimizer"):
        CDGTConfig(encoder_optimizer="sgd")
    with pytest.raises(ValueError, match="encoder_learning_rate"):
        CDGTConfig(encoder_learning_rate=-1.0)


def test_adam_epsilon_reaches_every_adam_and_sets_the_step_on_small_gradients():
    from cdgt_keras.learning import build_trainable

    config = CDGTConfig(encoder_hidden=(4,), head_hidden=(), adam_epsilon=1e-12)
    model = build_trainable(config, np.full(6, 0.2))
    assert [o.epsilon for o in [model.optimizer, *model.player_optimizers]] == [1e-12] * (1 + config.n_players)
    assert CDGTConfig().adam_epsilon == 1e-7  # Keras' default, in the paper's form
    with pytest.raises(ValueError, match="adam_epsilon"):
        CDGTConfig(adam_epsilon=0.0)
    # Keras' Adam takes a first step of lr * g / (|g| + epsilon / sqrt(1 - beta_2)) (m and v bias-corrected, epsilon
    # not): with a gradient of 1e-10, the size of deps' (the payoff averages over 18.6k labels), Keras' 1e-7 leaves
    # 1/31624 of the step, 1e-12 about all of it
    for eps in (1e-7, 1e-12):
        expected = 0.01 * 1e-10 / (1e-10 + eps / np.sqrt(1 - 0.999))
        var = keras.Variable(np.zeros((2, 1), np.float32))
        LazyAdam(0.01, epsilon=eps).apply_gradients([(tf.constant([[1e-10], [0.0]]), var)])
        np.testing.assert_allclose(var.numpy(), [[-expected], [0.0]], rtol=1e-5)


def test_player_weight_decay_is_adamw_on_the_players_weights_and_spares_their_biases():
    from cdgt_keras.learning import build_trainable

    model = build_trainable(CDGTConfig(encoder_hidden=(4,), head_hidden=(), player_weight_decay=0.5), np.full(6, 0.2))
    model.build((None, 5))
    opt, variables = model.player_optimizers[0], model.player_variables(0)
    assert [o.weight_decay for o in model.player_optimizers] == [0.5] * 3
    assert build_trainable(CDGTConfig(encoder_hidden=(4,)), np.full(6, 0.2)).player_optimizers[0].weight_decay is None
    before = [v.numpy().copy() for v in variables]
    # a zero gradient leaves Adam's step at 0: what remains is the decay, w (1 - lr * decay), by hand; biases kept
    opt.apply_gradients([(tf.zeros_like(v), v) for v in variables])
    for v, old in zip(variables, before):
        want = old if "bias" in v.name else old * np.float32(1.0 - 1e-3 * 0.5)
        np.testing.assert_allclose(v.numpy(), want, rtol=1e-6, err_msg=v.name)
    assert any("bias" in v.name for v in variables) and any("bias" not in v.name for v in variables)
    # a real gradient: Keras' AdamW (its decay, then Adam), to the bit
    var, grad = keras.Variable(np.ones((3, 2), np.float32)), tf.constant([[0.5, -1.0], [2.0, 0.0], [1e-3, 4.0]])
    ref = keras.Variable(np.ones((3, 2), np.float32))
    LazyAdam(0.1, weight_decay=0.5).apply_gradients([(grad, var)])
    keras.optimizers.AdamW(0.1, weight_decay=0.5).apply_gradients([(grad, ref)])
    np.testing.assert_array_equal(var.numpy(), ref.numpy())
    with pytest.raises(ValueError, match="player_weight_decay"):
        CDGTConfig(player_weight_decay=-0.1)


def test_adam_epsilon_per_label_divides_by_the_label_count():
    from cdgt_keras.learning import build_trainable

    config = CDGTConfig(encoder_hidden=(4,), head_hidden=(), adam_epsilon=0.5, adam_epsilon_per_label=True)
    model = build_trainable(config, np.full(8, 0.2))  # 8 labels
    assert [o.epsilon for o in [model.optimizer, *model.player_optimizers]] == [0.0625] * (1 + config.n_players)
    with pytest.raises(ValueError, match="number of labels"):
        encoder_optimizer(config)


def _rmsprop_by_hand(start: np.ndarray, grads: list[np.ndarray], lr: float, rho: float, momentum: float,
             eps: float) -> np.ndarray:
    """ms = rho ms + (1 - rho) g^2; mom = momentum mom + rate g / sqrt(ms + eps); w -= mom, with
    rate = lr (1 - momentum) sqrt(1 - rho^t), in float64."""
    w, ms, mom = start.astype(np.float64), np.zeros(start.shape), np.zeros(start.shape)
    for t, g in enumerate(grads, start=1):
        ms = rho * ms + (1 - rho) * g ** 2
        mom = momentum * mom + lr * (1 - momentum) * np.sqrt(1 - rho ** t) * g / np.sqrt(ms + eps)
        w -= mom
    return w


SPARSE_CASES = {
    "adagrad": (lambda: SparseAdagrad(0.3, initial_accumulator_value=0.1, epsilon=1e-7),
                lambda start, grads: _adagrad_by_hand(start, grads, 0.3, 0.1, 1e-7)),
    "rmsprop": (lambda: SparseRMSprop(0.3, rho=0.9, momentum=0.5, epsilon=1e-8),
                lambda start, grads: _rmsprop_by_hand(start, grads, 0.3, 0.9, 0.5, 1e-8)),
}


@pytest.mark.parametrize("name", sorted(SPARSE_CASES))
def test_a_sparse_step_is_the_formula_on_the_named_rows_with_duplicates_summed(name: str):
    make, by_hand = SPARSE_CASES[name]
    start = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    var, opt = keras.Variable(start.copy()), make()
    slices = tf.IndexedSlices(tf.constant([[1.0, -2.0, 0.5], [0.5, 0.1, 1.0], [3.0, 1.0, -1.0]]),
                              tf.constant([2, 0, 2]))  # row 2 twice: its gradient is the sum
    summed = np.zeros((4, 3))
    summed[0] = [0.5, 0.1, 1.0]
    summed[2] = [4.0, -1.0, -0.5]
    for _ in range(3):
        opt.apply_gradients([(slices, var)])
    np.testing.assert_allclose(var.numpy()[[0, 2]], by_hand(start, [summed] * 3)[[0, 2]], rtol=1e-5)
    np.testing.assert_array_equal(var.numpy()[[1, 3]], start[[1, 3]])  # rows never named: untouched


@pytest.mark.parametrize("name", sorted(SPARSE_CASES))
def test_a_sparse_step_on_rows_named_once_is_the_formula(name: str):
    """Rows named once each (as sparse_matmul's gradient names them), out of order: the values pass unsummed."""
    make, by_hand = SPARSE_CASES[name]
    start = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    var, opt = keras.Variable(start.copy()), make()
    slices = tf.IndexedSlices(tf.constant([[3.0, 1.0, -1.0], [0.5, 0.1, 1.0]]), tf.constant([3, 0]))
    grad = np.zeros((4, 3))
    grad[3], grad[0] = [3.0, 1.0, -1.0], [0.5, 0.1, 1.0]
    for _ in range(2):
        opt.apply_gradients([(slices, var)])
    np.testing.assert_allclose(var.numpy()[[0, 3]], by_hand(start, [grad] * 2)[[0, 3]], rtol=1e-5)
    np.testing.assert_array_equal(var.numpy()[[1, 2]], start[[1, 2]])


def test_rmsprop_dense_step_is_the_formula_and_its_first_step_a_tenth_of_adams():
    start = np.array([[1.0, -1.0], [0.5, 2.0]], np.float32)
    var, grad = keras.Variable(start.copy()), np.array([[0.3, -1.0], [2.0, 0.5]], np.float32)
    opt = SparseRMSprop(0.05)
    opt.apply_gradients([(tf.constant(grad), var)])
    adam_var = keras.Variable(start.copy())
    keras.optimizers.Adam(0.05, epsilon=1e-12).apply_gradients([(tf.constant(grad), adam_var)])
    # Adam's first step is lr sign(g); the momentum here starts at 0 uncorrected: (1 - 0.9) of it
    np.testing.assert_allclose(start - var.numpy(), 0.1 * (start - adam_var.numpy()), rtol=1e-4)
    for _ in range(2):
        opt.apply_gradients([(tf.constant(grad), var)])
    np.testing.assert_allclose(var.numpy(), _rmsprop_by_hand(start, [grad] * 3, 0.05, 0.999, 0.9, 1e-12), rtol=1e-5)


def test_the_config_picks_rmsprop_and_it_needs_momentum():
    opt = encoder_optimizer(CDGTConfig(learning_rate=0.004, encoder_optimizer="rmsprop"))
    assert isinstance(opt, SparseRMSprop) and float(opt.learning_rate.numpy()) == pytest.approx(0.004)
    with pytest.raises(ValueError, match="momentum"):
        SparseRMSprop(0.1, momentum=0.0)


@pytest.mark.parametrize(("name", "rate", "kind"), [("adagrad", 0.1, SparseAdagrad), ("rmsprop", 0.01, SparseRMSprop)])
def test_a_model_trained_with_it_saves_and_loads_with_its_state(tmp_path, name: str, rate: float, kind: type) -> None:
    from cdgt_keras.learning import build_trainable

    rng = np.random.default_rng(0)
    dense = (rng.random((64, 40)) < 0.1).astype(np.float32)
    y = (rng.random((64, 6)) < 0.3).astype(np.float32)
    config = CDGTConfig(encoder_hidden=(8,), head_hidden=(), encoder_optimizer=name, encoder_learning_rate=rate,
                        batch_size=16, epochs=1)
    model = build_trainable(config, y.mean(axis=0))
    x = tf.sparse.from_dense(dense)
    model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(16), epochs=1, verbose=0)
    state = [v.numpy() for v in model.optimizer.variables]
    assert isinstance(model.optimizer, kind) and any(np.abs(s).max() > 0 for s in state[1:])
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    assert isinstance(loaded.optimizer, kind)
    for mine, theirs in zip(state, [v.numpy() for v in loaded.optimizer.variables]):
        np.testing.assert_array_equal(mine, theirs)
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6)
