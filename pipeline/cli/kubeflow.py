"""`cdgt kubeflow compile`: the TFX pipeline of `cdgt run` as a Kubeflow Pipelines v2 / Vertex AI definition.

The DAG is pipeline/pipeline.py's `create_pipeline` (the same as `cdgt run`); kubeflow/kubeflow_v2_runner.py
compiles it with TFX's KubeflowV2DagRunner, every component in one image (kubeflow/Dockerfile). The data set's
manifest is read here at compile time (its kind and sizes shape the DAG), so --data/--dataset must be readable
locally; --data-root is where the pods read the same data set (a runtime parameter, see kubeflow/parameters.py).

Example:
    cdgt kubeflow compile --image ghcr.io/acme/cdgt:0.1.0 --pipeline-root gs://acme-ml/cdgt/root \\
        --data data/yeast --data-root gs://acme-ml/cdgt/data/yeast --set alpha=0.3
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cdgt.kubeflow.parameters import TRAINER_ID
from cdgt.kubeflow.resources import DEFAULTS, TRANSFORM_ID, Resources, parse_resources, set_resources
from cdgt.pipeline.blessing import add_blessing_arguments
from cdgt.pipeline.cli.options import add_checkpoint_argument, add_config_arguments, config_from_args, ensure_data
from cdgt.pipeline.datasets import add_source_arguments

DEFAULT_OUTPUT = Path("kubeflow") / "cdgt-pipeline.json"

HELP = """\
Compile the cdgt TFX pipeline (ExampleGen -> ... -> Trainer -> Evaluator -> Pusher, as `cdgt run`) for Kubeflow
Pipelines v2 or Vertex AI Pipelines with TFX's KubeflowV2DagRunner. A .json output is a PipelineJob (Vertex AI;
kubeflow/submit.py converts it for kfp), a .yaml output the bare PipelineSpec (kfp upload). Runtime parameters:
data_root (the built data directory the pods read; default <pipeline-root>/data/<data set>, so no local path
is compiled in) and trainer_custom_config (the Trainer's CDGTConfig, JSON). The Trainer and Transform tasks
request CPU and memory (--trainer-resources, --transform-resources).

examples:
  cdgt kubeflow compile --image ghcr.io/acme/cdgt:0.1.0 --pipeline-root gs://acme-ml/cdgt/root \\
      --data data/yeast --data-root gs://acme-ml/cdgt/data/yeast --set epochs=30
  cdgt kubeflow compile --image cdgt:dev --pipeline-root /tmp/cdgt-root --allow-local-root \\
      --output /tmp/cdgt.yaml   # synthetic, a test compile
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("kubeflow", help="compile the TFX pipeline for Kubeflow Pipelines v2 / Vertex AI",
                                   description="Kubeflow Pipelines v2: `cdgt kubeflow compile --help`.")
    sub = parser.add_subparsers(dest="kubeflow_command", metavar="SUBCOMMAND", required=True)
    compile_parser = sub.add_parser("compile", help="write the pipeline definition (KubeflowV2DagRunner)",
                                    description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_compile_arguments(compile_parser)
    compile_parser.set_defaults(func=run)


def add_compile_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `cdgt kubeflow compile`."""
    parser.add_argument("--image", required=True, help="container image of every component (kubeflow/Dockerfile)")
    parser.add_argument("--pipeline-root", required=True, metavar="URI",
                        help="where the pods write artifacts: a URI every pod can write (gs://bucket/cdgt/root, "
                             "s3://..., minio://...)")
    parser.add_argument("--allow-local-root", action="store_true",
                        help="accept a local --pipeline-root (a test compile; the pods cannot write there)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, metavar="FILE",
                        help=f".json (PipelineJob) or .yaml (PipelineSpec); default {DEFAULT_OUTPUT}")
    add_source_arguments(parser, "built locally into --work on first use (as `cdgt run`)",
                         "a local directory built by `cdgt data build`")
    parser.add_argument("--data-root", metavar="URI",
                        help="default of the data_root runtime parameter: where the pods read the same data set "
                             "(default <pipeline-root>/data/<data set>; upload the local build there)")
    parser.add_argument("--serving-dir", metavar="URI",
                        help="Pusher destination (TF Serving layout); default <pipeline-root>/serving/<name>")
    parser.add_argument("--name", help="pipeline name, [a-z0-9][a-z0-9-]* (default cdgt-<data set>)")
    parser.add_argument("--work", type=Path, metavar="DIR",
                        help="where --dataset is built locally (default runs/kubeflow-<data set>)")
    add_config_arguments(parser)
    add_blessing_arguments(parser)
    add_checkpoint_argument(parser)
    parser.add_argument("--beam-arg", action="append", default=None, metavar="ARG", dest="beam_args",
                        help="Beam pipeline argument for every component (repeatable; default: in-memory DirectRunner)")
    parser.add_argument("--no-cache", action="store_true", help="compile with caching off for every task")
    for task, option in ((TRAINER_ID, "--trainer-resources"), (TRANSFORM_ID, "--transform-resources")):
        cpu, memory = DEFAULTS[task]
        parser.add_argument(option, default=f"{cpu:g},{memory:g}", metavar="CPU,MEMORY_GB",
                            help=f"CPU cores and memory (GB) the {task} task requests and is limited to "
                                 f"(default {cpu:g},{memory:g})")


def local_data(args: argparse.Namespace) -> tuple[str, Path]:
    """(data set name, local built directory): --data as given, or --dataset built under --work on first use."""
    if args.data:
        return args.data.name, args.data.resolve()
    work = (args.work or Path("runs") / f"kubeflow-{args.dataset}").resolve()
    return args.dataset, ensure_data(args.dataset, work)


def task_resources(args: argparse.Namespace) -> dict[str, Resources]:
    """{component id: Resources} of --trainer-resources and --transform-resources."""
    return {TRAINER_ID: parse_resources(args.trainer_resources, "--trainer-resources"),
            TRANSFORM_ID: parse_resources(args.transform_resources, "--transform-resources")}


def build(args: argparse.Namespace, root: str, resources: dict[str, Resources]) -> tuple[Any, dict[str, Any], Path]:
    """(the TFX pipeline with its runtime parameters, {parameter: default}, the local data directory) from the
    command-line options."""
    name, data_dir = local_data(args)
    config = config_from_args(args, data_dir)
    from cdgt.kubeflow.parameters import expose_runtime_parameters
    from cdgt.pipeline.pipeline import PipelineSettings, create_pipeline, pipeline_name

    pname = args.name or pipeline_name(name)
    extra = {"beam_args": tuple(args.beam_args)} if args.beam_args else {}
    settings = PipelineSettings(
        name=pname, data_dir=str(data_dir), root=root,
        serving_dir=args.serving_dir or f"{root}/serving/{pname}", min_auc=args.min_auc,
        max_auc_drop=args.max_auc_drop, auc_labels=args.auc_labels, enable_cache=not args.no_cache,
        checkpoint_every=args.checkpoint_every, **extra)
    pipeline = create_pipeline(settings, config)  # no metadata_path: the cluster's ML-Metadata records runs
    set_resources(pipeline, resources)
    return pipeline, expose_runtime_parameters(pipeline, args.data_root or f"{root}/data/{name}"), data_dir


def run(args: argparse.Namespace) -> int:
    from cdgt.kubeflow.kubeflow_v2_runner import check_image, check_pipeline_root, check_remote_root, compile_pipeline

    check_image(args.image)  # fail fast, before TensorFlow loads
    resources = task_resources(args)
    check_remote_root(args.pipeline_root, args.allow_local_root)
    root = check_pipeline_root(args.pipeline_root)
    pipeline, defaults, data_dir = build(args, root, resources)
    job = compile_pipeline(pipeline, args.image, args.output, defaults)
    tasks = sorted(job["pipelineSpec"]["root"]["dag"]["tasks"])
    print(f"wrote {args.output}: pipeline {job['pipelineSpec']['pipelineInfo']['name']}, {len(tasks)} tasks "
          f"({', '.join(tasks)}), image {args.image}, root {root}")
    print(f"runtime parameters: data_root={defaults['data_root']}, trainer_custom_config=<CDGTConfig JSON>")
    if not args.data_root:
        print(f"before a run: upload the data set {data_dir} to {defaults['data_root']} "
              f"(e.g. gsutil -m cp -r {data_dir}/* {defaults['data_root']}/), or pass --data-root URI here "
              "(or the data_root parameter at submit time)")
    print("submit it: python -m kubeflow.submit --host KFP_URL run --package " + str(args.output)
          + "   (see kubeflow/README.md)")
    return 0
