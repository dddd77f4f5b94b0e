"""CPU and memory for the heavy tasks of the compiled pipeline (the Trainer and Transform).

TFX's KubeflowV2DagRunner turns a component's `platform_config` (a PipelineSpec ResourceSpec) into the task
container's `resources`: KFP v2 sets the pod's requests and limits from it, and Vertex AI picks a machine that
fits. Each of the two tasks gets a request and an equal limit (memory in GB, as the PipelineSpec counts it), so
its pod has a guaranteed share on a shared cluster and Vertex AI does not run it on its smallest machine.

Example:
    >>> parse_resources("4,16", "--trainer-resources")
    Resources(cpu=4.0, memory_gb=16.0)
    >>> set_resources(pipeline, {"CdgtTrainer": Resources(4, 16)})  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any, NamedTuple

from cdgt.kubeflow.parameters import TRAINER_ID, component

TRANSFORM_ID = "Transform"


class Resources(NamedTuple):
    """CPU cores and memory (GB) one task requests (and is limited to)."""

    cpu: float
    memory_gb: float


DEFAULTS = {TRAINER_ID: Resources(4.0, 16.0), TRANSFORM_ID: Resources(2.0, 8.0)}


def parse_resources(value: str, option: str) -> Resources:
    """`CPU,MEMORY_GB` (e.g. `4,16`), or a ValueError naming the option and what was expected."""
    cpu, sep, memory = value.partition(",")
    try:
        parsed = Resources(float(cpu), float(memory.removesuffix("G").removesuffix("g")))
    except ValueError:
        parsed = None
    if not sep or parsed is None or not all(0 < v < 1e6 for v in parsed):
        raise ValueError(f"{option} {value!r}: expected CPU,MEMORY_GB with two positive numbers, e.g. 4,16 "
                         "(4 cores, 16 GB)")
    return parsed


def resource_spec(resources: Resources) -> Any:
    """The PipelineSpec ResourceSpec proto: the same numbers as request and limit."""
    from kfp.pipeline_spec import pipeline_spec_pb2

    spec = pipeline_spec_pb2.PipelineDeploymentConfig.PipelineContainerSpec.ResourceSpec()
    spec.cpu_request = spec.cpu_limit = resources.cpu
    spec.memory_request = spec.memory_limit = resources.memory_gb
    return spec


def set_resources(pipeline: Any, wanted: dict[str, Resources]) -> None:
    """Give each named component of `pipeline` its resources (in place, before compiling)."""
    for component_id, resources in wanted.items():
        component(pipeline, component_id).with_platform_config(resource_spec(resources))
