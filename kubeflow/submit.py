"""Submit a compiled cdgt pipeline to Kubeflow Pipelines v2, once or on a schedule, with the `kfp` client.

Needs `pip install 'cdgt[kubeflow]'` (kfp>=2; keep it out of the TFX venv, it downgrades urllib3 and
google-cloud-storage: use a separate venv with `pip install kfp pyyaml numpy scipy` and this repository installed
with `pip install --no-deps -e .`).

    python -m cdgt.kubeflow.submit --host http://localhost:8080 run --package kubeflow/cdgt-pipeline.json \\
        --param data_root=gs://acme-ml/cdgt/data/yeast --set epochs=30
    python -m cdgt.kubeflow.submit --host http://localhost:8080 schedule --recurring kubeflow/recurring-run.yaml

A .json package (PipelineJob, `cdgt kubeflow compile`'s default) is unwrapped to its PipelineSpec in a temporary
.yaml, since kfp.Client takes only .yaml/.zip/.tar.gz packages; the compiled pipeline root (the PipelineJob's
runtimeConfig.gcsOutputDirectory) goes with it, as the spec's defaultPipelineRoot and the run's pipeline_root;
`--set key=value` changes the Trainer's CDGTConfig through the trainer_custom_config parameter (kubeflow/parameters.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from cdgt.kubeflow.kubeflow_v2_runner import is_uri
from cdgt.kubeflow.parameters import TRAINER_CONFIG, trainer_value


class Package(NamedTuple):
    """A compiled pipeline: its PipelineSpec, {parameter: compiled default} and pipeline root (None: not set)."""

    spec: dict[str, Any]
    defaults: dict[str, Any]
    root: str | None


def load_package(path: Path) -> Package:
    """The Package of a .json PipelineJob or a .yaml PipelineSpec; the root is the PipelineJob's
    runtimeConfig.gcsOutputDirectory, else the spec's defaultPipelineRoot."""
    if path.suffix in (".yaml", ".yml"):
        spec = yaml.safe_load(path.read_text())
        job = {"pipelineSpec": spec, "runtimeConfig": {}}
    else:
        job = json.loads(path.read_text())
    spec = job["pipelineSpec"]
    declared = spec.get("root", {}).get("inputDefinitions", {}).get("parameters", {})
    defaults = {k: v["defaultValue"] for k, v in declared.items() if "defaultValue" in v}
    runtime = job.get("runtimeConfig", {})
    root = runtime.get("gcsOutputDirectory") or spec.get("defaultPipelineRoot")
    if root and not is_uri(root):
        print(f"note: {path} was compiled with the local pipeline root {root} (--allow-local-root); the cluster's "
              "pods cannot write there: recompile with a gs://, s3:// or minio:// root for a real run", file=sys.stderr)
    return Package(spec, {**defaults, **runtime.get("parameterValues", {})}, root)


def arguments(defaults: dict[str, Any], params: Sequence[str], overrides: Sequence[str]) -> dict[str, Any]:
    """Run arguments: the compiled defaults, `name=value` params, then config overrides on trainer_custom_config.

    >>> arguments({"data_root": "/d", "trainer_custom_config": '{"cdgt": {}}'}, ["data_root=gs://b/d"], [])
    {'data_root': 'gs://b/d', 'trainer_custom_config': '{"cdgt": {}}'}
    """
    out = dict(defaults)
    for item in params:
        name, sep, value = item.partition("=")
        if not sep or name not in defaults:
            raise ValueError(f"--param {item!r}: expected NAME=VALUE with NAME one of {sorted(defaults)}")
        out[name] = value
    if overrides:
        out[TRAINER_CONFIG] = trainer_value(out[TRAINER_CONFIG], list(overrides))
    return out


