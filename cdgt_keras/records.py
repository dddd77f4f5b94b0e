"""Read a built data directory (`cdgt data build` output: manifest.json + gzipped tf.Example TFRecords).

The tf.Example keys are the feature contract of cdgt_keras.features (shared with the ingestion and the serving
signature): `labels` (int64 list), `id` (bytes), and one of `features` (float list), `feature_ids` +
`feature_values` (sparse), or `text` (bytes).

Example:
    >>> splits = read_splits("data/yeast")   # doctest: +SKIP
    >>> splits["train"].features.shape       # doctest: +SKIP
    (1353, 103)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from cdgt_keras.data import MultiLabelData
from cdgt_keras.features import DENSE, ID, LABELS, SPARSE_IDS, SPARSE_VALUES, TEXT, label_spec, labels_csr, stack_labels

SPLITS = ("train", "validation", "test")


RECORD_ORDER = "by id, numbers in ids by value (in_id_order)"  # a built manifest's `record_order`


def id_order_key(record_id: str) -> tuple[tuple[int, int | str], ...]:
    """The sort key of a record's id: runs of digits compared as numbers, the rest as text.

        >>> sorted(["f.arff:10", "f.arff:9", "a"], key=id_order_key)
        ['a', 'f.arff:9', 'f.arff:10']
    """
    import re

    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", record_id) if part)


def in_id_order(records: Iterable[tuple[str, bytes]]) -> list[bytes]:
    """Serialized records, given as (id, bytes), sorted by id (id_order_key: `f.arff:9` before `f.arff:10`, so
    records numbered by their line keep the file's order), then by their bytes.

    Why: the order in which a Beam runner hands records to the writer changes with how the sources were listed and
    from one process to the next, and a split's order decides which rows one seed puts in each batch. A built split
    is written in this order (components.example_gen) and the TFX Trainer reads its transformed split in it
    (ImportExampleGen reshuffles), so every road trains on one order and two builds hold the same bytes.

        >>> in_id_order([("f.arff:10", b"2"), ("f.arff:9", b"9"), ("a", b"1")])
        [b'1', b'9', b'2']
    """
    return [data for _, _, data in sorted((id_order_key(key), key, data) for key, data in records)]


def read_manifest(directory: str | Path) -> dict[str, Any]:
    """The manifest.json of a built data directory (a local path or a URI such as gs://), with a clear error
    when it is missing."""
    if "://" in str(directory):  # remote: through TensorFlow's file systems
        import tensorflow as tf

        uri = str(directory).rstrip("/") + "/manifest.json"
        if not tf.io.gfile.exists(uri):
            raise FileNotFoundError(f"{uri} not found: build the data with `cdgt data build` and upload it there")
        with tf.io.gfile.GFile(uri) as handle:
            return json.loads(handle.read())
    path = Path(directory) / "manifest.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: build it first with `cdgt data build SOURCE --out {directory}`")
    return json.loads(path.read_text())


def _split_files(directory: Path, split: str) -> list[str]:
    files = sorted(str(p) for p in (directory / split).glob("*.tfrecord.gz"))
    if not files:
        raise FileNotFoundError(f"no {split}/*.tfrecord.gz files under {directory}")
    return files


def read_split(directory: str | Path, split: str, manifest: dict[str, Any] | None = None,
               batch_size: int = 4096) -> MultiLabelData:
    """Load one split into memory: dense float32 or csr features (text: an object array of str)."""
    import tensorflow as tf

    directory = Path(directory)
    manifest = manifest or read_manifest(directory)
    kind, num_labels = manifest["feature_kind"], int(manifest["num_labels"])
    spec: dict[str, Any] = {**label_spec(), ID: tf.io.FixedLenFeature([], tf.string, default_value=b"")}
    if kind == "dense":
        spec[DENSE] = tf.io.FixedLenFeature([int(manifest["num_features"])], tf.float32)
    elif kind == "sparse":
        spec[SPARSE_IDS] = tf.io.VarLenFeature(tf.int64)
        spec[SPARSE_VALUES] = tf.io.VarLenFeature(tf.float32)
    elif kind == "text":
        spec[TEXT] = tf.io.FixedLenFeature([], tf.string)
    else:
        raise ValueError(f"{directory}/manifest.json: feature_kind {kind!r} is not one of dense, sparse, text")
    files = _split_files(directory, split)
    _check_files(directory, split, files, manifest)
    label_rows, feature_parts, ids = [], [], []
    for batch in _batches(files, spec, batch_size):
        label_rows.append(labels_csr(batch[LABELS], num_labels))
        ids.extend(i.decode("utf-8") for i in batch[ID].numpy())
        if kind == "dense":
            feature_parts.append(batch[DENSE].numpy())
        elif kind == "sparse":
            feature_parts.append(_sparse_features(batch[SPARSE_IDS], batch[SPARSE_VALUES],
                                                  int(manifest["num_features"])))
        else:
            feature_parts.append(np.array([t.decode("utf-8") for t in batch[TEXT].numpy()], dtype=object))
    _check_count(directory, split, files, manifest, sum(rows.shape[0] for rows in label_rows))
    labels = stack_labels(label_rows, num_labels)
    if kind == "dense":
        features: Any = np.concatenate(feature_parts) if feature_parts else np.zeros((0, manifest["num_features"]))
    elif kind == "sparse":
        features = sp.vstack(feature_parts, format="csr")
    else:
        features = np.concatenate(feature_parts) if feature_parts else np.zeros(0, dtype=object)
    names = manifest.get("label_names") or [str(i) for i in range(num_labels)]
    return MultiLabelData(features, labels, list(names), ids=ids if all(ids) else None)


def _batches(files: list[str], spec: dict[str, Any], batch_size: int) -> Iterator[dict[str, Any]]:
    """Parsed batches of each file in turn; a truncated or corrupt shard is a ValueError naming it."""
    import tensorflow as tf

    for file in files:
        ds = tf.data.TFRecordDataset([file], compression_type="GZIP").batch(batch_size)
        try:
            yield from ds.map(lambda s: tf.io.parse_example(s, spec))
        except tf.errors.OpError as err:
            reason = (err.message or type(err).__name__).splitlines()[0]
            raise ValueError(f"{file}: truncated or corrupt TFRecord shard ({reason}); rebuild the data with "
                             "`cdgt data build ... --overwrite`") from None


def _check_files(directory: Path, split: str, files: list[str], manifest: dict[str, Any]) -> None:
    """The split's shards must be the ones the manifest lists, with the sha256 it records (when it does)."""
    listed = {f for f in manifest.get("data_files", []) if f.startswith(f"{split}/")}
    found = {f"{split}/{Path(f).name}" for f in files}
    if listed and listed != found:
        extra, missing = sorted(found - listed), sorted(listed - found)
        raise ValueError(f"{directory}/{split}: the shards differ from manifest.json's data_files (not listed: "
                         f"{extra}, missing: {missing}); rebuild the data with `cdgt data build`")
    recorded = manifest.get("data_sha256") or {}
    for file in files:
        name = f"{split}/{Path(file).name}"
        if name in recorded and _sha256(file) != recorded[name]:
            raise ValueError(f"{file}: its sha256 differs from the one manifest.json records: the shard changed "
                             "since the build; rebuild the data with `cdgt data build`")


def _sha256(path: str, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _check_count(directory: Path, split: str, files: list[str], manifest: dict[str, Any], rows: int) -> None:
    """The split must hold as many examples as manifest.json says (a shard swapped for another is caught here)."""
    expected = manifest.get("splits", {}).get(split, {}).get("examples")
    if expected is not None and int(expected) != rows:
        names = ", ".join(str(Path(f).relative_to(directory)) for f in files)
        raise ValueError(f"{directory}/{split}: {rows:,} examples in {names} but manifest.json says "
                         f"{int(expected):,}: a shard was replaced or changed since the build; rebuild the data "
                         "with `cdgt data build`")


def read_splits(directory: str | Path) -> dict[str, MultiLabelData]:
    """Every split of a built data directory, each checked against the manifest's shard list and counts."""
    manifest = read_manifest(directory)
    return {split: read_split(directory, split, manifest) for split in SPLITS}


def _sparse_features(ids, values, num_features: int) -> sp.csr_matrix:
    idx = ids.indices.numpy()
    rows = ids.dense_shape.numpy()[0]
    return sp.csr_matrix((values.values.numpy().astype(np.float32), (idx[:, 0], ids.values.numpy())),
                         shape=(rows, num_features))
