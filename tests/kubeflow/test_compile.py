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

from cdgt.kubeflow.kubeflow_v2_runner import check_image, check_pipeline_root
from cdgt.kubeflow.parameters import DATA_ROOT, TRAINER_CONFIG, trainer_value
from cdgt.pipeline.cli import main
from cdgt_keras.config import DEFAULT_PRESET, CDGTConfig

IMAGE = "ghcr.io/acme/cdgt:0.1.0"
COMMAND = ["python", "-m", "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"]
COMPONENTS = ("ImportExampleGen", "StatisticsGen", "SchemaGen", "ExampleValidator", "Transform", "LabelStatsGen",
              "CdgtTrainer", "Evaluator", "MultiLabelEvaluator", "Pusher")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("kubeflow")
    out = tmp / "cdgt-pipeline.json"
    assert main(["kubeflow", "compile", "--image", IMAGE, "--pipeline-root", str(tmp / "root"), "--allow-local-root",
                 "--output", str(out), "--work", str(tmp / "work"), "--set", "alpha=0.3", "--set", "epochs=3",
                 "--checkpoint-every", "120"]) == 0
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
    assert custom["checkpoint_every"] == 120.0  # --checkpoint-every reaches the Trainer
    assert json.loads(compiled["job"]["runtimeConfig"]["parameterValues"][TRAINER_CONFIG]) == custom


def test_data_root_is_a_runtime_parameter_of_example_gen_under_the_pipeline_root(compiled):
    spec = _spec(compiled)
    gen = spec["root"]["dag"]["tasks"]["ImportExampleGen"]["inputs"]["parameters"]
    assert gen["input_base"] == {"componentInputParameter": DATA_ROOT}
    default = spec["root"]["inputDefinitions"]["parameters"][DATA_ROOT]["defaultValue"]
    assert default == str(compiled["tmp"] / "root" / "data" / "synthetic")
    # the compiling machine's build folder is not baked into the definition
    assert str(compiled["tmp"] / "work") not in compiled["path"].read_text()


def test_shard_check_reads_the_runtime_data_root_and_gates_transform(compiled):
    tasks = _spec(compiled)["root"]["dag"]["tasks"]
    assert tasks["ShardCheck"]["inputs"]["parameters"]["data_root"] == {"componentInputParameter": DATA_ROOT}
    assert "ShardCheck" in tasks["Transform"]["dependentTasks"]
    assert "ShardCheck" in tasks["LabelStatsGen"]["dependentTasks"]


def test_trainer_and_transform_request_cpu_and_memory(compiled):
    spec = _spec(compiled)
    for task, (cpu, memory) in {"CdgtTrainer": (4, 16), "Transform": (2, 8)}.items():
        resources = _executor(spec, task)["container"]["resources"]
        assert resources == {"cpuRequest": cpu, "cpuLimit": cpu, "memoryRequest": memory, "memoryLimit": memory}
    assert "resources" not in _executor(spec, "StatisticsGen")["container"]


def test_a_local_pipeline_root_is_refused_unless_allowed(compiled, tmp_path, capsys):
    data = compiled["tmp"] / "work" / "data" / "synthetic"
    assert main(["kubeflow", "compile", "--image", IMAGE, "--pipeline-root", str(tmp_path / "root"), "--data",
                 str(data), "--output", str(tmp_path / "p.json")]) == 1
    err = capsys.readouterr().err
    assert "is a local path the Kubeflow pods cannot write" in err and "--allow-local-root" in err
    assert not (tmp_path / "p.json").exists() and not (tmp_path / "root").exists()


