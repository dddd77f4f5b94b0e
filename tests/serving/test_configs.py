"""The TF Serving configuration in serving/: it parses as the server would read it and the pieces agree."""

from __future__ import annotations

from pathlib import Path

import yaml
from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

SERVING = Path(__file__).resolve().parents[2] / "serving"
BATCHING_FIELDS = {"max_batch_size", "batch_timeout_micros", "max_enqueued_batches", "num_batch_threads",
                   "allowed_batch_sizes", "pad_variable_length_inputs"}


def models_config() -> model_server_config_pb2.ModelServerConfig:
    return text_format.Parse((SERVING / "models.config").read_text(), model_server_config_pb2.ModelServerConfig())


def batching() -> dict[str, int]:
    out = {}
    for line in (SERVING / "batching_parameters.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            key, _, rest = line.partition(" ")
            out[key] = int(rest.strip("{} ").removeprefix("value:").strip())
    return out


def manifests() -> dict[str, dict]:
    docs = [yaml.safe_load((SERVING / "k8s" / name).read_text()) for name in
            ("deployment.yaml", "service.yaml", "service-account.yaml")]
    return {doc["kind"]: doc for doc in docs}


def test_models_config_is_a_model_server_config_with_versioned_base_paths():
    configs = models_config().model_config_list.config
    assert [c.name for c in configs] == ["debtags", "synthetic"]
    for config in configs:
        assert config.model_platform == "tensorflow" and config.base_path == f"/models/{config.name}"


def test_batching_parameters_are_known_fields_and_match_the_client_batch():
    from cdgt.pipeline.cli import build_parser

    params = batching()
    assert set(params) <= BATCHING_FIELDS
    query = build_parser().parse_args(["query", "--rest", "http://x:8501", "--model", "m", "t"])
    assert params["max_batch_size"] == query.batch_size == 64
    assert 0 < params["batch_timeout_micros"] <= 10_000


def test_deployment_and_service_expose_rest_and_grpc_with_readiness_probes():
    found = manifests()
    pod = found["Deployment"]["spec"]["template"]["spec"]
    server, sync = pod["containers"]
    assert server["image"].startswith("tensorflow/serving:")
    assert {p["containerPort"] for p in server["ports"]} == {8500, 8501}
    args = dict(a.lstrip("-").split("=", 1) for a in server["args"])
    assert args["port"] == "8500" and args["rest_api_port"] == "8501"
    mounts = {m["name"]: m["mountPath"] for m in server["volumeMounts"]}
    assert args["batching_parameters_file"] == f"{mounts['config']}/batching_parameters.txt"
    assert args["model_name"] == "$(MODEL_NAME)" and args["model_base_path"] == f"{mounts['models']}/$(MODEL_NAME)"
    assert {e["name"] for e in server["env"]} >= {"MODEL_NAME"}
    assert server["readinessProbe"]["tcpSocket"]["port"] == "http"
    assert sync["readinessProbe"]["exec"]["command"][-1] == "ready"  # GET /v1/models/$MODEL_NAME is AVAILABLE
    assert server["resources"]["requests"]["cpu"] and server["resources"]["limits"]["memory"]
    assert {p["port"] for p in found["Service"]["spec"]["ports"]} == {8500, 8501}
    assert pod["serviceAccountName"] == found["ServiceAccount"]["metadata"]["name"]
    loader = pod["initContainers"][0]
    assert loader["command"][-1] == "once" and sync["command"][-1] == "loop"
    assert {m["name"]: m.get("readOnly", False) for m in loader["volumeMounts"]}["models"] is False


def test_kustomization_names_files_that_exist():
    kustomization = yaml.safe_load((SERVING / "kustomization.yaml").read_text())
    generated = {g["name"]: g for g in kustomization["configMapGenerator"]}
    for path in kustomization["resources"] + generated["cdgt-serving-config"]["files"]:
        assert (SERVING / path).is_file(), path
    pod = manifests()["Deployment"]["spec"]["template"]["spec"]
    config_maps = [v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v]
    assert config_maps == ["cdgt-serving-config"]
    params = dict(literal.split("=", 1) for literal in generated["cdgt-serving-params"]["literals"])
    for container in pod["containers"] + pod["initContainers"]:
        for env in container.get("env", []):
            ref = env["valueFrom"]["configMapKeyRef"]
            assert ref["name"] == "cdgt-serving-params" and ref["key"] in params, (container["name"], env)
