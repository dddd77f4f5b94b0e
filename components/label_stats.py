"""Label statistics of a training split: count per label, M, freq, frequency order, head and
tail sets, and PSP@k propensities, from one streaming Beam pass; written as `label_stats.json`.

Usable standalone (`compute_label_stats(DIR)`), inside `cdgt data build` (the `LabelCounts` transform), and
from a TFX component (call `compute_label_stats` on the Examples artifact's directory).

Example:
    >>> s = label_statistics([3, 1, 0], num_train=4, label_names=["a", "b", "c"])
    >>> s["order"], s["head"], s["tail"]
    ([0, 1, 2], [0], [2])
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from typing import Any

import apache_beam as beam
import numpy as np

from cdgt_keras.config import CDGTConfig
from cdgt_keras.labels import head_tail_split, label_order
from cdgt_keras.metrics import propensities

STATS_FILE = "label_stats.json"
_DEFAULTS = CDGTConfig()  # head/tail fractions and propensity constants come from the one config


def label_statistics(
    counts: Sequence[int],
    num_train: int,
    label_names: Sequence[str] | None = None,
    head_fraction: float = _DEFAULTS.head_fraction,
    tail_fraction: float = _DEFAULTS.tail_fraction,
    a: float = _DEFAULTS.psp_a,
    b: float = _DEFAULTS.psp_b,
) -> dict[str, Any]:
    """The statistics as a JSON-ready dict: a summary first, then per-label arrays indexed by label id."""
    counts_arr = np.asarray(counts, dtype=np.int64)
    freq = counts_arr / max(num_train, 1)
    head, tail = head_tail_split(freq, head_fraction, tail_fraction)
    order = label_order(freq)
    prop = propensities(counts_arr, max(num_train, 2), a, b) if counts_arr.size else np.zeros(0)
    return {
        "summary": _summary(counts_arr, num_train, head, tail),
        "num_train": int(num_train),
        "num_labels": int(counts_arr.size),
        "head_fraction": head_fraction,
        "tail_fraction": tail_fraction,
        "propensity_a": a,
        "propensity_b": b,
        "head": head.tolist(),
        "tail": tail.tolist(),
        "order": order.tolist(),
        "counts": counts_arr.tolist(),
        # In full (JSON keeps a float64 to the bit): the TFX Trainer builds the model from these, and `cdgt train`
        # from counts / M itself; rounded, the two roads' rarity weights differed in the last digits and their
        # trainings parted after two epochs.
        "freq": freq.tolist(),
        "propensities": prop.tolist(),
        "label_names": list(label_names) if label_names is not None else None,
    }


def _summary(counts: np.ndarray, num_train: int, head: np.ndarray, tail: np.ndarray) -> dict[str, Any]:
    if counts.size == 0:
        return {"M": int(num_train), "L": 0}
    ordered = np.sort(counts)[::-1]
    top = max(1, int(np.ceil(0.1 * counts.size)))
    total = int(counts.sum())
    return {
        "M": int(num_train),
        "L": int(counts.size),
        "positives": total,
        "label_cardinality": round(total / max(num_train, 1), 4),
        "labels_with_0_positives": int((counts == 0).sum()),
        "labels_with_le_5_positives": int((counts <= 5).sum()),
        "labels_with_le_20_positives": int((counts <= 20).sum()),
        "top_10pct_share_of_positives": round(float(ordered[:top].sum()) / max(total, 1), 4),
        "max_count": int(ordered[0]),
        "median_count": float(np.median(counts)),
        "min_count": int(ordered[-1]),
        "head_size": int(head.size),
        "tail_size": int(tail.size),
        "head_share_of_positives": round(float(counts[head].sum()) / max(total, 1), 4),
        "tail_share_of_positives": round(float(counts[tail].sum()) / max(total, 1), 4),
    }


class CountAccumulator:
    """(M, counts) with a counts array that grows to the largest label id seen; merges by padding."""

    def __init__(self) -> None:
        self.num, self.counts = 0, np.zeros(0, dtype=np.int64)

    def add(self, labels: Iterable[int]) -> CountAccumulator:
        ids = np.unique(np.fromiter(labels, dtype=np.int64))
        if ids.size and ids[-1] >= self.counts.size:
            self.counts = np.pad(self.counts, (0, int(ids[-1]) + 1 - self.counts.size))
        self.counts[ids] += 1
        self.num += 1
        return self

    def merge(self, other: CountAccumulator) -> CountAccumulator:
        size = max(self.counts.size, other.counts.size)
        self.counts = np.pad(self.counts, (0, size - self.counts.size))
        self.counts[: other.counts.size] += other.counts
        self.num += other.num
        return self


class LabelCountsFn(beam.CombineFn):
    """Beam CombineFn: label-id lists -> (M, counts list); memory is O(L), whatever the split size."""

    def create_accumulator(self) -> CountAccumulator:
        return CountAccumulator()

    def add_input(self, acc: CountAccumulator, labels: Iterable[int]) -> CountAccumulator:
        return acc.add(labels)

    def merge_accumulators(self, accs: Iterable[CountAccumulator]) -> CountAccumulator:
        merged = CountAccumulator()
        for acc in accs:
            merged.merge(acc)
        return merged

    def extract_output(self, acc: CountAccumulator) -> tuple[int, list[int]]:
        return acc.num, acc.counts.tolist()


def write_json(path: str, obj: dict[str, Any]) -> None:
    """JSON a person can read: one top-level key per line, long arrays kept on one line; written atomically."""
    body = ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in obj.items())
    text = "{\n" + body + "\n}\n"
    if "://" in path:
        from apache_beam.io.filesystems import FileSystems

        with FileSystems.create(path) as handle:
            handle.write(text.encode("utf-8"))
        return
    write_text_atomic(path, text)


def write_text_atomic(path: str, text: str) -> None:
    """Write a local file whole or not at all: a temporary file in the same folder, then a rename. A full disk
    leaves the old file (if any) and no partial one."""
    import tempfile

    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        os.chmod(temporary, 0o644)  # mkstemp's 0600 would hide the file from other users
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def read_json(path: str) -> dict[str, Any]:
    """A JSON file from a local path or any Beam filesystem."""
    if "://" in path:
        from apache_beam.io.filesystems import FileSystems

        with FileSystems.open(path) as handle:
            return json.loads(handle.read().decode("utf-8"))
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def finished_stats(
    counted: tuple[int, list[int]], num_labels: int, label_names: Sequence[str] | None, **options: Any
) -> dict[str, Any]:
    """label_statistics from a (M, counts) pair, counts padded to num_labels."""
    num, counts = counted
    if len(counts) > num_labels:
        raise ValueError(f"label id {len(counts) - 1} >= number of labels {num_labels}")
    padded = list(counts) + [0] * (num_labels - len(counts))
    return label_statistics(padded, num, label_names, **options)


def compute_label_stats(data_dir: str, pipeline_args: Sequence[str] | None = None, **options: Any) -> dict:
    """Beam job over `<data_dir>/train/data-*.tfrecord.gz`: write and return `<data_dir>/label_stats.json`.

    L and the label names come from `<data_dir>/manifest.json`; `options` go to label_statistics.
    """
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.options.pipeline_options import PipelineOptions

    from cdgt.components.formats.record import labels_of_tf_example

    manifest = read_json(os.path.join(data_dir, "manifest.json"))
    num_labels, names = manifest["num_labels"], manifest.get("label_names")
    target = os.path.join(data_dir, STATS_FILE)
    with beam.Pipeline(options=PipelineOptions(list(pipeline_args or []))) as pipeline:
        _ = (
            pipeline
            | "ReadTrain"
            >> beam.io.ReadFromTFRecord(
                os.path.join(data_dir, "train", "data-*.tfrecord.gz"), compression_type=CompressionTypes.GZIP
            )
            | "Labels" >> beam.Map(labels_of_tf_example)
            | "Count" >> beam.CombineGlobally(LabelCountsFn())
            | "Write"
            >> beam.Map(lambda c: write_json(target, finished_stats(c, num_labels, names, **options)))
        )
    return read_json(target)
