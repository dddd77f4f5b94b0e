"""LabelStatsGen: a TFX component that counts label frequencies on the train split of an Examples artifact
(one streaming Beam pass, components/label_stats.py) and writes a `cdgt.LabelFrequencies` artifact holding
`label_stats.json` (counts, freq, order, head/tail sets, PSP propensities, label names).

Why a component: the Trainer builds CDGTModel from these frequencies (player partition, rarity weights) and the
evaluation needs the same head/tail sets, so they are computed once, cached, and recorded in ML-Metadata.

Example (inside a pipeline):
    >>> stats = LabelStatsGen(examples=example_gen.outputs["examples"], num_labels=14,
    ...                       label_names_json='["a", ...]', head_fraction=0.2, tail_fraction=0.2,
    ...                       psp_a=0.55, psp_b=1.5)  # doctest: +SKIP
    >>> stats.outputs["label_stats"]  # doctest: +SKIP
"""

# No `from __future__ import annotations`: TFX reads the component signatures at run time.

import json
import os

from tfx import v1 as tfx
from tfx.types import artifact, artifact_utils

from cdgt.components.label_stats import STATS_FILE, LabelCountsFn, finished_stats, read_json, write_json


class LabelFrequencies(artifact.Artifact):
    """A directory with label_stats.json (components/label_stats.py's format)."""

    TYPE_NAME = "cdgt.LabelFrequencies"


def stats_path(stats_artifact: artifact.Artifact) -> str:
    """The label_stats.json inside a LabelFrequencies artifact."""
    return os.path.join(stats_artifact.uri, STATS_FILE)


def load_stats(stats_uri: str) -> dict:
    """label_stats.json from a LabelFrequencies artifact's uri."""
    return read_json(os.path.join(stats_uri, STATS_FILE))


def count_labels(file_pattern: str, pipeline_args: list[str] | None = None) -> tuple[int, list[int]]:
    """(M, counts) over the gzipped tf.Examples matching `file_pattern`, with one Beam pass (O(L) memory)."""
    import tempfile

    import apache_beam as beam
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.options.pipeline_options import PipelineOptions

    from cdgt.components.formats.record import labels_of_tf_example

    with tempfile.TemporaryDirectory() as tmp:
        target = os.path.join(tmp, "counts.json")
        options = PipelineOptions(pipeline_args or ["--direct_running_mode=in_memory"])
        with beam.Pipeline(options=options) as pipeline:
            _ = (
                pipeline
                | "ReadTrain" >> beam.io.ReadFromTFRecord(file_pattern, compression_type=CompressionTypes.AUTO)
                | "Labels" >> beam.Map(labels_of_tf_example)
                | "Count" >> beam.CombineGlobally(LabelCountsFn())
                | "Write" >> beam.Map(lambda c: write_json(target, {"num": c[0], "counts": c[1]}))
            )
        result = read_json(target)
    return int(result["num"]), list(result["counts"])


@tfx.dsl.components.component
def LabelStatsGen(
    examples: tfx.dsl.components.InputArtifact[tfx.types.standard_artifacts.Examples],
    label_stats: tfx.dsl.components.OutputArtifact[LabelFrequencies],
    num_labels: tfx.dsl.components.Parameter[int],
    label_names_json: tfx.dsl.components.Parameter[str],
    head_fraction: tfx.dsl.components.Parameter[float],
    tail_fraction: tfx.dsl.components.Parameter[float],
    psp_a: tfx.dsl.components.Parameter[float],
    psp_b: tfx.dsl.components.Parameter[float],
    split: tfx.dsl.components.Parameter[str] = "train",
) -> None:
    """Count the labels of `split` and write label_stats.json into the output artifact."""
    split_uri = artifact_utils.get_split_uri([examples], split)
    counted = count_labels(os.path.join(split_uri, "*"))
    names = json.loads(label_names_json) or None
    stats = finished_stats(counted, num_labels, names, head_fraction=head_fraction, tail_fraction=tail_fraction,
                           a=psp_a, b=psp_b)
    write_json(stats_path(label_stats), stats)
    summary = stats["summary"]
    label_stats.set_int_custom_property("num_labels", int(num_labels))
    label_stats.set_int_custom_property("num_train", int(counted[0]))
    label_stats.set_int_custom_property("tail_size", int(summary.get("tail_size", 0)))
