"""Subprocess worker for test_distribute.py: one fit epoch on 1 device vs MirroredStrategy on 2 logical CPUs.

Logical devices must be configured before TensorFlow initialises (STACK.md item 4), hence a fresh process.
Usage: python _mirrored_worker.py SCHEDULE [SCHEDULE ...]; prints one JSON object on the last stdout line:
{schedule: {"max_abs_diff", "loss_single", "loss_mirrored", "replicas", "iterations_single", ...}}.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

_cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    _cpus[0], [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])

import keras  # noqa: E402
import numpy as np  # noqa: E402

from cdgt_keras.config import CDGTConfig  # noqa: E402
from cdgt_keras.model import CDGTModel  # noqa: E402

FEATURES, LABELS, EXAMPLES, BATCH = 16, 15, 64, 16


def _data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((EXAMPLES, FEATURES)).astype(np.float32)
    y = (rng.random((EXAMPLES, LABELS)) < np.linspace(0.5, 0.05, LABELS)).astype(np.float32)
    return x, y, y.mean(axis=0)


def _model(schedule: str, freq: np.ndarray, eager: bool = False) -> CDGTModel:
    cfg = CDGTConfig(n_players=3, overlap=0.4, alpha=0.5, beta=0.2, schedule=schedule, fusion="attention",
                     encoder_hidden=(8,), head_hidden=(6,), dropout=0.0, attention_dim=4)
    model = CDGTModel(cfg, freq)
    # SGD with momentum, not Adam: Adam is nearly invariant to the scale of its gradients, so it would hide a
    # wrong 1/num_replicas scaling; momentum keeps optimizer state that must stay in sync across replicas.
    model.player_optimizers = [keras.optimizers.SGD(0.1, momentum=0.9) for _ in range(cfg.n_players)]
    model.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9), run_eagerly=eager)
    return model


def _run(schedule: str, strategy: tf.distribute.Strategy, weights: str, x: np.ndarray, y: np.ndarray,
         freq: np.ndarray) -> dict:
    with strategy.scope():
        # the 1-device reference runs eagerly (saves a ~5 s trace); the mirrored run is the compiled path
        model = _model(schedule, freq, eager=strategy.num_replicas_in_sync == 1)
        model(x[:2])
        model.load_weights(weights)
    history = model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    return {"weights": [np.asarray(w) for w in model.get_weights()],
            "loss": float(history.history["loss"][-1]),
            "payoff": float(history.history["payoff"][-1]),
            "replicas": int(strategy.num_replicas_in_sync),
            "eager": bool(model.run_eagerly),
            "iterations": [int(o.iterations.numpy()) for o in model.player_optimizers]
            + [int(model.optimizer.iterations.numpy())]}


def main(schedules: list[str]) -> None:
    x, y, freq = _data()
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for schedule in schedules:
            keras.utils.set_random_seed(3)
            weights = os.path.join(tmp, f"{schedule}.weights.h5")
            init = _model(schedule, freq)
            init(x[:2])
            init.save_weights(weights)
            single = _run(schedule, tf.distribute.get_strategy(), weights, x, y, freq)
            mirrored = _run(schedule, tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]), weights, x, y, freq)
            initial = init.get_weights()
            out[schedule] = {
                "max_abs_diff": max(float(np.max(np.abs(a - b))) for a, b in zip(single["weights"],
                                                                                   mirrored["weights"])),
                "max_abs_change": max(float(np.max(np.abs(a - b))) for a, b in zip(single["weights"], initial)),
                "num_weights": [len(single["weights"]), len(mirrored["weights"])],
                **{f"{key}_{run}": res[key] for run, res in (("single", single), ("mirrored", mirrored))
                   for key in ("loss", "payoff", "replicas", "iterations", "eager")},
            }
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:] or ["cyclic", "simultaneous"])
