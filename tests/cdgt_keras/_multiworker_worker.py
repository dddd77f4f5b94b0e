"""Subprocess worker for test_multiworker.py: a few fit steps under the strategy the environment selects.

With TF_CONFIG set (two workers on 127.0.0.1) that is MultiWorkerMirroredStrategy; without it, one process on
the default strategy. Usage: python _multiworker_worker.py WEIGHTS_IN OUT_PREFIX SCHEDULE; writes
OUT_PREFIX.init.npz and OUT_PREFIX.npz (weights before and after) and prints the logged loss as JSON.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import tensorflow as tf

from cdgt_keras.config import CDGTConfig
from cdgt_keras.distribute import training_strategy
from cdgt_keras.model import CDGTModel

FEATURES, LABELS, EXAMPLES, GLOBAL_BATCH = 16, 15, 64, 16


def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    x = rng.standard_normal((EXAMPLES, FEATURES)).astype(np.float32)
    y = (rng.random((EXAMPLES, LABELS)) < np.linspace(0.5, 0.05, LABELS)).astype(np.float32)
    return x, y


def build(schedule: str, freq: np.ndarray) -> CDGTModel:
    cfg = CDGTConfig(n_players=3, overlap=0.4, schedule=schedule, encoder_hidden=(8,), head_hidden=(6,),
                     dropout=0.0, learning_rate=0.1)
    model = CDGTModel(cfg, freq)
    # SGD with momentum: a wrong cross-worker gradient scale changes every update (Adam would hide it)
    model.player_optimizers = [keras.optimizers.SGD(0.1, momentum=0.9) for _ in range(cfg.n_players)]
    model.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9))
    return model


def main(weights_in: str, out_prefix: str, schedule: str) -> None:
    x, y = data()
    strategy = training_strategy()
    with strategy.scope():
        model = build(schedule, y.mean(axis=0))
        model(x[:2])
        model.load_weights(weights_in) if os.path.exists(weights_in) else model.save_weights(weights_in)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH).with_options(options)
    np.savez(out_prefix + ".init.npz", *[np.asarray(w) for w in model.get_weights()])
    history = model.fit(dataset, epochs=1, verbose=0)
    np.savez(out_prefix + ".npz", *[np.asarray(w) for w in model.get_weights()])
    print(json.dumps({"loss": float(history.history["loss"][-1]), "replicas": strategy.num_replicas_in_sync,
                      "strategy": type(strategy).__name__}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
