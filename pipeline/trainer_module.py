"""The Trainer's module file: `run_fn(fn_args)` trains CDGTModel on the transformed examples and exports it.

custom_config (set by pipeline/pipeline.py; the label-statistics uri is added by components/trainer.py):
    {"cdgt": CDGTConfig.to_dict(), "data": {"feature_kind", "num_features", "feature_names"}, "checkpoint_root": DIR,
     "auc_labels": the most labels TFMA's blessing covers, "code": fingerprint of the training code,
     "label_stats_uri": URI, optionally "checkpoint_every": seconds (cdgt_keras.cadence's default when absent)}

Steps: CDGTModel from the one config and the label frequencies, under MirroredStrategy over the local devices
(logical CPUs are made by the runner); the learning-rate schedule and early stopping of
cdgt_keras.learning (on the config's validation metric, which ValidationReport logs); a checkpoint at an
epoch's end every `checkpoint_every` seconds under `checkpoint_root` (a rerun after a crash resumes there);
per-label thresholds tuned on the validation split; TensorBoard logs in the model_run directory; the serving
SavedModel (serving/export.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import warnings
from collections.abc import Iterator
from typing import Any

import keras
import numpy as np
import scipy.sparse as sp
import tensorflow as tf
import tensorflow_transform as tft

from cdgt.components.label_stats_component import load_stats
from cdgt.pipeline.blessing import blessing_label_ids
from cdgt.pipeline.callbacks import CdgtTensorBoard, EpochLine, ValidationReport, log_hparams
from cdgt.pipeline.transform_module import model_width
from cdgt.serving.export import export_serving_model
from cdgt.serving.preprocessing import raw_from_inputs
from cdgt_keras import checkpoint
from cdgt_keras.cadence import CHECKPOINT_EVERY_SECONDS
from cdgt_keras.centroids import centroid_matrix
from cdgt_keras.config import CDGTConfig
from cdgt_keras.distribute import training_strategy
from cdgt_keras.evaluation import decision_scorer
from cdgt_keras.features import ID, LABELS, model_input, multi_hot, read_labels
from cdgt_keras.inputs import without_autotuning
from cdgt_keras.label_text import label_table, label_texts, named_features, unit_rows
from cdgt_keras.learning import fit_setup
from cdgt_keras.model import CDGTModel
from cdgt_keras.neighbours import MemoryShape
from cdgt_keras.pages import small_pages
from cdgt_keras.records import in_id_order
from cdgt_keras.reranking import tune_reranking
from cdgt_keras.resume import epoch_batches
from cdgt_keras.settling import settle
from cdgt_keras.text import TextOptions
from cdgt_keras.text_embedding import embedding_width
from cdgt_keras.thresholds import tuned_thresholds

_SHUFFLE_LIMIT = 200_000  # examples; a larger train split shuffles within a window of this size


@contextlib.contextmanager
def quiet_exhausted_input() -> Iterator[None]:
    """Drop Keras 3's "Your input ran out of data" warning, a false alarm here.

    Keras warns the first time a dataset of unknown cardinality (every TFRecordDataset) ends, even when it ends
    exactly where it should (keras EpochIterator.catch_stop_iteration; tensorflow/tensorflow#62963): validation
    and predict read each split to its end, and the training set holds exactly `steps_per_epoch` batches an epoch.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Your input ran out of data", category=UserWarning)
        yield


def _files(patterns: list[str]) -> list[str]:
    files = sorted(f for p in patterns for f in tf.io.gfile.glob(p))
    if not files:
        raise FileNotFoundError(f"no transformed examples match {patterns}")
    return files


def _parser(tft_output: Any, kind: str, width: int, num_labels: int, with_labels: bool = True):
    spec = tft_output.transformed_feature_spec()

    def parse(serialized: tf.Tensor) -> Any:
        parsed = tf.io.parse_example(serialized, spec)
        x = model_input(parsed, kind, width)
        return (x, multi_hot(parsed[LABELS], num_labels)) if with_labels else x

    return parse


Records = list[str] | tf.data.Dataset  # a split's files, or its serialized records (split_records)


def split_records(files: list[str], limit: int = _SHUFFLE_LIMIT) -> Records:
    """The serialized records of a transformed split in id order (cdgt_keras.records.in_id_order): the order
    `cdgt train` reads the built split in. ImportExampleGen reshuffles what it imports (TFX 1.16 write_split.py;
    on the local runner it moves a few records), and one seed's batches depend on the order, so without this the
    two roads trained different models. A split without ids, or of more than `limit` records (not held in memory),
    stays in its files' order: its files are returned."""
    records = tf.data.TFRecordDataset(files, compression_type="GZIP")
    spec = {ID: tf.io.FixedLenFeature([1], tf.string, default_value=[b""])}
    data: list[bytes] = []
    ids: list[str] = []
    for batch in records.batch(4096):
        found = tf.io.parse_example(batch, spec)[ID].numpy()[:, 0]
        if not found.all() or len(data) + len(found) > limit:
            return files
        data.extend(batch.numpy())
        ids.extend(value.decode("utf-8") for value in found)
    return tf.data.Dataset.from_tensor_slices(np.array(in_id_order(zip(ids, data)), dtype=object))


def _records(source: Records) -> tf.data.Dataset:
    if isinstance(source, tf.data.Dataset):
        return source
    return tf.data.TFRecordDataset(source, compression_type="GZIP")


def train_dataset(source: Records, parse: Any, batch_size: int, num_train: int, seed: int, start_epoch: int,
                  epochs: int, steps_per_epoch: int | None = None) -> tf.data.Dataset:
    """Epochs start_epoch..epochs-1 of the records in the one resumable order `cdgt train` uses too
    (cdgt_keras/resume.py: each epoch shuffled by (seed, epoch, pass) only), within a window of _SHUFFLE_LIMIT."""
    ds = epoch_batches(_records(source), num_train, batch_size, seed, start_epoch, epochs, steps_per_epoch,
                       _SHUFFLE_LIMIT)
    return without_autotuning(ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE))


