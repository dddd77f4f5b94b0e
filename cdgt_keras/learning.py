"""How a CDGTModel is trained, for every path (`cdgt train`, the bench, the TFX Trainer): its optimizers, the
learning-rate schedule, the validation ranking monitor and early stopping with best weights.

- `build_trainable(config, label_freq)`: a compiled CDGTModel (the shared encoder's optimizer is
  `encoder_optimizer(config)`: LazyAdam or SparseAdagrad; the players make their own).
- `training_epochs(config, num_labels)`: `epochs`, longer on a large label space (`label_epoch_growth`).
- `StepSchedule`: every optimizer's learning rate as base x m(step): m rises linearly over the first
  `warmup_fraction` of the steps, then stays 1 (`lr_schedule="constant"`) or follows a cosine to 0 ("cosine").
- `RankingMonitor`: each epoch, P@k / PSP@k / nDCG@k of the validation split, added to the logs as `val_<name>`.
- `StopOnNonFiniteLoss`: a NaN or infinite loss stops training with an error (nothing diverged is saved).
- `early_stopping(config)`: stop on `val_<early_stopping_metric>` (highest is best) and restore the best weights.
- `fit_setup(config, label_freq, width, num_train)`: all of the above put together the one way every path trains,
  with the weight averaging of `averaging_fraction` (cdgt_keras.averaging).

Example:
    >>> multiplier(step=55, total=100, warmup=10, kind="cosine")   # halfway through the decay: (1 + cos(pi/2)) / 2
    0.5
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np

from cdgt_keras import metrics as M
from cdgt_keras.config import CDGTConfig

RANKING_METRICS = ("p_at_1", "p_at_3", "p_at_5", "psp_at_1", "psp_at_3", "psp_at_5", "ndcg_at_5")


def multiplier(step: int, total: int, warmup: int, kind: str) -> float:
    """The learning-rate factor at `step` (0-based) of `total` steps with `warmup` warm-up steps."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    if kind == "constant" or total <= warmup:
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def epoch_steps(num_train: int, config: CDGTConfig) -> tuple[int, int]:
    """(batches in one pass over the training split, steps in one epoch): an epoch is one pass, or whole passes
    up to at least `min_steps_per_epoch` steps.

        >>> epoch_steps(1353, CDGTConfig(batch_size=256, min_steps_per_epoch=100))   # 6 batches a pass, 17 passes
        (6, 100)
    """
    per_pass = max(1, math.ceil(num_train / config.batch_size))
    return per_pass, max(per_pass, config.min_steps_per_epoch)


# The label count below which `label_epoch_growth` adds nothing (2^12; every small set here has under 1,000 labels).
LABEL_BUDGET_BASE = 4096


def training_epochs(config: CDGTConfig, num_labels: int) -> int:
    """The epochs a run trains: `epochs`, grown by `label_epoch_growth` of itself for each doubling of the label
    count beyond LABEL_BUDGET_BASE, rounded half up (a large label space has many rare labels whose output weights
    each learn from a few rows a pass, so it trains longer; at 1 epoch the share rounds away).

        >>> config = CDGTConfig(epochs=10, label_epoch_growth=0.1)
        >>> training_epochs(config, 598), training_epochs(config, 18632), training_epochs(config, 41405)
        (10, 12, 13)
        >>> training_epochs(config.replace(epochs=1), 41405)   # 1.33 rounds to 1
        1
    """
    doublings = math.log2(num_labels / LABEL_BUDGET_BASE) if num_labels > LABEL_BUDGET_BASE else 0.0
    return math.floor(config.epochs * (1.0 + config.label_epoch_growth * doublings) + 0.5)


def encoder_optimizer(config: CDGTConfig, num_labels: int | None = None) -> keras.optimizers.Optimizer:
    """The shared encoder's optimizer (`config.encoder_optimizer`), at its base rate `config.encoder_rate()`.
    Both update only the rows of the sparse first layer that a batch touches. Adagrad's accumulators start at 0,
    so a row's first step is `rate` whatever the scale of its gradient (as Adam's is), then shrinks as 1/sqrt of
    the row's summed squared gradients. `num_labels` sets Adam's epsilon under `adam_epsilon_per_label`.

        >>> type(encoder_optimizer(CDGTConfig(encoder_optimizer="adagrad"))).__name__
        'SparseAdagrad'
    """
    from cdgt_keras.sparse import LazyAdam, SparseAdagrad, SparseRMSprop

    if config.encoder_optimizer == "adagrad":
        return SparseAdagrad(config.encoder_rate(), initial_accumulator_value=0.0)
    if config.encoder_optimizer == "rmsprop":
        return SparseRMSprop(config.encoder_rate())
    if config.adam_epsilon_per_label and num_labels is None:
        raise ValueError("adam_epsilon_per_label: the encoder's Adam needs the number of labels")
    return LazyAdam(config.encoder_rate(), epsilon=config.optimizer_epsilon(num_labels or 1))


