"""create_pipeline(...): the cdgt TFX DAG.

    ImportExampleGen (built TFRecords: train / validation / test)
      -> ShardCheck (shard list, counts and sha256 against manifest.json; a mismatch stops the run here)
      -> StatisticsGen -> ImportSchemaGen (the curated schema; SchemaGen when there is none) -> ExampleValidator
      -> SchemaGate (anomalies stop the run here)
      -> Transform (z-score | vocabulary + TF-IDF)           -> LabelStatsGen (cdgt.LabelFrequencies)
      -> CdgtTrainer (run_fn in trainer_module.py; CDGTConfig via custom_config["cdgt"])
      -> Evaluator (TFMA: value + change thresholds vs the latest blessed model) + MultiLabelEvaluator
      (Rare-F1, F1, P@k, nDCG@k, PSP@k)
      -> Pusher (filesystem, TF Serving layout <serving_dir>/<version>/)

Example:
    >>> p = create_pipeline(PipelineSettings(name="cdgt-yeast", data_dir="runs/yeast/data/yeast",
    ...                     root="runs/yeast/root", metadata_path="runs/yeast/metadata.sqlite",
    ...                     serving_dir="runs/yeast/serving/cdgt-yeast"), CDGTConfig())  # doctest: +SKIP
    >>> tfx.orchestration.LocalDagRunner().run(p)  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import tensorflow_model_analysis as tfma
from tfx import v1 as tfx

from cdgt.components.baseline import LatestBlessedOtherModelStrategy
from cdgt.components.evaluation import MultiLabelEvaluator
from cdgt.components.label_stats_component import LabelStatsGen
from cdgt.components.schema_gate import SchemaGate
from cdgt.components.shard_check import ShardCheck
from cdgt.components.trainer import CdgtTrainer
from cdgt.pipeline.beam_options import beam_pipeline_args
from cdgt.pipeline.blessing import AUC_LABELS, MAX_AUC_DROP, MIN_AUC
from cdgt.serving.export import BLESSING_LABELS, BLESSING_SCORES, LABELS_MULTI_HOT
from cdgt_keras.cadence import CHECKPOINT_EVERY_SECONDS
from cdgt_keras.config import CDGTConfig
from cdgt_keras.records import SPLITS, read_manifest
from cdgt_keras.text import TextOptions

PREPROCESSING_FN = "cdgt.pipeline.transform_module.preprocessing_fn"
RUN_FN = "cdgt.pipeline.trainer_module.run_fn"
# The code each step runs. Its fingerprint goes into the step's custom_config, so a change retrains and nothing
# else does (TFX's module_file packaging would fingerprint every file of pipeline/, CLI code included).
TRANSFORM_CODE = ("pipeline/transform_module.py", "cdgt_keras/features.py", "cdgt_keras/text.py",
                  "cdgt_keras/featurizer.py", "cdgt_keras/text_embedding.py", "cdgt_keras/sentence.py",
                  "cdgt_keras/wordpiece.py")
TRAINER_CODE = ("cdgt_keras", "serving", "pipeline/trainer_module.py", "pipeline/callbacks.py",
                "pipeline/plots.py", "pipeline/blessing.py", "pipeline/transform_module.py", "components/trainer.py",
                "components/label_stats_component.py", "components/label_stats.py", "components/formats/record.py")
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,127}$")  # Kubeflow-compatible pipeline names


@dataclass(frozen=True)
class PipelineSettings:
    """Where things go and how the model is judged; everything not a model hyper-parameter."""

    name: str
    data_dir: str
    root: str
    serving_dir: str
    metadata_path: str | None = None  # local ML-Metadata SQLite; None where the orchestrator has its own (Kubeflow)
    min_auc: float = MIN_AUC  # TFMA value threshold on the micro AUC over the blessing labels' (example, label) pairs
    max_auc_drop: float = MAX_AUC_DROP  # change threshold: at most this much below the latest blessed model
    auc_labels: int = AUC_LABELS  # the blessing covers every label up to this many, else a fixed sample of this many
    checkpoint_every: float = CHECKPOINT_EVERY_SECONDS  # the Trainer's checkpoints: this many seconds apart at least
    beam_args: tuple[str, ...] = field(default_factory=lambda: tuple(beam_pipeline_args([])))  # see beam_options
    enable_cache: bool = True
    # A curated schema (text proto) to import and hold the data to: its anomalies stop the run before Transform.
    # None: SchemaGen infers one from each run's statistics and nothing is blocked (the Kubeflow compile).
    schema_file: str | None = None

    def __post_init__(self) -> None:
        if not NAME_PATTERN.match(self.name):
            raise ValueError(f"pipeline name {self.name!r} must match [a-z0-9][a-z0-9-]* (Kubeflow names)")


def absolute(path: str) -> str:
    """os.path.abspath for local paths; remote URIs (gs://, s3://, hdfs://...) unchanged.

        >>> absolute("gs://bucket/root")
        'gs://bucket/root'
    """
    return path if "://" in path else os.path.abspath(path)


def pipeline_name(dataset: str) -> str:
    """A valid pipeline name from a data set name: `cdgt-` + lower-case, other characters as '-'."""
    return "cdgt-" + (re.sub(r"[^a-z0-9]+", "-", dataset.lower()).strip("-") or "data")


def _folder(name: str) -> Path:
    """Where the repository folder `name` (cdgt_keras, pipeline, components, serving) is imported from: the
    checkout, or site-packages/cdgt/<name> in an installed wheel (pyproject.toml's package-dir)."""
    spec = importlib.util.find_spec(name if name == "cdgt_keras" else f"cdgt.{name}")
    return Path(next(iter(spec.submodule_search_locations)))


def source_fingerprint(paths: tuple[str, ...]) -> str:
    """sha256 (16 hex digits) over the Python files at `paths` (files or folders, relative to the repo; hashed
    under those repository-relative names wherever the package is installed)."""
    digest = hashlib.sha256()
    for rel in paths:
        top, _, rest = rel.partition("/")
        base = _folder(top)
        root = base / rest if rest else base
        for file in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
            name = Path(top, file.relative_to(base)).as_posix()
            digest.update(name.encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()[:16]


def example_gen(data_dir: str) -> tfx.components.ImportExampleGen:
    """ImportExampleGen over <data_dir>/<split>/*.tfrecord.gz, keeping the three splits."""
    splits = [tfx.proto.Input.Split(name=s, pattern=f"{s}/*.tfrecord.gz") for s in SPLITS]
    return tfx.components.ImportExampleGen(input_base=absolute(data_dir),
                                           input_config=tfx.proto.Input(splits=splits))


def eval_config(min_auc: float, max_auc_drop: float) -> tfma.EvalConfig:
    """TFMA on the blessing labels' scores (the model's `blessing_scores` signature) against their multi-hot labels
    (`blessing_labels`), flattened into (example, label) pairs; AUC must clear `min_auc` and not fall more than
    `max_auc_drop` below the latest blessed model. The blessing labels are every label up to
    PipelineSettings.auc_labels, else a fixed sample (pipeline.blessing.blessing_label_ids)."""
    auc_threshold = tfma.MetricThreshold(
        value_threshold=tfma.GenericValueThreshold(lower_bound={"value": min_auc}),
        change_threshold=tfma.GenericChangeThreshold(direction=tfma.MetricDirection.HIGHER_IS_BETTER,
                                                     absolute={"value": -max_auc_drop}))
    metrics = [tfma.MetricConfig(class_name="ExampleCount"),
               tfma.MetricConfig(class_name="AUC", threshold=auc_threshold),
               tfma.MetricConfig(class_name="AUCPrecisionRecall"),
               tfma.MetricConfig(class_name="BinaryCrossentropy")]
    return tfma.EvalConfig(
        model_specs=[tfma.ModelSpec(signature_name=BLESSING_SCORES, label_key=LABELS_MULTI_HOT,
                                    preprocessing_function_names=[BLESSING_LABELS])],
        slicing_specs=[tfma.SlicingSpec()],
        metrics_specs=[tfma.MetricsSpec(metrics=metrics)])


def baseline_resolver(trainer: CdgtTrainer, local: bool) -> tfx.dsl.Resolver:
    """The Evaluator's baseline: the latest blessed model. Run locally, the candidate itself is left out, so an
    unchanged rerun resolves the baseline its first run had and Evaluator and Pusher come from the cache
    (components/baseline.py); Kubeflow V2 compiles only TFX's own strategy."""
    channels = {"model": tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model),
                "model_blessing": tfx.dsl.Channel(type=tfx.types.standard_artifacts.ModelBlessing)}
    if local:
        return tfx.dsl.Resolver(strategy_class=LatestBlessedOtherModelStrategy, candidate=trainer.outputs["model"],
                                **channels).with_id("latest_blessed_model_resolver")
    return tfx.dsl.Resolver(strategy_class=tfx.dsl.experimental.LatestBlessedModelStrategy,
                            **channels).with_id("latest_blessed_model_resolver")


def create_pipeline(settings: PipelineSettings, config: CDGTConfig) -> tfx.dsl.Pipeline:
    """The DAG for one built data directory and one CDGTConfig."""
    manifest = read_manifest(settings.data_dir)
    kind = manifest["feature_kind"]
    gen = example_gen(settings.data_dir)
    check = ShardCheck(examples=gen.outputs["examples"], data_root=absolute(settings.data_dir))
    statistics = tfx.components.StatisticsGen(examples=gen.outputs["examples"])
    if settings.schema_file:
        schema = tfx.components.ImportSchemaGen(schema_file=absolute(settings.schema_file))
    else:
        schema = tfx.components.SchemaGen(statistics=statistics.outputs["statistics"], infer_feature_shape=True)
    validator = tfx.components.ExampleValidator(statistics=statistics.outputs["statistics"],
                                                schema=schema.outputs["schema"])
    transform = tfx.components.Transform(
        examples=gen.outputs["examples"], schema=schema.outputs["schema"], preprocessing_fn=PREPROCESSING_FN,
        custom_config={"feature_kind": kind, "text": asdict(TextOptions.from_config(config)),
                       "code": source_fingerprint(TRANSFORM_CODE)}, disable_statistics=True)
    stats = LabelStatsGen(
        examples=gen.outputs["examples"], num_labels=int(manifest["num_labels"]),
        label_names_json=json.dumps(manifest.get("label_names") or []), head_fraction=config.head_fraction,
        tail_fraction=config.tail_fraction, psp_a=config.psp_a, psp_b=config.psp_b)
    trainer = CdgtTrainer(
        examples=transform.outputs["transformed_examples"], transform_graph=transform.outputs["transform_graph"],
        schema=schema.outputs["schema"], label_stats=stats.outputs["label_stats"], run_fn=RUN_FN,
        train_args=tfx.proto.TrainArgs(splits=["train"]), eval_args=tfx.proto.EvalArgs(splits=["validation"]),
        custom_config={"cdgt": config.to_dict(),
                       "data": {"feature_kind": kind, "num_features": int(manifest.get("num_features") or 0),
                                "feature_names": manifest.get("feature_names") if kind == "sparse" else None},
                       "checkpoint_root": absolute(settings.root).rstrip("/") + "/_checkpoints",
                       "auc_labels": settings.auc_labels, "checkpoint_every": settings.checkpoint_every,
                       "code": source_fingerprint(TRAINER_CODE)})
    gate = SchemaGate(anomalies=validator.outputs["anomalies"]) if settings.schema_file else None
    for node in (transform, stats):  # nothing reads the data for training before it passed the checks
        node.add_upstream_node(check)
        if gate is not None:
            node.add_upstream_node(gate)
    resolver = baseline_resolver(trainer, local=settings.metadata_path is not None)
    evaluator = tfx.components.Evaluator(
        examples=gen.outputs["examples"], model=trainer.outputs["model"], baseline_model=resolver.outputs["model"],
        eval_config=eval_config(settings.min_auc, settings.max_auc_drop), example_splits=["test"])
    multilabel = MultiLabelEvaluator(examples=gen.outputs["examples"], model=trainer.outputs["model"],
                                     label_stats=stats.outputs["label_stats"])
    pusher = tfx.components.Pusher(
        model=trainer.outputs["model"], model_blessing=evaluator.outputs["blessing"],
        push_destination=tfx.proto.PushDestination(filesystem=tfx.proto.PushDestination.Filesystem(
            base_directory=absolute(settings.serving_dir))))
    return tfx.dsl.Pipeline(
        pipeline_name=settings.name,
        pipeline_root=absolute(settings.root),
        components=[gen, check, statistics, schema, validator, *([gate] if gate else []), transform, stats, trainer,
                    resolver, evaluator, multilabel, pusher],
        enable_cache=settings.enable_cache,
        metadata_connection_config=None if settings.metadata_path is None else
        tfx.orchestration.metadata.sqlite_metadata_connection_config(absolute(settings.metadata_path)),
        beam_pipeline_args=list(settings.beam_args),
    )
