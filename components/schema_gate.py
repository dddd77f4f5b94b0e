"""SchemaGate: stop the pipeline when ExampleValidator found anomalies against the curated schema.

Why a component: TFX's ExampleValidator records anomalies (and a per-split `blessed` property) but never fails,
so Transform and the Trainer would go on with drifted data. SchemaGate reads the anomalies and raises
`DataAnomalies`, naming each feature and what is wrong; pipeline/pipeline.py makes Transform and LabelStatsGen
wait for it, so nothing downstream runs on data that does not match the schema. `cdgt run` prints the lines.

Example (inside a pipeline):
    >>> gate = SchemaGate(anomalies=validator.outputs["anomalies"])   # doctest: +SKIP
    >>> transform.add_upstream_node(gate)                             # doctest: +SKIP
"""

# No `from __future__ import annotations`: TFX reads the component signatures at run time.

from tfx import v1 as tfx
from tfx.types import artifact_utils

from cdgt.components.schema import anomaly_lines


class DataAnomalies(RuntimeError):
    """The data does not match the curated schema; `lines` has one line per anomaly."""

    def __init__(self, lines: list[str]):
        super().__init__("the data does not match the schema:\n  " + "\n  ".join(lines))
        self.lines = lines


@tfx.dsl.components.component
def SchemaGate(anomalies: tfx.dsl.components.InputArtifact[tfx.types.standard_artifacts.ExampleAnomalies]) -> None:
    """Raise DataAnomalies when any split has an anomaly."""
    lines = anomaly_lines(anomalies.uri, artifact_utils.decode_split_names(anomalies.split_names))
    if lines:
        raise DataAnomalies(lines)