def build_trainable(config: CDGTConfig, label_freq: np.ndarray, memory: Any = None, num_train: int = 0,
                    wide_columns: int = 0, dense_columns: int = 0) -> Any:
    """A compiled CDGTModel whose shared encoder trains with `encoder_optimizer(config)`; `memory` (a
    cdgt_keras.neighbours.MemoryShape) sizes its neighbour votes and label centroids when the config asks for them;
    `num_train`, the training rows behind `label_freq` (needed by `rarity="propensity"`); `wide_columns`, the
    leading input columns its wide parts read (0: all; `wide_columns`); `dense_columns`, the leading columns every
    row fills (a text embedding's), which the encoder's first layer multiplies as a dense block."""
    from cdgt_keras.model import CDGTModel

    model = CDGTModel(config, label_freq, memory, num_train, wide_columns, dense_columns)
    model.compile(optimizer=encoder_optimizer(config, int(np.size(label_freq))), jit_compile=False)
    return model


class StepSchedule(keras.callbacks.Callback):
    """Sets each optimizer's learning rate before every training step (resumes from the optimizer's step)."""

    def __init__(self, config: CDGTConfig, total_steps: int):
        super().__init__()
        self.config, self.total = config, max(1, int(total_steps))
        self.warmup = round(config.warmup_fraction * self.total)

    def _optimizers(self) -> list[tuple[Any, float]]:
        model = self.model
        pairs = [(model.optimizer, self.config.encoder_rate())]
        pairs += [(opt, self.config.player_learning_rate(i)) for i, opt in enumerate(model.player_optimizers)]
        return pairs

    def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        step = int(self.model.player_optimizers[0].iterations.numpy())
        factor = multiplier(step, self.total, self.warmup, self.config.lr_schedule)
        for optimizer, base in self._optimizers():
            optimizer.learning_rate.assign(base * factor)


class RankingMonitor(keras.callbacks.Callback):
    """Validation P@k / PSP@k / nDCG@k each epoch, as `val_<name>` in the logs (before early stopping reads them)."""

    def __init__(self, validation: Any, train_counts: np.ndarray, num_train: int, config: CDGTConfig):
        super().__init__()
        self.validation, self.labels, self.config = validation, validation.labels, config
        self.props = M.propensities(train_counts, num_train, config.psp_a, config.psp_b)
        self._scorer: tuple[Any, Any] | None = None  # (the model, its traced fused answer: inputs.batch_scorer)
        self.rows: np.ndarray | None = None  # the last epoch's per-example stopping metric (stopping_rows)

    def top_k(self) -> tuple[np.ndarray, np.ndarray]:
        """The validation split's top 5 labels and scores per example by the players' fused answer
        (`model.fused_probs`: the model's answer while its memories' weights are 0, as they are until `settle`),
        scored a chunk of rows at a time: no [n, L] matrix (at 18.6k labels and 6k examples it would be 440 MB each
        epoch). Traced once, without the memory layers: on debtags the first epoch's ranking took 1.2 s with them."""
        from cdgt_keras.chunked_eval import top_k_chunks
        from cdgt_keras.evaluation import predict_chunks
        from cdgt_keras.inputs import batch_scorer

        if self._scorer is None or self._scorer[0] is not self.model:
            self._scorer = (self.model, batch_scorer(self.model.fused_probs))
        k = max(int(name[-1]) for name in RANKING_METRICS)
        return top_k_chunks(predict_chunks(self.model, self.validation, self.config.batch_size,
                                           score=self._scorer[1]), k)

    def values(self, scores: np.ndarray | tuple[np.ndarray, np.ndarray]) -> dict[str, float]:
        """The ranking metrics of `scores`: dense [n, L] or a top-k pair (the same figures)."""
        out = {}
        for name in RANKING_METRICS:
            k = int(name[-1])
            if name.startswith("p_at"):
                out[name] = M.precision_at_k(self.labels, scores, k)
            elif name.startswith("psp"):
                out[name] = M.psp_at_k(self.labels, scores, k, self.props)
            else:
                out[name] = M.ndcg_at_k(self.labels, scores, k)
        return out

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if logs is None:
            return
        top = self.top_k()
        logs.update({f"val_{k}": v for k, v in self.values(top).items()})
        self.rows = stopping_rows(self.labels, top, self.config, self.props)


def stopping_rows(labels: Any, scores: Any, config: CDGTConfig, props: np.ndarray) -> np.ndarray | None:
    """The per-example values of validation's `early_stopping_metric` (their mean is the metric), when early
    stopping tests them against the first epoch's (early_stopping_min_z > 0); else None. Every validation monitor
    (RankingMonitor here, the TFX Trainer's report) keeps them as its `rows`."""
    if config.early_stopping_min_z <= 0:  # the config refuses it with the payoff as the metric
        return None
    return M.ranking_rows(labels, scores, config.early_stopping_metric, props)


class NonFiniteLoss(ValueError):
    """Training diverged: the loss became NaN or infinite."""


