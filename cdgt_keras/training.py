"""fit_model: the one place that trains CDGTModel in memory, with the optimizer, schedule and early stopping of
learning.py, a checkpoint every epoch (checkpoint.py) and an exact resume (resume.py).

Keras, TensorFlow, numpy and scipy only, imported when fit_model runs, so that importing this module stays light.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cdgt_keras.cadence import CHECKPOINT_EVERY_SECONDS
from cdgt_keras.config import CDGTConfig
from cdgt_keras.data import MultiLabelData


def fit_model(config: CDGTConfig, train: MultiLabelData, validation: MultiLabelData, *,
              callbacks: list | None = None, progress: Callable[[int], Any] | None = None,
              checkpoint_dir: str | Path | None = None, resume: bool = False,
              checkpoint_every: float = CHECKPOINT_EVERY_SECONDS) -> tuple[Any, Any, float]:
    """Build, compile and fit CDGTModel (cdgt_keras.learning: learning-rate schedule, validation ranking metrics,
    early stopping with best weights); returns (model, history, train seconds of this attempt).

    The one place that trains in memory; `cdgt train` (pipeline/train.py's run_training) and the benchmarks
    (bench/) both call it. Epoch e is shuffled by (seed, e) alone (resume.py). With `checkpoint_dir` the full
    training state is saved there at an epoch end once `checkpoint_every` seconds have passed since the last save
    (cdgt_keras.cadence; 0: every epoch); `resume` continues from it, and the run then ends
    exactly as an uninterrupted one. `history.history` covers every epoch of the run, resumed ones too.
    `progress(start epoch)`: a callback that shows the training (`cdgt train`'s progress bar), run last.
        >>> model, history, seconds = fit_model(  # doctest: +SKIP
        ...     CDGTConfig(epochs=2), splits["train"], splits["validation"])
    """
    import keras

    from cdgt_keras import checkpoint
    from cdgt_keras.centroids import centroid_matrix
    from cdgt_keras.inputs import _features_tensor, make_dataset, to_sparse_tensor, without_autotuning
    from cdgt_keras.label_text import label_table
    from cdgt_keras.labels import label_frequencies
    from cdgt_keras.learning import RankingMonitor, fit_setup
    from cdgt_keras.neighbours import MemoryShape
    from cdgt_keras.resume import EpochHistory, epoch_batches
    from cdgt_keras.settling import settle

    started = time.perf_counter()  # the attempt's time covers building the model and its memory's shape
    counts, freq = label_frequencies(train.labels, train.num_labels)
    keras.utils.set_random_seed(config.seed)
    centroids = centroid_matrix(train.features, train.labels, config.centroid_features) \
        if config.centroid_features else None  # made once: for the model's shape and for settle
    label_rows = label_table(config, train.label_features, train.features, train.ids, train.label_names)
    memory = MemoryShape.for_config(config, train.features, train.labels, label_rows, centroids,
                                    train.embedding_columns)
    setup = fit_setup(config, freq, train.num_features, train.num_examples, memory, train.embedding_columns)
    model, stop, steps, epochs = setup.model, setup.early_stopping, setup.steps, setup.epochs
    start = 0
    if checkpoint_dir is not None and resume:
        start = checkpoint.resume_epoch(model, str(checkpoint_dir), stop, epochs, setup.averaging)
    history = EpochHistory(checkpoint_dir, start) if checkpoint_dir is not None else None
    monitors = [RankingMonitor(validation, counts, train.num_examples, config), *(callbacks or [])]
    after = [history, checkpoint.TrainingCheckpoint(str(checkpoint_dir), stop, setup.averaging, checkpoint_every)] \
        if history is not None else []
    after += [progress(start)] if progress is not None else []
    callbacks = setup.callbacks(config, monitors, after)
    if start >= epochs:  # the last attempt had finished training (or stopped early): nothing to fit
        checkpoint.finish_without_training(model, stop, setup.averaging)
        settle(model, train.features, train.labels, validation.features, validation.labels,
               config.neighbour_weights, config.batch_size, label_features=label_rows,
               centroids=centroids)
        return model, history, time.perf_counter() - started
    import tensorflow as tf

    examples = tf.data.Dataset.from_tensor_slices((_features_tensor(train.features),
                                                   to_sparse_tensor(train.labels)))
    data = epoch_batches(examples, train.num_examples, config.batch_size, config.seed, start, epochs, steps)
    objective = make_dataset(validation.features, validation.labels, batch_size=config.batch_size) \
        if config.validation_objective else None  # val_payoff and the rest; RankingMonitor scores the ranking
    fitted = model.fit(without_autotuning(data), steps_per_epoch=steps, initial_epoch=start,
                       validation_data=objective, epochs=epochs, callbacks=callbacks, verbose=0)
    settle(model, train.features, train.labels, validation.features, validation.labels, config.neighbour_weights,
           config.batch_size, label_features=label_rows, centroids=centroids)
    return model, history if history is not None else fitted, time.perf_counter() - started
