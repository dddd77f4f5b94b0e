"""`cdgt run`: the TFX pipeline end to end on one data set, with LocalDagRunner and ML-Metadata (SQLite).

Output directory layout (`--output`, default runs/pipeline-<dataset>):
    data/<name>/           the built data set (when --dataset builds it; --data points elsewhere)
    root/                  pipeline root: every component's artifacts; root/_checkpoints/ for resumable training
    metadata.sqlite        ML-Metadata
    schema.pbtxt           the curated schema inferred on first use, when the pipeline keeps none (see --schema)
    serving/<pipeline>/    pushed models, TF Serving layout (<version>/saved_model.pb)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from cdgt.pipeline.beam_options import add_beam_arguments, beam_args
from cdgt.pipeline.blessing import add_blessing_arguments
from cdgt.pipeline.cli.console import progress
from cdgt.pipeline.cli.options import add_checkpoint_argument, add_config_arguments, config_from_args, ensure_data
from cdgt.pipeline.datasets import add_source_arguments

HELP = """\
Run the TFX pipeline: ExampleGen -> StatisticsGen -> ImportSchemaGen -> ExampleValidator -> Transform ->
LabelStatsGen -> Trainer -> Evaluator (TFMA, blessing against the latest blessed model) + multi-label
metrics -> Pusher. Re-running with nothing changed reuses every component from the cache; a changed config
retrains. A run killed mid-way resumes from its completed components and the Trainer's last checkpoint.
The data is held to a curated schema (--schema; pipeline/schemas/<pipeline>.pbtxt is kept with the pipeline):
ExampleValidator's anomalies stop the run before Transform and are printed. --update-schema regenerates it.

