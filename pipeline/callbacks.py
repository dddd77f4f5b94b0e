"""TensorBoard for the Trainer. Each run directory (the Trainer's model_run) holds:

- `train/`: Keras' training scalars (`epoch_*`: every player's loss, curiosity, rarity and disagreement, kl_head,
  kl_tail, payoff, potential, learning rate);
- `validation/`: the same on the validation split, plus the headline metrics `ValidationReport` computes
  (Rare-F1, micro-F1, macro-F1, P@1/3/5, PSP@1/3/5, nDCG@1/3/5 as `epoch_<name>`; thresholds tuned on the
  split) and, at the end of training, the images of the label-frequency curve and of each player's F1 on head
  and tail labels. Each figure is written once, in this one place;
- the run's own directory: the HParams summary (every CDGTConfig field) and the experiment's metric list,
  so TensorBoard's HParams dashboard shows each run's validation metrics (run `<run>/validation`, the
  session's `validation` group) against its hyper-parameters.

`EpochLine` prints one short progress line per epoch (the full set of scalars is in TensorBoard).

Example:
    >>> report = ValidationReport(val_x, val_labels, stats, config)                       # doctest: +SKIP
    >>> board = CdgtTensorBoard(log_dir, report=report)                                    # doctest: +SKIP
    >>> log_hparams(log_dir, config, trial_id="run-1")                                     # doctest: +SKIP
    >>> model.fit(..., callbacks=[report, board])  # report first: it adds val_<name> to the logs  # doctest: +SKIP
"""

from __future__ import annotations

import io
import time
from typing import Any

import keras
import numpy as np
import scipy.sparse as sp
import tensorflow as tf

from cdgt.pipeline.plots import frequency_curve, pyplot
from cdgt_keras import metrics as M
from cdgt_keras.config import CDGTConfig
from cdgt_keras.learning import stopping_rows
from cdgt_keras.thresholds import apply_thresholds, tuned_thresholds

TOP_K = (1, 3, 5)
# What ValidationReport adds to the Keras logs (as val_<name>); Keras' TensorBoard writes validation/epoch_<name>.
REPORT_METRICS = ("rare_f1", "micro_f1", "macro_f1", *(f"{m}_at_{k}" for m in ("p", "psp", "ndcg") for k in TOP_K))
VALIDATION_GROUP = "validation"  # Keras' TensorBoard writes validation scalars to <log_dir>/validation


def hparams_metrics() -> list[Any]:
    """The metrics the HParams dashboard shows per run: the validation report and the payoff, in the
    session's `validation` group (tag epoch_<name>, as Keras' TensorBoard names them), and the training loss."""
    from tensorboard.plugins.hparams import api as hp

    names = (*REPORT_METRICS, "payoff", "loss")
    return [*(hp.Metric(f"epoch_{n}", group=VALIDATION_GROUP, display_name=f"validation {n}") for n in names),
            hp.Metric("epoch_loss", group="train", display_name="train loss")]


def log_hparams(log_dir: str, config: CDGTConfig, trial_id: str) -> None:
    """Record the run's hyper-parameters in `log_dir` itself, the parent of train/ and validation/.

    Why there: the HParams plugin treats the run holding the hparams summary as a session and finds its
    metrics in that run and its sub-runs (the metric's group is the sub-run, here `validation`); a summary in a
    sibling directory links no metric. The experiment (`hparams_config`: every config field and the metrics)
    is written with it, so the dashboard lists the metrics before any value is read."""
    from tensorboard.plugins.hparams import api as hp

    values = {k: (v if isinstance(v, bool | int | float | str) else str(v)) for k, v in config.to_dict().items()}
    writer = tf.summary.create_file_writer(log_dir)
    with writer.as_default():
        hp.hparams_config(hparams=[hp.HParam(name) for name in values], metrics=hparams_metrics())
        hp.hparams(values, trial_id=trial_id)
    writer.close()


