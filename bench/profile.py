"""`cdgt bench profile`: where a training step's time goes, on a data set's real features.

For one config it times, per batch of the training split (after a warm-up batch): the forward pass of the whole
model, forward + backward (every gradient the step takes, no update), and the full training step (the game's
updates included). Their differences are the backward pass and the optimizers' updates. The same is timed on the
dense road (Keras' Dense: sparse_dense_matmul with a dense [V, H] kernel gradient, and Keras' Adam) so the gain of
the sparse road (SparseDense + the config's encoder optimizer, LazyAdam or SparseAdagrad) is measured, not assumed.

Example:
    >>> rows = profile_steps("debtags", CDGTConfig.preset("recommended"), batches=30)  # doctest: +SKIP
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from cdgt_keras.config import CDGTConfig


def _timed(fn: Any, batches: list) -> float:
    fn(batches[0])  # trace and warm up
    started = time.perf_counter()
    for batch in batches[1:]:
        fn(batch)
    return (time.perf_counter() - started) / max(1, len(batches) - 1)


def _dense_road(model: Any) -> None:
    """Swap the model's SparseDense for Keras' own matmul and its LazyAdam for Keras' Adam (in place, before the
    model is built)."""
    import keras

    from cdgt_keras.sparse import SparseDense

    for layer in model._flatten_layers():
        if isinstance(layer, SparseDense):
            layer.call = lambda inputs, training=None, _l=layer: keras.layers.Dense.call(_l, inputs)
    model.player_optimizers = [keras.optimizers.Adam(float(o.learning_rate.numpy())) for o in model.player_optimizers]


def profile_road(data: Any, config: CDGTConfig, batches: int, dense: bool) -> dict[str, float]:
    """Seconds per batch of forward, forward + backward, and the full training step on one road."""
    import tensorflow as tf

    from cdgt_keras import train_step as steps
    from cdgt_keras.inputs import make_dataset
    from cdgt_keras.labels import label_frequencies
    from cdgt_keras.learning import build_trainable, wide_columns

    train = data.splits["train"]
    _, freq = label_frequencies(train.labels, train.num_labels)
    model = build_trainable(config, freq, num_train=train.num_examples,
                            wide_columns=wide_columns(config, train.embedding_columns),
                            dense_columns=train.embedding_columns)
    if dense:
        import keras

        model.compile(optimizer=keras.optimizers.Adam(config.learning_rate), jit_compile=False)
    ds = make_dataset(train.features, train.labels, batch_size=config.batch_size, shuffle=True, seed=0)
    items = list(ds.take(batches + 1))
    if dense:
        _dense_road(model)
    model(items[0][0])

    @tf.function(reduce_retracing=True)
    def forward(batch: Any) -> Any:
        return model(batch[0], training=True)

    @tf.function(reduce_retracing=True)
    def backward(batch: Any) -> Any:
        x, y = steps.unpack(batch, model.num_labels)
        with tf.GradientTape() as tape:
            contexts = model.contexts(x, training=True)
            probs = [model.player_probs(i, c, x, training=True) for i, c in enumerate(contexts)]
            loss = -model.game(y, probs, contexts, model.beta_now()).potential
        return tape.gradient(loss, model.trainable_variables)

    @tf.function(reduce_retracing=True)
    def full(batch: Any) -> Any:
        return model.train_step(batch)

    return {"forward": _timed(forward, items), "forward_backward": _timed(backward, items),
            "train_step": _timed(full, items)}


def profile_steps(dataset: str, config: CDGTConfig, batches: int = 30) -> list[dict[str, Any]]:
    """Both roads on `dataset`: one row each, seconds per batch and what a whole epoch takes."""
    from cdgt.bench.datasets import load_dataset

    data = load_dataset(dataset, features=config)  # the config's text features, the embedding's included
    train = data.splits["train"]
    per_epoch = int(np.ceil(train.num_examples / config.batch_size))
    rows = []
    encoder_opt = "SparseAdagrad" if config.encoder_optimizer == "adagrad" else "LazyAdam"
    sparse_road = f"sparse road (SparseDense + {encoder_opt})"
    for road, dense in ((sparse_road, False), ("dense road (Keras Dense + Adam)", True)):
        times = profile_road(data, config, batches, dense)
        rows.append({"road": road, **times, "backward": times["forward_backward"] - times["forward"],
                     "updates": times["train_step"] - times["forward_backward"],
                     "epoch_seconds": times["train_step"] * per_epoch, "batches_per_epoch": per_epoch,
                     "input_width": int(train.num_features), "nnz_per_example": float(
                         train.features.nnz / max(1, train.num_examples)) if hasattr(train.features, "nnz") else None})
    return rows
