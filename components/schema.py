"""The curated schema of a data set and the anomalies ExampleValidator finds against it.

TFX's convention: infer a schema once, curate it, keep it with the pipeline and import it on every run
(ImportSchemaGen), so that ExampleValidator compares new data with what the pipeline was built for; a schema
re-inferred on every run describes whatever data came in and can never show drift.

`infer_curated_schema` is the inference SchemaGen would make on the training split (TFDV, feature shapes
inferred), curated with what the data's manifest knows and the data cannot show:
- `labels` (and `feature_ids` of sparse data) take ids in [0, num_labels) ([0, num_features)): a label id beyond
  the catalogue is an anomaly, not a new label;
- how many labels (or sparse features) an example has is not constrained (the inferred minimum would reject an
  example with fewer than the training split happened to show);
- free text and example ids have no value domain (a short split can make TFDV infer one from its few values).

Example:
    >>> schema = infer_curated_schema("runs/pipeline-synthetic/data/synthetic")     # doctest: +SKIP
    >>> write_schema(schema, "pipeline/schemas/cdgt-synthetic.pbtxt")               # doctest: +SKIP
    >>> anomaly_lines(anomalies_uri, ["train", "validation", "test"])               # doctest: +SKIP
    ["test: feature 'labels': Out-of-range values (Unexpectedly large maximum int value: 150>99.)"]
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cdgt_keras.features import ID, LABELS, SPARSE_IDS, SPARSE_VALUES, TEXT

REPO = Path(__file__).resolve().parents[1]
SCHEMA_DIR = REPO / "pipeline" / "schemas"  # curated schemas kept with the pipeline: <pipeline name>.pbtxt
SCHEMA_DIFF = "SchemaDiff.pb"  # what ExampleValidator writes per split
ID_RANGES = {LABELS: "num_labels", SPARSE_IDS: "num_features"}  # feature -> manifest field bounding its ids
FREE_VALUES = (TEXT, ID)  # bytes features whose values are not an enumeration
ANY_COUNT = (LABELS, SPARSE_IDS, SPARSE_VALUES)  # lists whose length varies from example to example


def kept_schema_path(pipeline_name: str) -> Path:
    """Where the curated schema of a pipeline is kept in the repository (it may not exist)."""
    return SCHEMA_DIR / f"{pipeline_name}.pbtxt"


def curate(schema: Any, manifest: dict[str, Any]) -> Any:
    """The inferred schema with the curation above (a new proto; `schema` is unchanged)."""
    curated = type(schema)()
    curated.CopyFrom(schema)
    dropped = set()
    for feature in curated.feature:
        bound = ID_RANGES.get(feature.name)
        if bound and int(manifest.get(bound) or 0) > 0:
            feature.ClearField("domain_info")
            feature.int_domain.min = 0
            feature.int_domain.max = int(manifest[bound]) - 1
        if feature.name in ANY_COUNT:
            feature.ClearField("value_count")
        if feature.name in FREE_VALUES and feature.HasField("domain"):
            dropped.add(feature.domain)
            feature.ClearField("domain")
        if feature.name in FREE_VALUES and feature.HasField("string_domain"):
            feature.ClearField("string_domain")
    kept = [d for d in curated.string_domain if d.name not in dropped]
    del curated.string_domain[:]
    curated.string_domain.extend(kept)
    return curated


def infer_curated_schema(data_dir: str | Path) -> Any:
    """SchemaGen's inference on the built data's training split, curated (see the module docstring)."""
    import tensorflow_data_validation as tfdv

    from cdgt_keras.records import read_manifest

    pattern = os.path.join(str(data_dir), "train", "*.tfrecord.gz")
    statistics = tfdv.generate_statistics_from_tfrecord(data_location=pattern)
    return curate(tfdv.infer_schema(statistics, infer_feature_shape=True), read_manifest(data_dir))


def write_schema(schema: Any, path: str | Path) -> Path:
    """The schema as text proto at `path` (its folder created), with a header saying how it was made."""
    from google.protobuf import text_format

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = ("# Curated schema (components/schema.py): inferred from the training split, ids bounded by the\n"
              "# manifest. Edit by hand to curate; regenerate with `cdgt run ... --update-schema`.\n")
    path.write_text(header + text_format.MessageToString(schema))
    return path


def read_schema(path: str | Path) -> Any:
    """A schema text proto."""
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    return text_format.Parse(Path(path).read_text(), schema_pb2.Schema())


def anomaly_lines(anomalies_uri: str, splits: list[str]) -> list[str]:
    """One line per anomaly ExampleValidator wrote under `anomalies_uri`: `split: feature 'name': what (why)`."""
    from tensorflow_metadata.proto.v0 import anomalies_pb2

    lines = []
    for split in splits:
        path = os.path.join(anomalies_uri, f"Split-{split}", SCHEMA_DIFF)
        if not os.path.exists(path):
            continue
        with open(path, "rb") as handle:
            anomalies = anomalies_pb2.Anomalies.FromString(handle.read())
        for name, info in sorted(anomalies.anomaly_info.items()):
            lines.append(f"{split}: feature {name!r}: {info.short_description} ({info.description})")
        if anomalies.HasField("dataset_anomaly_info"):
            info = anomalies.dataset_anomaly_info
            lines.append(f"{split}: data set: {info.short_description} ({info.description})")
    return lines
