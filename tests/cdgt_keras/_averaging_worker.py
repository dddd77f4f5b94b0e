"""Subprocess worker for test_averaging.py: weight averaging under MirroredStrategy on 2 logical CPUs.

Logical devices must be configured before TensorFlow initialises (STACK.md item 4), hence a fresh process. One
epoch of 4 steps with a snapshot after each; prints one JSON object on the last stdout line: the snapshots taken
and, per trainable weight, the largest difference between any replica's copy and the mean of the weights after
each step.
"""

from __future__ import annotations

import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

_cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    _cpus[0], [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])

import keras  # noqa: E402
import numpy as np  # noqa: E402
from _mirrored_worker import _data, _model  # noqa: E402

from cdgt_keras.averaging import WeightAveraging  # noqa: E402
from cdgt_keras.config import CDGTConfig  # noqa: E402
from cdgt_keras.learning import FitSetup  # noqa: E402


class _Steps(keras.callbacks.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.weights: list[list[np.ndarray]] = []

    def on_train_batch_end(self, batch, logs=None):
        self.weights.append([np.array(w.numpy()) for w in self.model.trainable_weights])


def main() -> None:
    x, y, freq = _data()
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    keras.utils.set_random_seed(3)
    with strategy.scope():
        model = _model("cyclic", freq)
        model(x[:2])
    averaging, steps = WeightAveraging(total_steps=4, fraction=1.0, every=1), _Steps()
    callbacks = FitSetup(model, None, 4, 1, averaging).callbacks(CDGTConfig(epochs=1), [], [steps])
    model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0, callbacks=callbacks)
    mean = [np.mean([s[i] for s in steps.weights], axis=0) for i in range(len(steps.weights[0]))]
    diffs = []
    for weight, want in zip(model.trainable_weights, mean):
        copies = getattr(weight.value, "values", None) or [weight.value]
        diffs.append(max(float(np.abs(np.asarray(c) - want).max()) for c in copies))
    change = max(float(np.abs(steps.weights[-1][i] - steps.weights[0][i]).max()) for i in range(len(mean)))
    print(json.dumps({"count": averaging.count, "replicas": int(strategy.num_replicas_in_sync),
                      "copies": len(getattr(model.trainable_weights[0].value, "values", [0])),
                      "max_abs_diff": max(diffs), "max_abs_change": change}))


if __name__ == "__main__":
    main()
