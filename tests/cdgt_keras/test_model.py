"""CDGTModel (SPEC §3-6): outputs, logged metrics, sparse input, .keras round trip, beta annealing, variants."""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from cdgt_keras.config import CDGTConfig
from cdgt_keras.model import CDGTModel

FEATURES, LABELS, BATCH, EXAMPLES = 16, 15, 16, 64  # 15 labels, N=3, overlap 0.4: S=5, O=1 (overlaps exist)
# Tracing a CD-GTMLL train step costs ~5 s on 2 cores. Tests about the compiled path (logged metrics, sparse
# batches; also test_schedules and test_distribute) fit compiled; tests about saving, annealing and objective
# variants fit eagerly: the objectives branch only on the static config, never on tensor values.


def _data(n: int = EXAMPLES, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, FEATURES)).astype(np.float32)
    y = (rng.random((n, LABELS)) < np.linspace(0.6, 0.05, LABELS)).astype(np.float32)
    return x, y, np.maximum(y.mean(axis=0), 1.0 / n)


def _model(freq: np.ndarray, seed: int = 0, lr: float = 1e-2, eager: bool = False, **overrides) -> CDGTModel:
    base = {"n_players": 3, "overlap": 0.4, "alpha": 0.5, "beta": 0.2, "encoder_hidden": (8,), "head_hidden": (6,),
            "dropout": 0.0, "attention_dim": 4, "learning_rate": lr}
    keras.utils.set_random_seed(seed)
    model = CDGTModel(CDGTConfig(**{**base, **overrides}), freq)
    model.compile(optimizer=keras.optimizers.Adam(lr), run_eagerly=eager)
    return model


def _fit(model: CDGTModel, x, y, epochs: int = 1, **kwargs) -> dict:
    return model.fit(x, y, batch_size=BATCH, epochs=epochs, shuffle=False, verbose=0, **kwargs).history


def _max_abs(a: list, b: list) -> float:
    assert len(a) == len(b) > 0
    return max(float(np.max(np.abs(np.asarray(u) - np.asarray(v)))) for u, v in zip(a, b))


# ------------------------------------------------------------------------------------------ outputs
def test_call_returns_fused_and_player_probabilities() -> None:
    x, _, freq = _data(n=BATCH)
    model = _model(freq)
    fused = model(x)
    assert tuple(fused.shape) == (BATCH, LABELS)
    fused = fused.numpy()
    assert np.isfinite(fused).all() and fused.min() >= 0.0 and fused.max() <= 1.0
    out = model(x, return_players=True)
    np.testing.assert_allclose(out["fused"].numpy(), fused, atol=1e-7)
    players = [p.numpy() for p in out["players"]]
    assert [p.shape for p in players] == [(BATCH, labels.size) for labels in model.layout.player_labels]
    assert all(p.min() >= 0.0 and p.max() <= 1.0 for p in players)
    # mean fusion: p_hat_l is the mean of the covering players' outputs (two of them on the overlap labels)
    total, count = np.zeros_like(fused), np.zeros(LABELS)
    for labels, p in zip(model.layout.player_labels, players):
        total[:, labels] += p
        count[labels] += 1
    assert count.max() == 2 and count.min() == 1
    np.testing.assert_allclose(fused, total / count, atol=1e-6)


