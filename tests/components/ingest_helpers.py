"""Helpers shared by the ingestion tests: fixture writers, a small build, reading TFRecords back."""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path
from typing import Any

from cdgt.components.example_gen import BuildOptions, build
from cdgt.components.formats.sources import make_source

IN_MEMORY = ["--direct_running_mode=in_memory"]


def run_build(
    fmt: str,
    paths: list[Path | str],
    out: Path,
    args: list[str] | None = None,
    source_options: dict | None = None,
    **options: Any,
) -> dict:
    """make_source + build, in-memory DirectRunner unless `args` say otherwise."""
    source = make_source(fmt, [str(p) for p in paths], **(source_options or {}))
    return build(source, BuildOptions(out=str(out), **options), IN_MEMORY if args is None else args)


def read_split(out: Path, split: str) -> list[dict]:
    """Every tf.Example of a split as {id, labels, features|feature_ids+feature_values|text}."""
    import tensorflow as tf
    from tensorflow.core.example import example_pb2

    files = sorted(glob.glob(os.path.join(out, split, "data-*.tfrecord.gz")))
    rows = []
    for raw in tf.data.TFRecordDataset(files, compression_type="GZIP").as_numpy_iterator():
        feature = example_pb2.Example.FromString(raw).features.feature
        row: dict = {
            "id": feature["id"].bytes_list.value[0].decode(),
            "labels": list(feature["labels"].int64_list.value),
        }
        for key in ("features", "feature_values"):
            if key in feature:
                row[key] = list(feature[key].float_list.value)
        if "feature_ids" in feature:
            row["feature_ids"] = list(feature["feature_ids"].int64_list.value)
        if "text" in feature:
            row["text"] = feature["text"].bytes_list.value[0].decode()
        rows.append(row)
    return rows


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


def write_xmc(path: Path, header: str, lines: list[str]) -> Path:
    path.write_text(header + "\n" + "\n".join(lines) + "\n")
    return path