def figure_to_image(fig: Any) -> tf.Tensor:
    """A matplotlib figure as a [1, H, W, 4] uint8 tensor for tf.summary.image."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    pyplot().close(fig)
    return tf.image.decode_png(buffer.getvalue(), channels=4)[tf.newaxis]


def empty_reason(n_labels: int, n_positives: int, bucket: str) -> str | None:
    """Why a player's bar for one bucket (head or tail) shows no F1, or None when it has one.

        >>> empty_reason(0, 0, "head")
        'no head labels'
        >>> empty_reason(4, 0, "tail")
        '4 tail labels, no positive in validation'
    """
    if n_labels == 0:
        return f"no {bucket} labels"
    if n_positives == 0:
        return f"{n_labels} {bucket} labels, no positive in validation"
    return None


def player_f1_chart(f1: np.ndarray, n_labels: np.ndarray, n_positives: np.ndarray) -> Any:
    """Grouped bars: each player's F1 on its head labels and on its tail labels ([N, 2] arrays; f1 NaN where the
    bucket is empty). An empty bar says why (a middle player owns neither head nor tail labels, or its labels have
    no positive in the validation split); each tick shows how many head and tail labels the player owns."""
    n = f1.shape[0]
    fig, ax = pyplot().subplots(figsize=(1.8 * n + 3, 3.8))
    for j, (bucket, offset) in enumerate((("head", -0.2), ("tail", 0.2))):
        ax.bar(np.arange(n) + offset, np.nan_to_num(f1[:, j]), 0.4, label=f"{bucket} labels")
        for i in range(n):
            reason = empty_reason(int(n_labels[i, j]), int(n_positives[i, j]), bucket)
            if reason is not None:
                ax.text(i + offset, 0.02, reason, rotation=90, ha="center", va="bottom", fontsize=7)
    ax.set_xticks(np.arange(n), [f"player {i + 1}\n{n_labels[i, 0]} head, {n_labels[i, 1]} tail"
                                 for i in range(n)])
    ax.set_ylabel("F1 (validation)")
    ax.set_ylim(0, 1)
    ax.legend()
    fig.tight_layout()
    return fig


def player_f1(players: list[np.ndarray], player_labels: list[np.ndarray], truth: sp.csr_matrix,
              thresholds: np.ndarray, head: np.ndarray,
              tail: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """([N, 2] F1, [N, 2] label counts, [N, 2] validation positives) of each player on L_i ∩ head and
    L_i ∩ tail: its own probabilities, tuned thresholds, micro-F1; F1 is NaN where the player owns no such label
    or they have no positive."""
    f1 = np.full((len(players), 2), np.nan)
    n_labels = np.zeros((len(players), 2), np.int64)
    n_positives = np.zeros((len(players), 2), np.int64)
    for i, (probs, labels) in enumerate(zip(players, player_labels)):
        for j, group in enumerate((head, tail)):
            n_labels[i, j], n_positives[i, j], score = M.player_subset_f1(probs, labels, truth, thresholds, group)
            if score is not None and n_positives[i, j]:
                f1[i, j] = score
    return f1, n_labels, n_positives


class ValidationReport(keras.callbacks.Callback):
    """Each epoch, the headline metrics on the validation split into the Keras logs as val_<name> (early stopping
    and TensorBoard read them there); at the end, `images()` for TensorBoard."""

    def __init__(self, features: tf.data.Dataset, labels: sp.csr_matrix, stats: dict[str, Any], config: CDGTConfig):
        super().__init__()
        self.features, self.labels, self.config = features, sp.csr_matrix(labels), config
        self.head, self.tail = np.asarray(stats["head"], np.int64), np.asarray(stats["tail"], np.int64)
        self.counts = np.asarray(stats["counts"], np.int64)
        self.props = np.asarray(stats["propensities"], np.float64)
        self.thresholds: np.ndarray | None = None
        self.rows: np.ndarray | None = None  # the last epoch's per-example stopping metric (stopping_rows)

    def scores(self) -> np.ndarray:
        return np.asarray(self.model.predict(self.features, verbose=0))

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        probs = self.scores()
        self.thresholds = tuned_thresholds(probs, self.labels, self.config)
        pred = apply_thresholds(probs, self.thresholds)
        values = {"rare_f1": M.rare_f1(self.labels, pred, self.tail), "micro_f1": M.micro_f1(self.labels, pred),
                  "macro_f1": M.macro_f1(self.labels, pred)}
        for k in TOP_K:
            values[f"p_at_{k}"] = M.precision_at_k(self.labels, probs, k)
            values[f"psp_at_{k}"] = M.psp_at_k(self.labels, probs, k, self.props)
            values[f"ndcg_at_{k}"] = M.ndcg_at_k(self.labels, probs, k)
        self.rows = stopping_rows(self.labels, probs, self.config, self.props)
        if logs is not None:
            logs.update({f"val_{k}": float(v) for k, v in values.items()})

    def images(self) -> dict[str, tf.Tensor]:
        """The label-frequency curve and, once an epoch has tuned thresholds, each player's head/tail F1."""
        out = {"label_frequency_curve": figure_to_image(frequency_curve(self.counts, self.head.size, self.tail.size))}
        if self.thresholds is not None:
            counts = player_f1(self.player_scores(), self.model.layout.player_labels, self.labels, self.thresholds,
                               self.head, self.tail)
            out["player_f1_head_tail"] = figure_to_image(player_f1_chart(*counts))
        return out

    def player_scores(self) -> list[np.ndarray]:
        """Each player's probabilities over its own labels on the validation split."""
        parts: list[list[np.ndarray]] = [[] for _ in range(self.model.cdgt_config.n_players)]
        for x in self.features:
            out = self.model(x, training=False, return_players=True)
            for i, p in enumerate(out["players"]):
                parts[i].append(np.asarray(p))
        return [np.concatenate(p) for p in parts]


class CdgtTensorBoard(keras.callbacks.TensorBoard):
    """Keras' TensorBoard callback without its per-evaluation duplicates, plus the report's images.

    Keras also writes every validation value a second time as `evaluation_<name>_vs_iterations` (stepped by
    optimizer iterations); the pipeline evaluates once per epoch, so those equal `epoch_<name>` and are dropped.
    The ValidationReport's images go into the validation run at the end of training."""

    def __init__(self, log_dir: str, report: ValidationReport | None = None, **kwargs: Any):
        super().__init__(log_dir, update_freq="epoch", **kwargs)
        self.report = report

    def on_test_end(self, logs: dict | None = None) -> None:
        self._pop_writer()

    def on_train_end(self, logs: dict | None = None) -> None:
        if self.report is not None:
            with self._val_writer.as_default():
                for name, image in self.report.images().items():
                    tf.summary.image(name, image, step=0)
        super().on_train_end(logs)


class EpochLine(keras.callbacks.Callback):
    """Print `epoch 3/20 (1.9 s)  payoff -0.1160  val_payoff -0.1012  val_rare_f1 0.0213 ...` per epoch."""

    shown = ("payoff", "val_payoff", *(f"val_{name}" for name in M.HEADLINE_METRICS))

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.started = time.monotonic()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        logs = logs or {}
        values = "  ".join(f"{k} {float(logs[k]):.4f}" for k in self.shown if k in logs)
        print(f"[cdgt trainer] epoch {epoch + 1}/{self.params['epochs']} ({time.monotonic() - self.started:.1f} s)"
              f"  {values}", flush=True)