def test_fit_logs_every_game_term_and_loss_is_minus_potential() -> None:
    x, y, freq = _data()
    model = _model(freq)
    logs = _fit(model, x, y, epochs=2)
    assert not model.run_eagerly
    expected = {"loss", "payoff", "potential", "kl_head", "kl_tail"} | {
        f"player{i}_{part}" for i in (1, 2, 3) for part in ("loss", "curiosity", "rarity", "disagreement")}
    assert expected <= set(logs), sorted(expected - set(logs))
    for name in expected:
        assert len(logs[name]) == 2 and np.isfinite(logs[name]).all(), name
    np.testing.assert_allclose(logs["loss"], -np.asarray(logs["potential"]), atol=1e-6)
    assert logs["loss"][0] > 0 and logs["kl_head"][0] > 0 and logs["player2_disagreement"][0] > 0
    # player i's loss is -(R + alpha * C_i); its curiosity is rarity + beta * disagreement
    for i in (1, 2, 3):
        curiosity = np.asarray(logs[f"player{i}_rarity"]) + 0.2 * np.asarray(logs[f"player{i}_disagreement"])
        np.testing.assert_allclose(logs[f"player{i}_curiosity"], curiosity, atol=1e-6)
        np.testing.assert_allclose(logs[f"player{i}_loss"],
                                   -(np.asarray(logs["payoff"]) + 0.5 * curiosity), atol=1e-6)


# ------------------------------------------------------------------------------------------ sparse input
def _dense_ops(graph: tf.Graph) -> list[str]:
    return [op.type for op in graph.get_operations() if op.type in ("SparseToDense", "SparseTensorToDense")]


WIDTH = 200_000


def _sparse_batch(n: int, seed: int = 5) -> tuple[tf.SparseTensor, np.ndarray]:
    """A bag-of-words-like tf.SparseTensor [n, 200000] (20 nonzeros a row) and multi-hot labels."""
    rng = np.random.default_rng(seed)
    keys = np.unique(np.repeat(np.arange(n), 20) * WIDTH + rng.integers(0, WIDTH, 20 * n))
    indices = np.stack([keys // WIDTH, keys % WIDTH], axis=1).astype(np.int64)
    x = tf.SparseTensor(indices, rng.random(len(keys)).astype(np.float32), [n, WIDTH])
    y = (rng.random((n, LABELS)) < np.linspace(0.6, 0.05, LABELS)).astype(np.float32)
    return x, y


def test_sparse_input_trains_from_a_dataset_of_sparse_batches() -> None:
    n = 48
    x, y = _sparse_batch(n)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH)
    assert isinstance(next(iter(dataset))[0], tf.SparseTensor)
    model = _model(np.maximum(y.mean(axis=0), 1.0 / n))
    model(tf.sparse.slice(x, [0, 0], [2, WIDTH]))
    kernel = model.shared_encoder.layers[0].kernel
    assert tuple(kernel.shape) == (WIDTH, 8)
    before = np.array(kernel.numpy())
    logs = model.fit(dataset, epochs=1, shuffle=False, verbose=0).history
    assert np.isfinite(logs["loss"]).all()
    assert int(model.player_optimizers[0].iterations.numpy()) == n // BATCH
    used = np.unique(x.indices.numpy()[:, 1])
    moved = np.abs(kernel.numpy() - before).max(axis=1)
    assert moved[used].min() > 0  # every feature seen in training got an update
    probs = model.predict(dataset.map(lambda a, b: a), verbose=0)
    assert probs.shape == (n, LABELS) and np.isfinite(probs).all()


def _densifying_ops(graph: tf.Graph) -> list[str]:
    return [op.name for op in graph.get_operations() if op.type in ("SparseToDense", "SparseTensorToDense")]


def test_sparse_input_is_never_densified_in_the_traced_call() -> None:
    spec = tf.SparseTensorSpec([None, WIDTH], tf.float32)
    # the inspection itself sees densification when there is some
    assert _densifying_ops(tf.function(tf.sparse.to_dense).get_concrete_function(spec).graph)
    x, y = _sparse_batch(4)
    model = _model(np.maximum(y.mean(axis=0), 0.25))
    model(x)
    graph = tf.function(lambda s: model(s)).get_concrete_function(spec).graph
    assert any(op.type == "MatMul" or "Sparse" in op.type for op in graph.get_operations())
    assert _densifying_ops(graph) == []


# ------------------------------------------------------------------------------------------ saving
def _optimizer_state(optimizer: keras.optimizers.Optimizer) -> list[np.ndarray]:
    return [np.array(v.numpy()) for v in optimizer.variables]


@pytest.mark.parametrize("shared_encoder", [True, False])
def test_keras_round_trip_keeps_predictions_and_optimizer_state(tmp_path: Path, shared_encoder: bool) -> None:
    x, y, freq = _data()
    model = _model(freq, eager=True, fusion="attention", shared_encoder=shared_encoder, schedule="cyclic")
    _fit(model, x, y)
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, CDGTModel) and loaded.cdgt_config == model.cdgt_config
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6)
    steps = EXAMPLES // BATCH
    for mine, theirs in zip(model.player_optimizers, loaded.player_optimizers):
        assert int(theirs.iterations.numpy()) == int(mine.iterations.numpy()) == steps
        assert len(theirs.variables) == len(mine.variables) > 1
        assert _max_abs(_optimizer_state(theirs), _optimizer_state(mine)) == 0.0
    assert loaded.optimizer is not None and int(loaded.optimizer.iterations.numpy()) == steps
    assert _max_abs(_optimizer_state(loaded.optimizer), _optimizer_state(model.optimizer)) == 0.0
    # training continues, and from the same state: one more epoch on both gives the same weights
    loaded.run_eagerly = True
    before = [w.copy() for w in loaded.get_weights()]
    _fit(model, x, y)
    _fit(loaded, x, y)
    assert _max_abs(loaded.get_weights(), before) > 1e-3
    assert _max_abs(loaded.get_weights(), model.get_weights()) < 1e-6
    assert int(loaded.player_optimizers[2].iterations.numpy()) == 2 * steps


