"""`cdgt kubeflow compile`: the TFX pipeline through KubeflowV2DagRunner into a pipeline definition (no cluster).

One compile to JSON (PipelineJob, local pipeline root, embedded synthetic data, `--set alpha=0.3`) is shared by
the tests; a second one writes YAML (PipelineSpec) for a gs:// root without touching GCS.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from cdgt_keras.config import DEFAULT_PRESET, CDGTConfig
from kubeflow.kubeflow_v2_runner import check_image, check_pipeline_root
from kubeflow.parameters import DATA_ROOT, TRAINER_CONFIG, trainer_value
from pipeline.cli import main

IMAGE = "ghcr.io/acme/cdgt:0.1.0"
COMMAND = ["python", "-m", "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"]
COMPONENTS = ("ImportExampleGen", "StatisticsGen", "SchemaGen", "ExampleValidator", "Transform", "LabelStatsGen",
              "CdgtTrainer", "Evaluator", "MultiLabelEvaluator", "Pusher")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("kubeflow")
    out = tmp / "cdgt-pipeline.json"
    assert main(["kubeflow", "compile", "--image", IMAGE, "--pipeline-root", str(tmp / "root"), "--output", str(out),
                 "--work", str(tmp / "work"), "--set", "alpha=0.3", "--set", "epochs=3"]) == 0
    return {"tmp": tmp, "path": out, "job": json.loads(out.read_text())}


def _spec(compiled: dict) -> dict:
    return compiled["job"]["pipelineSpec"]


def _executor(spec: dict, task: str) -> dict:
    label = spec["components"][spec["root"]["dag"]["tasks"][task]["componentRef"]["name"]]["executorLabel"]
    return spec["deploymentSpec"]["executors"][label]


def test_every_component_runs_in_the_image_with_the_tfx_entry_point(compiled):
    spec = _spec(compiled)
    tasks = spec["root"]["dag"]["tasks"]
    assert set(COMPONENTS) <= set(tasks)
    for name in COMPONENTS:
        container = _executor(spec, name)["container"]
        assert container["image"] == IMAGE, name
        assert container["command"] == COMMAND, name
    resolvers = [t for t in tasks if t.startswith("latest_blessed_model_resolver")]
    assert resolvers and all("resolver" in _executor(spec, t) for t in resolvers)
    # ImportExampleGen's span/fingerprint driver runs as a pre-cache-check hook in the same image
    assert "file_based_example_gen.driver" in " ".join(
        _executor(spec, "ImportExampleGen")["container"]["lifecycle"]["preCacheCheck"]["command"])


def test_trainer_custom_config_is_the_cdgt_config_with_overrides(compiled):
    spec = _spec(compiled)
    trainer = spec["root"]["dag"]["tasks"]["CdgtTrainer"]["inputs"]["parameters"]
    assert trainer["custom_config"] == {"componentInputParameter": TRAINER_CONFIG}
    custom = json.loads(spec["root"]["inputDefinitions"]["parameters"][TRAINER_CONFIG]["defaultValue"])
    assert custom["cdgt"]["alpha"] == 0.3
    expected = CDGTConfig.preset(DEFAULT_PRESET).with_overrides(["alpha=0.3", "epochs=3"])  # the CLI's default
    assert CDGTConfig.from_dict(custom["cdgt"]) == expected
    assert custom["checkpoint_root"] == str(compiled["tmp"] / "root" / "_checkpoints")
    assert json.loads(compiled["job"]["runtimeConfig"]["parameterValues"][TRAINER_CONFIG]) == custom


def test_data_root_is_a_runtime_parameter_of_example_gen(compiled):
    spec = _spec(compiled)
    gen = spec["root"]["dag"]["tasks"]["ImportExampleGen"]["inputs"]["parameters"]
    assert gen["input_base"] == {"componentInputParameter": DATA_ROOT}
    default = spec["root"]["inputDefinitions"]["parameters"][DATA_ROOT]["defaultValue"]
    assert default == str(compiled["tmp"] / "work" / "data" / "synthetic")
    assert (Path(default) / "manifest.json").is_file()


def test_json_parses_into_pipeline_job_and_spec_with_a_valid_name(compiled):
    job = json_format.Parse(compiled["path"].read_text(), pipeline_spec_pb2.PipelineJob())
    spec = json_format.ParseDict(json_format.MessageToDict(job.pipeline_spec), pipeline_spec_pb2.PipelineSpec())
    assert spec.schema_version == "2.1.0"
    assert re.fullmatch(r"[a-z0-9][a-z0-9-]{0,127}", spec.pipeline_info.name)
    assert spec.pipeline_info.name == "cdgt-synthetic"
    assert job.runtime_config.gcs_output_directory == str(compiled["tmp"] / "root")


def test_yaml_output_is_a_pipeline_spec_for_a_remote_root(compiled):
    tmp = compiled["tmp"]
    out = tmp / "remote.yaml"
    data = tmp / "work" / "data" / "synthetic"
    assert main(["kubeflow", "compile", "--image", "localhost:5000/cdgt:dev", "--pipeline-root", "gs://acme/cdgt/root",
                 "--data", str(data), "--data-root", "gs://acme/cdgt/data/synthetic", "--name", "cdgt-nightly",
                 "--output", str(out)]) == 0
    doc = yaml.safe_load(out.read_text())
    spec = json_format.ParseDict(doc, pipeline_spec_pb2.PipelineSpec())
    assert spec.pipeline_info.name == "cdgt-nightly"
    params = doc["root"]["inputDefinitions"]["parameters"]
    assert params[DATA_ROOT]["defaultValue"] == "gs://acme/cdgt/data/synthetic"
    custom = json.loads(params[TRAINER_CONFIG]["defaultValue"])
    assert custom["checkpoint_root"] == "gs://acme/cdgt/root/_checkpoints"  # not <cwd>/gs:/...
    pusher = doc["root"]["dag"]["tasks"]["Pusher"]["inputs"]["parameters"]["push_destination"]
    assert "gs://acme/cdgt/root/serving/cdgt-nightly" in pusher["runtimeValue"]["constant"]


@pytest.mark.parametrize(("args", "message"), [
    (["--image", "", "--pipeline-root", "ROOT"], "not a container image reference"),
    (["--image", "Acme/CDGT:1", "--pipeline-root", "ROOT"], "not a container image reference"),
    (["--image", "cdgt:1 --privileged", "--pipeline-root", "ROOT"], "not a container image reference"),
    (["--image", IMAGE, "--pipeline-root", ""], "--pipeline-root is empty"),
    (["--image", IMAGE, "--pipeline-root", "gs://"], "not a valid URI"),
])
def test_bad_image_or_root_is_a_clear_error(tmp_path, capsys, args, message):
    args = [str(tmp_path / "root") if a == "ROOT" else a for a in args]
    assert main(["kubeflow", "compile", *args, "--output", str(tmp_path / "p.json")]) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "p.json").exists()


def test_bad_pipeline_name_is_a_clear_error(compiled, tmp_path, capsys):
    data = compiled["tmp"] / "work" / "data" / "synthetic"
    assert main(["kubeflow", "compile", "--image", IMAGE, "--pipeline-root", str(tmp_path), "--data", str(data),
                 "--name", "cdgt_Nightly", "--output", str(tmp_path / "p.json")]) == 1
    assert "must match [a-z0-9][a-z0-9-]*" in capsys.readouterr().err


def test_image_and_root_checks():
    for image in ("cdgt", "cdgt:latest", "localhost:5000/team/cdgt:0.1", "europe-docker.pkg.dev/p/r/cdgt:v1",
                  "cdgt@sha256:" + "a" * 64):
        assert check_image(image) == image
    assert check_pipeline_root("gs://bucket/root/") == "gs://bucket/root"
    with pytest.raises(ValueError, match=r"not writable|cannot be created"):
        check_pipeline_root("/proc/cdgt-root")


def test_trainer_value_applies_overrides_and_refuses_compile_time_fields(compiled):
    compiled_value = compiled["job"]["runtimeConfig"]["parameterValues"][TRAINER_CONFIG]
    custom = json.loads(trainer_value(compiled_value, ["alpha=0.5", "head_hidden=64,32"]))
    assert custom["cdgt"]["alpha"] == 0.5 and custom["cdgt"]["head_hidden"] == [64, 32]
    assert custom["cdgt"]["epochs"] == 3  # the compiled override stays
    with pytest.raises(ValueError, match="fixed when the pipeline is compiled"):
        trainer_value(compiled_value, ["head_fraction=0.3"])
    with pytest.raises(ValueError, match="unknown config field"):
        trainer_value(compiled_value, ["nope=1"])


def test_help_does_not_import_tensorflow():
    code = ("import sys; from pipeline.cli import build_parser; build_parser().format_help(); "
            "sys.exit('tensorflow' in sys.modules or 'tfx' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO).returncode == 0


def test_submit_turns_the_package_into_kfp_arguments(compiled, tmp_path):
    from kubeflow.submit import arguments, load_package, spec_file

    spec, defaults = load_package(compiled["path"])
    assert set(defaults) == {DATA_ROOT, TRAINER_CONFIG}
    values = arguments(defaults, ["data_root=gs://acme/data"], ["alpha=0.5"])
    assert values[DATA_ROOT] == "gs://acme/data" and json.loads(values[TRAINER_CONFIG])["cdgt"]["alpha"] == 0.5
    with pytest.raises(ValueError, match="expected NAME=VALUE"):
        arguments(defaults, ["nope=1"], [])
    written = yaml.safe_load(Path(spec_file(spec, str(tmp_path))).read_text())
    json_format.ParseDict(written, pipeline_spec_pb2.PipelineSpec())


def test_recurring_run_definition_fits_the_compiled_pipeline(compiled):
    from kubeflow.submit import arguments, load_package

    definition = yaml.safe_load((REPO / "kubeflow" / "recurring-run.yaml").read_text())
    assert len(definition["cron"].split()) == 6  # KFP cron: seconds first
    assert re.fullmatch(r"[a-z0-9][a-z0-9-]{0,127}", definition["name"])
    _, defaults = load_package(compiled["path"])
    values = arguments(defaults, [f"{k}={v}" for k, v in definition["parameters"].items()], definition["overrides"])
    assert json.loads(values[TRAINER_CONFIG])["cdgt"]["epochs"] == 30


def test_submit_without_the_kfp_client_says_how_to_install_it(compiled):
    pytest.importorskip("yaml")
    try:
        from kfp import Client  # noqa: F401
        pytest.skip("kfp is installed")
    except ImportError:
        pass
    from kubeflow.submit import main as submit

    with pytest.raises(SystemExit, match=r"pip install 'cdgt\[kubeflow\]'"):
        submit(["run", "--package", str(compiled["path"])])