def spec_file(package: Package, directory: str) -> str:
    """The PipelineSpec written as <directory>/pipeline.yaml (what kfp.Client uploads), with the compiled pipeline
    root as its defaultPipelineRoot (so artifacts land where the Pusher and the checkpoints expect them)."""
    spec = dict(package.spec)
    if package.root:
        spec["defaultPipelineRoot"] = package.root
    path = Path(directory) / "pipeline.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=True))
    return str(path)


def client(host: str | None) -> Any:
    """A kfp.Client (kfp>=2), with a hint when kfp is not installed."""
    try:
        from kfp import Client  # kfp-pipeline-spec alone provides a `kfp` namespace package without Client
    except ImportError:
        raise SystemExit("cdgt.kubeflow.submit needs the kfp client: pip install 'cdgt[kubeflow]' "
                         "(in its own venv, not the TFX one)") from None
    return Client(host=host)


def submit_run(args: argparse.Namespace) -> None:
    """One run now; prints its id and waits for it with --wait."""
    package = load_package(args.package)
    values = arguments(package.defaults, args.param, args.overrides)
    kfp_client = client(args.host)
    with tempfile.TemporaryDirectory() as tmp:
        result = kfp_client.create_run_from_pipeline_package(
            spec_file(package, tmp), arguments=values, run_name=args.run_name,
            experiment_name=args.experiment, pipeline_root=package.root, enable_caching=not args.no_cache)
    print(f"run {result.run_id} submitted to experiment {args.experiment}")
    if args.wait:
        run = kfp_client.wait_for_run_completion(result.run_id, timeout=args.wait)
        print(f"run {result.run_id}: {getattr(run, 'state', run)}")


def schedule(args: argparse.Namespace) -> None:
    """A recurring run from a definition file like kubeflow/recurring-run.yaml."""
    definition = yaml.safe_load(Path(args.recurring).read_text())
    package = Path(definition["package"])
    compiled = load_package(package if package.is_absolute() else Path.cwd() / package)
    values = arguments(compiled.defaults, [f"{k}={v}" for k, v in (definition.get("parameters") or {}).items()],
                       definition.get("overrides") or [])
    kfp_client = client(args.host)
    experiment = kfp_client.create_experiment(definition.get("experiment", "cdgt"))
    with tempfile.TemporaryDirectory() as tmp:
        job = kfp_client.create_recurring_run(
            experiment_id=experiment.experiment_id, job_name=definition["name"],
            description=definition.get("description"), cron_expression=definition["cron"],
            max_concurrency=int(definition.get("max_concurrency", 1)),
            no_catchup=bool(definition.get("no_catchup", True)), params=values,
            pipeline_package_path=spec_file(compiled, tmp), pipeline_root=compiled.root,
            enable_caching=definition.get("enable_caching"),
            enabled=bool(definition.get("enabled", True)))
    print(f"recurring run {definition['name']} ({definition['cron']}): {getattr(job, 'recurring_run_id', job)}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m cdgt.kubeflow.submit", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", help="KFP API endpoint, e.g. http://localhost:8080 (port-forwarded ml-pipeline-ui)")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="submit one run now")
    run.add_argument("--package", type=Path, default=Path("kubeflow/cdgt-pipeline.json"))
    run.add_argument("--experiment", default="cdgt")
    run.add_argument("--run-name")
    run.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="e.g. data_root=gs://b/d")
    run.add_argument("--set", action="append", default=[], dest="overrides", metavar="KEY=VALUE",
                     help="CDGTConfig override for the Trainer, e.g. --set alpha=0.3")
    run.add_argument("--no-cache", action="store_true")
    run.add_argument("--wait", type=int, metavar="SECONDS", help="wait for the run to finish")
    run.set_defaults(func=submit_run)
    recurring = sub.add_parser("schedule", help="create a recurring run")
    recurring.add_argument("--recurring", default="kubeflow/recurring-run.yaml", metavar="FILE")
    recurring.set_defaults(func=schedule)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except (ValueError, FileNotFoundError, KeyError) as err:
        print(f"cdgt.kubeflow.submit: error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