# ------------------------------------------------------------------------------------------ beta annealing
class _BetaLog(keras.callbacks.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.betas: list[float] = []

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self.betas.append(float(self.model.beta_now()))


def test_beta_anneals_linearly_to_zero_over_the_fit() -> None:
    x, y, freq = _data()
    model = _model(freq, eager=True, beta_schedule="anneal")
    assert float(model.beta_now()) == pytest.approx(0.2)
    log = _BetaLog()
    epochs, steps = 2, EXAMPLES // BATCH
    _fit(model, x, y, epochs=epochs, callbacks=[log])
    total = epochs * steps
    assert len(log.betas) == total
    np.testing.assert_allclose(log.betas, [0.2 * (1 - k / total) for k in range(1, total + 1)], atol=1e-6)
    assert log.betas[total // 2 - 1] == pytest.approx(0.1, abs=1e-6)
    assert float(model.beta_now()) == pytest.approx(0.0, abs=1e-7)
    constant = _model(freq, eager=True)
    _fit(constant, x, y)
    assert float(constant.beta_now()) == pytest.approx(0.2)


# ------------------------------------------------------------------------------------------ variants
VARIANTS = [
    *({"payoff": p} for p in ("bce", "soft_f1", "focal", "asl", "weighted_bce")),
    *({"disagreement": d} for d in ("kl", "js", "kl_clipped")),
    {"correctness": "positives"},
    {"rarity": "inverse_sqrt"},
]


@pytest.mark.parametrize("overrides", VARIANTS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_every_objective_variant_trains(overrides: dict) -> None:
    x, y, freq = _data(n=2 * BATCH)
    model = _model(freq, eager=True, schedule="simultaneous", **overrides)
    model(x[:2])
    before = [w.copy() for w in model.get_weights()]
    logs = _fit(model, x, y)
    assert np.isfinite(logs["loss"]).all() and np.isfinite(logs["potential"]).all()
    assert all(np.isfinite(w).all() for w in model.get_weights())
    assert _max_abs(model.get_weights(), before) > 1e-4
    # soft-F1 is a score in [0, 1]; every other payoff is a negated loss
    assert (0 < logs["payoff"][0] <= 1) if overrides.get("payoff") == "soft_f1" else logs["payoff"][0] < 0
