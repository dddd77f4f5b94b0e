"""The embedded synthetic data set materialised as a built data directory, like `cdgt data build` writes:
`<out>/{train,validation,test}/data-00000-of-00001.tfrecord.gz`, `manifest.json` and `label_stats.json`.

Why: the pipeline (ImportExampleGen) reads TFRecords, so `cdgt run` with no data set needs the synthetic splits of
cdgt_keras.synthetic on disk in the same layout as every real data set. The set is small (thousands of examples),
so it is written directly with TensorFlow's TFRecord writer, without a Beam job.

Example:
    >>> manifest = write_synthetic("/tmp/synth", num_examples=500, num_labels=20)  # doctest: +SKIP
    >>> manifest["splits"]["train"]["examples"], manifest["num_labels"]  # doctest: +SKIP
    (350, 20)
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import scipy.sparse as sp

from cdgt.components.formats.record import Record, to_tf_example
from cdgt.components.label_stats import STATS_FILE, label_statistics, write_json, write_text_atomic
from cdgt.components.manifest import MANIFEST_FILE
from cdgt_keras.records import SPLITS

# The embedded default: the same draw `cdgt train --dataset synthetic` uses.
DEFAULT_SIZE = {"num_examples": 4000, "num_labels": 100}


def _records(split: str, features: Any, labels: sp.csr_matrix) -> list[Record]:
    """One Record per row; dense rows become `features`, csr rows `feature_ids` + `feature_values`."""
    out = []
    for row in range(labels.shape[0]):
        ids = tuple(int(i) for i in labels.indices[labels.indptr[row]:labels.indptr[row + 1]])
        key = f"synthetic-{split}:{row}"
        if sp.issparse(features):
            vec = features.getrow(row)
            out.append(Record(key, split, ids, feature_ids=tuple(int(i) for i in vec.indices),
                              feature_values=tuple(float(v) for v in vec.data)))
        else:
            out.append(Record(key, split, ids, dense=tuple(float(v) for v in features[row])))
    return out


def _write_tfrecords(path: str, records: list[Record]) -> None:
    import tensorflow as tf

    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path, options=tf.io.TFRecordOptions(compression_type="GZIP")) as writer:
        for record in records:
            writer.write(to_tf_example(record))


def write_synthetic(out: str, *, num_examples: int = DEFAULT_SIZE["num_examples"],
                    num_labels: int = DEFAULT_SIZE["num_labels"], sparse: bool = False, seed: int = 0,
                    overwrite: bool = False, **stats_options: Any) -> dict[str, Any]:
    """Write the synthetic splits as a built data directory and return its manifest.

    `stats_options` (head_fraction, tail_fraction, a, b) go to label_statistics. An existing build is kept
    unless `overwrite` (the manifest is written last, so its presence means the build finished).
    """
    from cdgt_keras.synthetic import synthetic_splits

    manifest_path = os.path.join(out, MANIFEST_FILE)
    if os.path.exists(manifest_path) and not overwrite:
        raise FileExistsError(f"{out} already holds a built data set; pass overwrite=True to replace it")
    splits = synthetic_splits(num_examples=num_examples, num_labels=num_labels, sparse=sparse, seed=seed)
    counts: dict[str, dict[str, int]] = {}
    files = []
    for split in SPLITS:
        data = splits[split]
        name = os.path.join(split, "data-00000-of-00001.tfrecord.gz")
        _write_tfrecords(os.path.join(out, name), _records(split, data.features, data.labels))
        files.append(name)
        counts[split] = {"examples": data.num_examples, "no_labels": int((data.labels.getnnz(axis=1) == 0).sum()),
                         "positives": int(data.labels.nnz)}
    train = splits["train"]
    label_counts = np.asarray(train.labels.sum(axis=0)).ravel().astype(np.int64)
    write_json(os.path.join(out, STATS_FILE),
               label_statistics(label_counts, train.num_examples, train.label_names, **stats_options))
    manifest = {
        "format": "synthetic",
        "task": None,
        "sources": [{"path": "cdgt_keras.synthetic.synthetic_splits", "sha256": None}],
        "feature_kind": "sparse" if sparse else "dense",
        "num_features": int(train.num_features),
        "split_rule": f"seeded permutation of one synthetic_dataset draw (seed {seed}): 70/10/20",
        "options": {"num_examples": num_examples, "num_labels": num_labels, "sparse": sparse, "seed": seed},
        "splits": counts,
        "files": {s: f"{s}/data-*.tfrecord.gz" for s in SPLITS},
        "num_examples": sum(c["examples"] for c in counts.values()),
        "num_labels": int(train.num_labels),
        "rejected": {"total": 0, "by_reason": {}},
        "notes": {},
        "data_files": files,
        "label_names": list(train.label_names),
    }
    write_text_atomic(manifest_path, json.dumps(manifest, indent=1) + "\n")
    return manifest