def test_bad_task_resources_are_a_clear_error(tmp_path, capsys):
    assert main(["kubeflow", "compile", "--image", IMAGE, "--pipeline-root", "gs://acme/root",
                 "--trainer-resources", "4", "--output", str(tmp_path / "p.json")]) == 1
    assert "--trainer-resources '4': expected CPU,MEMORY_GB" in capsys.readouterr().err


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
                 "--trainer-resources", "8,32", "--output", str(out)]) == 0
    doc = yaml.safe_load(out.read_text())
    assert doc["defaultPipelineRoot"] == "gs://acme/cdgt/root"
    assert _executor(doc, "CdgtTrainer")["container"]["resources"]["memoryRequest"] == 32
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
    assert main(["kubeflow", "compile", "--image", IMAGE, "--pipeline-root", "gs://acme/root", "--data", str(data),
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
    code = ("import sys; from cdgt.pipeline.cli import build_parser; build_parser().format_help(); "
            "sys.exit('tensorflow' in sys.modules or 'tfx' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO).returncode == 0


def test_submit_turns_the_package_into_kfp_arguments(compiled, tmp_path):
    from cdgt.kubeflow.submit import arguments, load_package, spec_file

    package = load_package(compiled["path"])
    defaults = package.defaults
    assert set(defaults) == {DATA_ROOT, TRAINER_CONFIG}
    values = arguments(defaults, ["data_root=gs://acme/data"], ["alpha=0.5"])
    assert values[DATA_ROOT] == "gs://acme/data" and json.loads(values[TRAINER_CONFIG])["cdgt"]["alpha"] == 0.5
    with pytest.raises(ValueError, match="expected NAME=VALUE"):
        arguments(defaults, ["nope=1"], [])
    written = yaml.safe_load(Path(spec_file(package, str(tmp_path))).read_text())
    json_format.ParseDict(written, pipeline_spec_pb2.PipelineSpec())


class _FakeKfp:
    """What kubeflow.submit hands to kfp.Client: the uploaded spec (read while it exists) and the keywords."""

    def __init__(self):
        self.calls = []

    def _record(self, package_path, kwargs):
        self.calls.append({"spec": yaml.safe_load(Path(package_path).read_text()), **kwargs})
        return type("Result", (), {"run_id": "run-1", "recurring_run_id": "job-1", "experiment_id": "e-1"})()

    def create_run_from_pipeline_package(self, pipeline_file, **kwargs):
        return self._record(pipeline_file, kwargs)

    def create_experiment(self, name):
        return type("Experiment", (), {"experiment_id": "e-1"})()

    def create_recurring_run(self, pipeline_package_path, **kwargs):
        return self._record(pipeline_package_path, kwargs)


def test_submit_carries_the_compiled_pipeline_root(compiled, monkeypatch, tmp_path, capsys):
    import cdgt.kubeflow.submit as submit

    fake = _FakeKfp()
    monkeypatch.setattr(submit, "client", lambda host: fake)
    root = str(compiled["tmp"] / "root")
    assert submit.main(["run", "--package", str(compiled["path"]), "--param", "data_root=gs://acme/data"]) == 0
    recurring = tmp_path / "recurring.yaml"
    recurring.write_text(yaml.safe_dump({"name": "cdgt-nightly", "cron": "0 0 3 * * *",
                                         "package": str(compiled["path"])}))
    assert submit.main(["schedule", "--recurring", str(recurring)]) == 0
    for call in fake.calls:
        assert call["pipeline_root"] == root
        assert call["spec"]["defaultPipelineRoot"] == root
        json_format.ParseDict(call["spec"], pipeline_spec_pb2.PipelineSpec())
    assert fake.calls[0]["arguments"][DATA_ROOT] == "gs://acme/data"
    assert f"compiled with the local pipeline root {root}" in capsys.readouterr().err


def test_recurring_run_definition_fits_the_compiled_pipeline(compiled):
    from cdgt.kubeflow.submit import arguments, load_package

    definition = yaml.safe_load((REPO / "kubeflow" / "recurring-run.yaml").read_text())
    assert len(definition["cron"].split()) == 6  # KFP cron: seconds first
    assert re.fullmatch(r"[a-z0-9][a-z0-9-]{0,127}", definition["name"])
    defaults = load_package(compiled["path"]).defaults
    values = arguments(defaults, [f"{k}={v}" for k, v in definition["parameters"].items()], definition["overrides"])
    assert json.loads(values[TRAINER_CONFIG])["cdgt"]["epochs"] == 30


def test_submit_without_the_kfp_client_says_how_to_install_it(compiled):
    pytest.importorskip("yaml")
    try:
        from kfp import Client  # noqa: F401
        pytest.skip("kfp is installed")
    except ImportError:
        pass
    from cdgt.kubeflow.submit import main as submit

    with pytest.raises(SystemExit, match=r"pip install 'cdgt\[kubeflow\]'"):
        submit(["run", "--package", str(compiled["path"])])
