"""`cdgt run`: the TFX pipeline end to end on one data set, with LocalDagRunner and ML-Metadata (SQLite).

Output directory layout (`--output`, default runs/pipeline-<dataset>):
    data/<name>/           the built data set (when --dataset builds it; --data points elsewhere)
    root/                  pipeline root: every component's artifacts; root/_checkpoints/ for resumable training
    metadata.sqlite        ML-Metadata
    serving/<pipeline>/    pushed models, TF Serving layout (<version>/saved_model.pb)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from pipeline.beam_options import add_beam_arguments, beam_args, beam_pipeline_args
from pipeline.train_cmd import add_config_arguments, config_from_args

REPO = Path(__file__).resolve().parents[1]
EMBEDDED = ("synthetic", "synthetic-sparse")

HELP = """\
Run the TFX pipeline: ExampleGen -> StatisticsGen -> SchemaGen -> ExampleValidator -> Transform ->
LabelStatsGen -> Trainer -> Evaluator (TFMA, blessing against the latest blessed model) + multi-label
metrics -> Pusher. Re-running with nothing changed reuses every component from the cache; a changed config
retrains. A run killed mid-way resumes from its completed components and the Trainer's last epoch checkpoint.

examples:
  cdgt run                                         # embedded synthetic data, runs/pipeline-synthetic
  cdgt run --dataset yeast --set epochs=30         # builds $CDGT_DATA_DIR/yeast first (default ../shared/data)
  cdgt run --data data/debtags --output runs/debtags --cpu-replicas 2
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("run", help="run the TFX pipeline end to end (LocalDagRunner)", description=HELP,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--dataset", default="synthetic", metavar="NAME",
                        help="synthetic (default), synthetic-sparse, or a folder name under CDGT_DATA_DIR "
                             "(yeast, emotions, ...), built into the output directory on first use")
    source.add_argument("--data", metavar="DIR", type=Path, help="a directory built by `cdgt data build`")
    add_config_arguments(parser)
    parser.add_argument("--output", metavar="DIR", type=Path, help="run directory (default runs/pipeline-<name>)")
    parser.add_argument("--cpu-replicas", type=int, default=1, metavar="N",
                        help="split the CPU into N logical devices for MirroredStrategy (default 1)")
    parser.add_argument("--min-auc", type=float, default=0.6, help="TFMA value threshold on micro AUC (0.6)")
    parser.add_argument("--max-auc-drop", type=float, default=0.01,
                        help="TFMA change threshold: largest AUC drop allowed vs the latest blessed model (0.01)")
    parser.add_argument("--no-cache", action="store_true", help="run every component even if cached")
    add_beam_arguments(parser)
    parser.set_defaults(func=run)


def data_root() -> Path:
    """CDGT_DATA_DIR, default ../shared/data relative to the repository."""
    return Path(os.environ.get("CDGT_DATA_DIR", REPO.parent / "shared" / "data")).resolve()


def quiet_known_warnings() -> None:
    """Drop TFX warnings that repeat on every run and mean nothing to a cdgt user."""
    import logging

    class _Drop(logging.Filter):
        noise = ("property_predicate is not supported", "does not have payload_format custom property")

        def filter(self, record: logging.LogRecord) -> bool:
            return not any(text in record.getMessage() for text in self.noise)

    logging.getLogger("absl").addFilter(_Drop())


def _log(message: str) -> None:
    print(f"[cdgt run] {message}", flush=True)


def ensure_data(dataset: str, out: Path, seed: int, beam: list[str] | None = None) -> Path:
    """The built data directory for `dataset` under `out/data/`, building it on first use."""
    target = out / "data" / dataset
    if (target / "manifest.json").is_file():
        return target
    if dataset in EMBEDDED:
        from components.synthetic_source import write_synthetic

        _log(f"writing the embedded {dataset} data to {target}")
        write_synthetic(str(target), sparse=dataset.endswith("sparse"), seed=seed, overwrite=True)
        return target
    source = data_root() / dataset
    if not source.is_dir():
        known = sorted(p.name for p in data_root().iterdir() if p.is_dir()) if data_root().is_dir() else []
        raise FileNotFoundError(f"--dataset {dataset!r}: no folder {source} (set CDGT_DATA_DIR); "
                                f"known: {', '.join([*EMBEDDED, *known])}")
    build_source(source, target, beam)
    return target


def build_source(source: Path, target: Path, beam: list[str] | None = None) -> None:
    """`cdgt data build` of a folder whose format is recognised from its files (ARFF, XMC, CSV, Debian)."""
    from components.example_gen import BuildOptions, build
    from components.formats.sources import make_source

    names = [p.name.lower() for p in source.iterdir()]
    fmt = ("arff" if any(".arff" in n for n in names) else "debian" if any(n.startswith("packages") for n in names)
           else "csv" if any(".csv" in n for n in names) else "xmc")
    options = {"task": "debtags"} if fmt == "debian" else {}
    _log(f"building {source} ({fmt}) into {target}")
    started = time.monotonic()
    build(make_source(fmt, [str(source)], **options),
          BuildOptions(out=str(target), task=options.get("task"), overwrite=True), beam or beam_pipeline_args([]))
    _log(f"built in {time.monotonic() - started:.1f} s")


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    quiet_known_warnings()
    name = args.data.name if args.data else args.dataset
    from pipeline.pipeline import pipeline_name

    pname = pipeline_name(name)
    out = (args.output or Path("runs") / f"pipeline-{name}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    from cdgt_keras.distribute import set_cpu_replicas

    devices = set_cpu_replicas(args.cpu_replicas)  # before any TensorFlow op (STACK.md item 4)
    data_dir = args.data.resolve() if args.data else ensure_data(args.dataset, out, config.seed, beam_args(args))
    from pipeline.local_runner import run as run_pipeline
    from pipeline.pipeline import PipelineSettings, create_pipeline

    settings = PipelineSettings(name=pname, data_dir=str(data_dir), root=str(out / "root"),
                                metadata_path=str(out / "metadata.sqlite"), serving_dir=str(out / "serving" / pname),
                                min_auc=args.min_auc, max_auc_drop=args.max_auc_drop, enable_cache=not args.no_cache,
                                beam_args=tuple(beam_args(args)))
    _log(f"pipeline {pname} on {data_dir} ({devices} CPU device(s)); output {out}")
    started = time.monotonic()
    run_pipeline(create_pipeline(settings, config))
    seconds = time.monotonic() - started
    print_summary(settings, seconds)
    return 0


def print_summary(settings: Any, seconds: float) -> None:
    """Component states, the headline table (overall, head, tail), blessing, pushed model, TensorBoard."""
    from cdgt_keras.metrics import format_report
    from components.evaluation import read_metrics
    from pipeline.local_runner import run_summary, validation_failures

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
    if "ModelRun" in found:
        print(f"watch it: tensorboard --logdir {found['ModelRun']['uri']}")
    sys.stdout.flush()