examples:
  cdgt run                                         # embedded synthetic data, runs/pipeline-synthetic
  cdgt run --dataset yeast --set epochs=30         # builds $CDGT_DATA_DIR/yeast first (default ../shared/data)
  cdgt run --dataset debtags                       # the Debian catalogue's tags ($CDGT_DATA_DIR/debian-bookworm)
  cdgt run --data data/debtags --output runs/debtags --cpu-replicas 2
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("run", help="run the TFX pipeline end to end (LocalDagRunner)", description=HELP,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    add_source_arguments(parser, "built into the output directory on first use")
    add_config_arguments(parser)
    parser.add_argument("--output", metavar="DIR", type=Path, help="run directory (default runs/pipeline-<name>)")
    parser.add_argument("--cpu-replicas", type=int, default=1, metavar="N",
                        help="split the CPU into N logical devices for MirroredStrategy (default 1)")
    add_blessing_arguments(parser)
    add_checkpoint_argument(parser)
    parser.add_argument("--no-cache", action="store_true", help="run every component even if cached")
    parser.add_argument("--schema", metavar="FILE", type=Path,
                        help="the curated schema (text proto) the data must match; default "
                             "pipeline/schemas/<pipeline>.pbtxt when it exists, else <output>/schema.pbtxt, "
                             "inferred from the training split on first use")
    parser.add_argument("--update-schema", action="store_true",
                        help="infer the schema from this data's training split again and write it where --schema "
                             "(or the default) points, then run with it")
    add_beam_arguments(parser)
    parser.set_defaults(func=run)


def _log(message: str) -> None:
    progress("run", message, sys.stdout)


def run(args: argparse.Namespace) -> int:
    name = args.data.name if args.data else args.dataset
    from cdgt.pipeline.pipeline import pipeline_name

    pname = pipeline_name(name)
    out = (args.output or Path("runs") / f"pipeline-{name}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    from cdgt_keras.distribute import set_cpu_replicas

    devices = set_cpu_replicas(args.cpu_replicas)  # before any TensorFlow op (devices are fixed by the first)
    data_dir = args.data.resolve() if args.data else ensure_data(args.dataset, out, beam_args(args))
    config = config_from_args(args, data_dir)
    from cdgt.pipeline.local_runner import run as run_pipeline
    from cdgt.pipeline.pipeline import PipelineSettings, create_pipeline

    schema = schema_for_run(args, pname, data_dir, out)
    settings = PipelineSettings(name=pname, data_dir=str(data_dir), root=str(out / "root"),
                                metadata_path=str(out / "metadata.sqlite"), serving_dir=str(out / "serving" / pname),
                                min_auc=args.min_auc, max_auc_drop=args.max_auc_drop, auc_labels=args.auc_labels,
                                enable_cache=not args.no_cache, checkpoint_every=args.checkpoint_every,
                                beam_args=tuple(beam_args(args)), schema_file=str(staged_schema(schema, out)))
    _log(f"pipeline {pname} on {data_dir} ({devices} CPU device(s)); preset {config.preset_name or 'none'}; "
         f"output {out}")
    started = time.monotonic()
    try:
        run_pipeline(create_pipeline(settings, config), progress=_log)
    except Exception as err:
        mismatch = shard_mismatch(err)
        if mismatch is not None:
            print(f"cdgt run: stopped by ShardCheck: {mismatch}", file=sys.stderr)
            return 1
        anomalies = data_anomalies(err)
        if anomalies is None:
            raise
        print(f"cdgt run: stopped by ExampleValidator: the data does not match the schema {schema}\n  "
              + "\n  ".join(anomalies) + "\nfix the data, or curate the schema if the change is intended (edit it, "
              "or rerun with --update-schema)", file=sys.stderr)
        return 1
    seconds = time.monotonic() - started
    print_summary(settings, seconds)
    return 0


def schema_for_run(args: argparse.Namespace, pname: str, data_dir: Path, out: Path) -> Path:
    """The curated schema this run holds its data to: --schema, the one kept with the pipeline
    (pipeline/schemas/<pipeline>.pbtxt), or <output>/schema.pbtxt. Inferred from the training split and curated
    (components/schema.py) on first use or with --update-schema."""
    from cdgt.components.schema import infer_curated_schema, kept_schema_path, write_schema

    kept = kept_schema_path(pname)
    path = args.schema.resolve() if args.schema else kept if kept.is_file() else out / "schema.pbtxt"
    if args.schema and not path.is_file() and not args.update_schema:
        raise ValueError(f"--schema {args.schema} not found (--update-schema writes it from the data)")
    if args.update_schema or not path.is_file():
        write_schema(infer_curated_schema(data_dir), path)
        _log(f"wrote the schema inferred from {data_dir / 'train'} to {path}: review it and keep it with the "
             f"pipeline; later runs are held to it")
    else:
        _log(f"schema {path}")
    return path


def staged_schema(schema: Path, out: Path) -> Path:
    """A copy of `schema` at <out>/root/_schemas/<content digest>/schema.pbtxt. Why: ImportSchemaGen's cache key is
    the file's path, not its content, so an edited schema must arrive under a new path to be imported again."""
    import hashlib
    import shutil

    content = schema.read_bytes()
    staged = out / "root" / "_schemas" / hashlib.sha256(content).hexdigest()[:16] / "schema.pbtxt"
    if not staged.is_file():
        staged.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(schema, staged)
    return staged


def _behind(err: BaseException, kind: type[BaseException]) -> Any:
    """The exception of type `kind` in `err`'s chain of causes (TFX wraps what a component raised), or None."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, kind):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def data_anomalies(err: BaseException) -> list[str] | None:
    """The anomaly lines of the DataAnomalies (components/schema_gate.py) behind `err`, if that stopped the run."""
    from cdgt.components.schema_gate import DataAnomalies

    found = _behind(err, DataAnomalies)
    return None if found is None else found.lines


def shard_mismatch(err: BaseException) -> str | None:
    """The one-line reason of the ShardMismatch (components/shard_check.py) behind `err`, if that stopped the run."""
    from cdgt.components.shard_check import ShardMismatch

    found = _behind(err, ShardMismatch)
    return None if found is None else str(found)


def print_summary(settings: Any, seconds: float) -> None:
    """Component states, the headline table (overall, head, tail), blessing, pushed model, TensorBoard."""
    from cdgt.components.evaluation import read_metrics
    from cdgt.pipeline.local_runner import run_summary, validation_failures
    from cdgt_keras.metrics import format_report

    summary = run_summary(settings.metadata_path, settings.name)
    print(f"\npipeline {settings.name} finished in {seconds:.1f} s; components: "
          + ", ".join(f"{k} {v}" for k, v in summary.states.items()))
    found = summary.artifacts
    if "cdgt.MultiLabelMetrics" in found:
        metrics = read_metrics(found["cdgt.MultiLabelMetrics"]["uri"])
        print(f"\n{metrics['split']} split ({metrics['num_examples']:,} examples; head = {metrics['num_head_labels']}"
              f" labels, tail = {metrics['num_tail_labels']} labels; percent):")
        print(format_report(metrics["report"]))
    blessing = found.get("ModelBlessing", {}).get("properties", {})
    print(f"\nblessed: {'yes' if blessing.get('blessed') == 1 else 'NO'}"
          f"  (TFMA: micro AUC >= {settings.min_auc}, at most {settings.max_auc_drop} below the latest blessed model)")
    if blessing.get("blessed") != 1 and "ModelEvaluation" in found:
        for line in validation_failures(found["ModelEvaluation"]["uri"]):
            print(f"  failed: {line}")
    pushed = found.get("PushedModel", {}).get("properties", {})
    if pushed.get("pushed") == 1:
        print(f"pushed model: {pushed.get('pushed_destination')}")
    else:
        print(f"not pushed (serving directory {settings.serving_dir})")
    if "ModelRun" in found:  # the parent holds every Trainer run: HParams compares them
        run_dir = Path(found["ModelRun"]["uri"])
        print(f"watch it: tensorboard --logdir {run_dir.parent}   (this run: {run_dir.name})")
    sys.stdout.flush()