class StopOnNonFiniteLoss(keras.callbacks.Callback):
    """Raise NonFiniteLoss the first batch whose loss is NaN or infinite, so that no diverged model is written."""

    def __init__(self) -> None:
        super().__init__()
        self.epoch = 0

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.epoch = epoch

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            raise NonFiniteLoss(f"training diverged: the loss is {float(loss)} at epoch {self.epoch + 1}, batch "
                                f"{batch + 1}; no model was written (try a smaller learning_rate)")


def early_stopping(config: CDGTConfig) -> keras.callbacks.EarlyStopping | None:
    """Stop when val_<early_stopping_metric> has not improved for `early_stopping_patience` epochs; keep the best
    weights (copied on the device: stopping.py), a later epoch's only when it beats the first by
    `early_stopping_min_z` paired standard errors. None when patience is 0. The payoff (not the loss -Phi): the
    literal KL reward can raise Phi while predictions get worse."""
    from cdgt_keras.stopping import EarlyStopping

    if config.early_stopping_patience <= 0:
        return None
    return EarlyStopping(monitor=f"val_{config.early_stopping_metric}", mode="max",
                         patience=config.early_stopping_patience, restore_best_weights=True,
                         min_z=config.early_stopping_min_z)


def wide_columns(config: CDGTConfig, embedding_columns: int) -> int:
    """The leading input columns the wide parts read, given the input's `embedding_columns` (the text embedding's,
    cdgt_keras.data.MultiLabelData): 0 (every column) under `wide_input="features"` or without wide parts, the
    embedding's under `wide_input="embedding"`, which an input without an embedding cannot serve.

        >>> config = CDGTConfig(wide="all", wide_input="embedding", text_embedding="all-MiniLM-L6-v2")
        >>> wide_columns(config, 384), wide_columns(config.replace(wide_input="features"), 384)
        (384, 0)
    """
    if config.wide == "none" or config.wide_input == "features":
        return 0
    if embedding_columns <= 0:
        raise ValueError("wide_input='embedding': these features have no text embedding columns (text data read "
                         "with text_embedding set); use wide_input='features' here")
    return int(embedding_columns)


@dataclass
class FitSetup:
    """What every training road (`cdgt train` and the bench through pipeline/train.py, the TFX Trainer) sets up the
    same way before model.fit: the built model, its early stopping and the steps of one epoch. Written once here,
    so that both roads train with the same optimizers, schedule and stopping rule."""

    model: Any
    early_stopping: keras.callbacks.EarlyStopping | None
    steps: int  # training steps in one epoch (epoch_steps)
    epochs: int  # epochs to train (training_epochs): model.fit's `epochs`
    averaging: Any = None  # cdgt_keras.averaging.WeightAveraging under averaging_fraction > 0

    def callbacks(self, config: CDGTConfig, monitors: list[keras.callbacks.Callback],
                  after: list[keras.callbacks.Callback]) -> list[keras.callbacks.Callback]:
        """model.fit's callbacks, in the order they must run: a non-finite loss stops first, the schedule sets the
        rates, the weight averaging takes its snapshots and puts the mean in place, `monitors` add the val_ figures
        early stopping reads, early stopping, the averaging puts the training weights back, then `after` (the
        checkpoint after early stopping, whose progress it saves; then what reports the epoch)."""
        stop = [self.early_stopping] if self.early_stopping is not None else []
        if getattr(self.early_stopping, "min_z", 0.0) > 0:  # its test reads a monitor's rows
            source = next((m for m in monitors if hasattr(m, "rows")), None)
            if source is None:
                raise ValueError("early_stopping_min_z > 0: no validation monitor keeps per-example rows")
            self.early_stopping.rows = lambda: source.rows
        swap_in, swap_out = self.averaging.callbacks() if self.averaging is not None else (None, None)
        return [StopOnNonFiniteLoss(), StepSchedule(config, self.steps * self.epochs),
                *([swap_in] if swap_in else []), *monitors, *stop, *([swap_out] if swap_out else []), *after]


def fit_setup(config: CDGTConfig, label_freq: np.ndarray, width: int, num_train: int, memory: Any = None,
              embedding_columns: int = 0) -> FitSetup:
    """A compiled CDGTModel built for inputs of `width` (every optimizer too, so that a checkpoint can load into
    it), with `early_stopping(config)` and the epoch's steps over `num_train` training rows; `memory` as in
    build_trainable; `embedding_columns`, the input's leading text-embedding columns (`wide_columns`; the encoder's
    first layer multiplies them as a dense block). Under a distribution strategy, call it inside the strategy's
    scope."""
    from cdgt_keras.averaging import WeightAveraging

    model = build_trainable(config, label_freq, memory, num_train, wide_columns(config, embedding_columns),
                            embedding_columns)
    model.build((None, width))
    steps, epochs = epoch_steps(num_train, config)[1], training_epochs(config, len(label_freq))
    averaging = WeightAveraging(steps * epochs, config.averaging_fraction, config.averaging_every) \
        if config.averaging_fraction > 0 else None
    return FitSetup(model, early_stopping(config), steps, epochs, averaging)
