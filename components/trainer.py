"""CdgtTrainer: TFX's Trainer with one more input, the `cdgt.LabelFrequencies` artifact of LabelStatsGen.

Why: the stock Trainer has fixed input slots (examples, transform_graph, schema, base_model, hyperparameters).
CDGTModel needs the label frequencies to partition labels among its players, so this component adds a
`label_stats` input; its executor puts the artifact's uri into `fn_args.custom_config["label_stats_uri"]` and then
runs the stock GenericExecutor (run_fn, output locations all unchanged). `run_fn` is a dotted path into the
installed project (or `module_file`, which TFX packages as a wheel with every file of its folder).

Example:
    >>> trainer = CdgtTrainer(examples=transform.outputs["transformed_examples"],
    ...                       transform_graph=transform.outputs["transform_graph"],
    ...                       label_stats=stats.outputs["label_stats"], run_fn="cdgt.pipeline.trainer_module.run_fn",
    ...                       custom_config={"cdgt": config.to_dict()})  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from tfx import types
from tfx.components.trainer import executor as trainer_executor
from tfx.components.util import udf_utils
from tfx.dsl.components.base import base_component, executor_spec
from tfx.proto import trainer_pb2
from tfx.types import standard_artifacts, standard_component_specs
from tfx.types.component_spec import ChannelParameter
from tfx.utils import json_utils

from cdgt.components.label_stats_component import LabelFrequencies

LABEL_STATS_KEY = "label_stats"
LABEL_STATS_URI = "label_stats_uri"


class CdgtTrainerSpec(standard_component_specs.TrainerSpec):
    """TrainerSpec plus the label-statistics input."""

    INPUTS = {**standard_component_specs.TrainerSpec.INPUTS,  # noqa: RUF012 (TFX's ComponentSpec convention)
              LABEL_STATS_KEY: ChannelParameter(type=LabelFrequencies)}


class CdgtTrainerExecutor(trainer_executor.GenericExecutor):
    """GenericExecutor that hands the label-statistics uri to run_fn through custom_config."""

    def Do(self, input_dict: dict[str, list[types.Artifact]], output_dict: dict[str, list[types.Artifact]],
           exec_properties: dict[str, Any]) -> None:
        stats = input_dict.pop(LABEL_STATS_KEY)
        custom = json_utils.loads(exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY) or "null") or {}
        custom[LABEL_STATS_URI] = stats[0].uri
        exec_properties = {**exec_properties, standard_component_specs.CUSTOM_CONFIG_KEY: json_utils.dumps(custom)}
        super().Do(input_dict, output_dict, exec_properties)


class CdgtTrainer(base_component.BaseComponent):
    """The Trainer of the cdgt pipeline (run_fn in a module file, plus label statistics)."""

    SPEC_CLASS = CdgtTrainerSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(CdgtTrainerExecutor)

    def __init__(self, examples: types.BaseChannel, label_stats: types.BaseChannel, *, run_fn: str | None = None,
                 module_file: str | None = None, transform_graph: types.BaseChannel | None = None,
                 schema: types.BaseChannel | None = None, train_args: trainer_pb2.TrainArgs | None = None,
                 eval_args: trainer_pb2.EvalArgs | None = None, custom_config: dict[str, Any] | None = None):
        spec = CdgtTrainerSpec(
            examples=examples,
            transform_graph=transform_graph,
            schema=schema,
            label_stats=label_stats,
            train_args=train_args or trainer_pb2.TrainArgs(),
            eval_args=eval_args or trainer_pb2.EvalArgs(),
            module_file=module_file,
            run_fn=run_fn,
            custom_config=json_utils.dumps(custom_config),
            model=types.Channel(type=standard_artifacts.Model),
            model_run=types.Channel(type=standard_artifacts.ModelRun),
        )
        if bool(run_fn) == bool(module_file):
            raise ValueError("CdgtTrainer needs exactly one of run_fn and module_file")
        super().__init__(spec=spec)
        if module_file and udf_utils.should_package_user_modules():  # as the stock Trainer: ship it as a wheel
            udf_utils.add_user_module_dependency(self, standard_component_specs.MODULE_FILE_KEY,
                                                 standard_component_specs.MODULE_PATH_KEY)
