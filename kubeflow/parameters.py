"""The cdgt pipeline's Kubeflow runtime parameters: what a run may change without recompiling.

What TFX 1.16's KubeflowV2DagRunner allows: a `RuntimeParameter` (ptype str, int or float) as the *whole value*
of a component's execution property, i.e. a string/number property, or a proto or dict property given as its
JSON string. Not allowed: a RuntimeParameter inside a proto or dict (e.g. `TrainArgs(num_steps=param)`, one key of
custom_config), as a component input (artifacts), or in pipeline-level settings (name, root, Beam args, image).

So the cdgt pipeline exposes two:
    data_root              ImportExampleGen's input_base: the built data directory (<data_root>/{train,...}/),
                           and ShardCheck's data_root (the same directory, checked against its manifest.json)
    trainer_custom_config  the Trainer's whole custom_config (JSON): {"cdgt": CDGTConfig dict, "data": ...}

Fixed at compile time: everything create_pipeline reads from the data manifest (feature kind, number of labels
and features: a new data_root must hold the *same data set*, e.g. a nightly rebuild) and the config fields other
components use (COMPILE_TIME_FIELDS). `trainer_value` builds a trainer_custom_config from the compiled one and
`--set`-style overrides through CDGTConfig (the one road), refusing those fixed fields.

Example:
    >>> defaults = expose_runtime_parameters(pipeline, data_root="gs://bucket/data/yeast")  # doctest: +SKIP
    >>> trainer_value(defaults[TRAINER_CONFIG], ["alpha=0.5"])  # doctest: +SKIP
    '{"cdgt": {..., "alpha": 0.5, ...}, ...}'
"""

from __future__ import annotations

import json
from typing import Any

from cdgt_keras.text import TEXT_CONFIG_FIELDS

DATA_ROOT = "data_root"
TRAINER_CONFIG = "trainer_custom_config"
EXAMPLE_GEN_ID = "ImportExampleGen"
SHARD_CHECK_ID = "ShardCheck"
TRAINER_ID = "CdgtTrainer"
# Config fields that pipeline.py hands to Transform and LabelStatsGen at compile time, not to the Trainer.
COMPILE_TIME_FIELDS = (*TEXT_CONFIG_FIELDS, "head_fraction", "tail_fraction", "psp_a", "psp_b")


def component(pipeline: Any, component_id: str) -> Any:
    """The pipeline's component with this id, or a ValueError listing the ids there are."""
    for node in pipeline.components:
        if node.id == component_id:
            return node
    raise ValueError(f"the pipeline has no component {component_id!r}; it has {[n.id for n in pipeline.components]}")


def expose_runtime_parameters(pipeline: Any, data_root: str) -> dict[str, Any]:
    """Turn ImportExampleGen's input_base and the Trainer's custom_config into runtime parameters (in place) and
    return {parameter name: default}: `data_root` defaults to `data_root`, the config to the compiled one."""
    from tfx import v1 as tfx

    gen, trainer = component(pipeline, EXAMPLE_GEN_ID), component(pipeline, TRAINER_ID)
    defaults = {DATA_ROOT: data_root, TRAINER_CONFIG: trainer.exec_properties["custom_config"]}
    data_root = tfx.dsl.experimental.RuntimeParameter(name=DATA_ROOT, ptype=str, default=defaults[DATA_ROOT])
    gen.exec_properties["input_base"] = data_root
    component(pipeline, SHARD_CHECK_ID).exec_properties["data_root"] = data_root
    trainer.exec_properties["custom_config"] = tfx.dsl.experimental.RuntimeParameter(
        name=TRAINER_CONFIG, ptype=str, default=defaults[TRAINER_CONFIG])
    return defaults


def trainer_value(compiled: str, overrides: list[str]) -> str:
    """A trainer_custom_config value: the compiled JSON with `key=value` overrides applied to its CDGTConfig.

    >>> value = trainer_value('{"cdgt": {"alpha": 0.3}, "code": "x"}', ["epochs=5"])
    >>> json.loads(value)["cdgt"]["epochs"], json.loads(value)["cdgt"]["alpha"], json.loads(value)["code"]
    (5, 0.3, 'x')
    """
    from cdgt_keras.config import CDGTConfig

    custom = json.loads(compiled)
    before = CDGTConfig.from_dict(custom["cdgt"])
    after = before.with_overrides(overrides)
    fixed = [f for f in COMPILE_TIME_FIELDS if getattr(after, f) != getattr(before, f)]
    if fixed:
        raise ValueError(f"{fixed} are fixed when the pipeline is compiled (Transform and LabelStatsGen use them); "
                         "recompile with `cdgt kubeflow compile --set ...` instead")
    custom["cdgt"] = after.to_dict()
    return json.dumps(custom, sort_keys=True)