def eval_dataset(source: Records, parse: Any, batch_size: int) -> tf.data.Dataset:
    return without_autotuning(_records(source).batch(batch_size).map(parse, num_parallel_calls=tf.data.AUTOTUNE))


def collect_features(source: Records, parse: Any, batch_size: int = 4096) -> sp.csr_matrix:
    """The model input of a split (`parse` without labels: transformed features, sparse or dense) as a csr matrix,
    batch by batch: what the neighbour votes remember (cdgt_keras.neighbours)."""
    parts = [_csr(x) for x in eval_dataset(source, parse, batch_size)]
    if not parts:
        raise ValueError(f"no examples in {source}")
    return sp.vstack(parts, format="csr")


def read_ids(source: Records, batch_size: int = 4096) -> list[str] | None:
    """The record ids of a split in the order `collect_features` reads it, or None when a record has none."""
    spec = {ID: tf.io.FixedLenFeature([1], tf.string, default_value=[b""])}
    ids = [i.decode("utf-8") for batch in _records(source).batch(batch_size)
           for i in tf.io.parse_example(batch, spec)[ID].numpy()[:, 0]]
    return ids if all(ids) else None


def _csr(x: Any) -> sp.csr_matrix:
    """A model input batch (tf.SparseTensor or dense tensor) as a csr matrix."""
    if isinstance(x, tf.SparseTensor):
        idx = x.indices.numpy()
        return sp.csr_matrix((x.values.numpy(), (idx[:, 0], idx[:, 1])),
                             shape=tuple(int(d) for d in x.dense_shape.numpy()))
    return sp.csr_matrix(x.numpy())


def transformed_label_features(tft_output: Any, kind: str, width: int, names: list[str],
                               feature_names: list[str] | None = None) -> sp.csr_matrix | None:
    """The label texts' rows (cdgt_keras.label_text) on the Trainer's road: text through the Transform graph, the
    rows `label_features` makes in memory; a sparse bag of words by its `feature_names` (the Transform passes it
    through); None otherwise."""
    if kind == "sparse" and feature_names:
        return named_features(feature_names, names)
    if kind != "text":
        return None
    raw = raw_from_inputs(kind, tft_output.raw_feature_spec(), tf.constant(label_texts(names)))
    return unit_rows(_csr(model_input(tft_output.transform_features_layer()(raw), kind, width)))


def checkpoint_dir(root: str, config: CDGTConfig, train_files: list[str], stats_uri: str, code: str = "") -> str:
    """A directory that a rerun of the same training (same config, data, statistics, code) finds again."""
    key = json.dumps({"config": config.to_dict(), "train": train_files, "stats": stats_uri, "code": code},
                     sort_keys=True)
    return os.path.join(root, hashlib.sha256(key.encode()).hexdigest()[:16])


def fit(model: CDGTModel, train: Any, validation: tf.data.Dataset | None, steps: int, epochs: int, start: int,
        callbacks: list[keras.callbacks.Callback],
        early: keras.callbacks.EarlyStopping | None = None, averaging: Any = None) -> dict[str, list[float]]:
    """model.fit from epoch `start` (resumed) to `epochs` (cdgt_keras.learning.training_epochs), the objective
    evaluated on `validation` each epoch (None: not evaluated, config.validation_objective); returns the history."""
    if start >= epochs:  # a resumed run that had finished training (or stopped early)
        checkpoint.finish_without_training(model, early, averaging)
        return {}
    with quiet_exhausted_input():
        history = model.fit(train, validation_data=validation, epochs=epochs, initial_epoch=start,
                            steps_per_epoch=steps, callbacks=callbacks, verbose=0)
    return {k: [float(v) for v in vs] for k, vs in history.history.items()}


def run_fn(fn_args: Any) -> None:
    """TFX Trainer entry point."""
    small_pages()  # as the command line does (cdgt_keras.pages): a Kubeflow container starts here
    custom = fn_args.custom_config
    config = CDGTConfig.from_dict(custom["cdgt"])
    data, stats = custom["data"], load_stats(custom["label_stats_uri"])
    kind, num_labels = data["feature_kind"], int(stats["num_labels"])
    tft_output = tft.TFTransformOutput(fn_args.transform_output)
    width = model_width(kind, int(data.get("num_features") or 0), tft_output, TextOptions.from_config(config))
    train_files, val_files = _files(fn_args.train_files), _files(fn_args.eval_files)
    train_records, val_records = split_records(train_files), split_records(val_files)
    parse = _parser(tft_output, kind, width, num_labels)
    ckpt = checkpoint_dir(custom["checkpoint_root"], config, train_files, custom["label_stats_uri"],
                          custom.get("code", ""))

    no_labels = _parser(tft_output, kind, width, num_labels, with_labels=False)
    names = stats.get("label_names") or [str(i) for i in range(num_labels)]
    remembered, label_x, centroids = None, None, None
    if MemoryShape.wanted(config):  # the memory layers remember the transformed training split
        remembered = collect_features(train_records, no_labels), read_labels(train_records, num_labels)
        label_x = label_table(config, transformed_label_features(tft_output, kind, width, names, data.get(
            "feature_names")), remembered[0], read_ids(train_records) if config.label_documents else None, names) \
            if config.label_text else None
        centroids = centroid_matrix(*remembered, config.centroid_features) if config.centroid_features else None
    keras.utils.set_random_seed(config.seed)
    strategy = training_strategy()  # MultiWorkerMirrored under TF_CONFIG, else Mirrored over local devices
    print(f"[cdgt trainer] {type(strategy).__name__}, {strategy.num_replicas_in_sync} replica(s); "
          f"checkpoints in {ckpt}", flush=True)
    embedded = embedding_width(TextOptions.from_config(config)) if kind == "text" else 0
    with strategy.scope():
        setup = fit_setup(config, np.asarray(stats["freq"], np.float64), width, int(stats["num_train"]),
                          MemoryShape.for_config(config, *remembered, label_x, centroids, embedded)
                          if remembered else None, embedded)
    model, early, steps, epochs = setup.model, setup.early_stopping, setup.steps, setup.epochs
    start = checkpoint.resume_epoch(model, ckpt, early, epochs, setup.averaging)
    if start:
        print(f"[cdgt trainer] resuming from the checkpoint after epoch {start}", flush=True)
    val_x = eval_dataset(val_records, no_labels, config.batch_size)
    val_labels = read_labels(val_records, num_labels)
    report = ValidationReport(val_x, val_labels, stats, config)
    callbacks = setup.callbacks(config, [report, CdgtTensorBoard(fn_args.model_run_dir, report)],
                                [checkpoint.TrainingCheckpoint(ckpt, early, setup.averaging, custom.get(
                                    "checkpoint_every", CHECKPOINT_EVERY_SECONDS)), EpochLine()])
    log_hparams(fn_args.model_run_dir, config, trial_id=os.path.basename(ckpt))
    history = fit(model, train_dataset(train_records, parse, config.batch_size, int(stats["num_train"]),
                                       config.seed, start, epochs, steps),
                  eval_dataset(val_records, parse, config.batch_size) if config.validation_objective else None,
                  steps, epochs, start, callbacks, early, setup.averaging)

    if remembered or config.rerank_slack > 0:  # settle: the memories, then the propensity re-ranking
        val_features = collect_features(val_records, no_labels)
        if remembered:
            settle(model, *remembered, val_features, val_labels, config.neighbour_weights, config.batch_size,
                   label_features=label_x, centroids=centroids)
        else:
            tune_reranking(model, val_features, val_labels, config.batch_size)
    deciding = decision_scorer(model)  # the tail decides apart (tail_decisions="own"): thresholds on its scores
    if deciding is not None:
        val_probs = deciding(val_features, config.batch_size)
    else:
        with quiet_exhausted_input():
            val_probs = np.asarray(model.predict(val_x, verbose=0))
    thresholds = tuned_thresholds(val_probs, val_labels, config)
    export_serving_model(model, tft_output, fn_args.serving_model_dir, names, thresholds, feature_kind=kind,
                         input_width=width, blessing_ids=blessing_label_ids(num_labels, int(custom["auc_labels"])),
                         metadata={"config": config.to_dict(), "epochs_run": len(
                             history.get("loss", [])) + start})
    _write_json(os.path.join(fn_args.model_run_dir, "history.json"), history)
    checkpoint.clear(ckpt)


def _write_json(path: str, payload: dict[str, Any]) -> None:
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write(json.dumps(payload, indent=1, default=float) + "\n")
