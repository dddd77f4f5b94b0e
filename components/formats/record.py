"""One parsed example on its way to a TFRecord, and its tf.Example encoding.

Example:
    >>> r = Record(id="yeast-train.arff:122", split="train", labels=(0, 3), dense=(0.1, -0.2))
    >>> r.kind
    'dense'
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from cdgt_keras.features import DENSE, ID, LABELS, SPARSE_IDS, SPARSE_VALUES, TEXT

LabelTuple = tuple[Any, ...]  # label ids (int) or, before the vocabulary is known, label names (str)


@dataclass(frozen=True)
class Record:
    """An example: id, split, labels and exactly one of dense features, sparse features or text."""

    id: str
    split: str
    labels: LabelTuple
    dense: tuple[float, ...] | None = None
    feature_ids: tuple[int, ...] | None = None
    feature_values: tuple[float, ...] | None = None
    text: str | None = None

    @property
    def kind(self) -> str:
        """'dense', 'sparse' or 'text'."""
        if self.text is not None:
            return "text"
        return "sparse" if self.feature_ids is not None else "dense"

    def with_labels(self, labels: LabelTuple) -> Record:
        return replace(self, labels=tuple(labels))

    def with_split(self, split: str) -> Record:
        return replace(self, split=split)


def to_tf_example(record: Record) -> bytes:
    """Serialize as a tf.Example: labels, id, and features | feature_ids + feature_values | text (the keys of
    cdgt_keras.features, the contract every reader of a built split shares).

    The features map is written in key order (`deterministic=True`): protobuf otherwise writes a map in an order that
    changes from one process to the next, and two builds of the same data would hold different bytes (and SHA-256s
    in their manifests)."""
    from tensorflow.core.example import example_pb2, feature_pb2

    def ints(values: Any) -> feature_pb2.Feature:
        return feature_pb2.Feature(int64_list=feature_pb2.Int64List(value=values))

    def floats(values: Any) -> feature_pb2.Feature:
        return feature_pb2.Feature(float_list=feature_pb2.FloatList(value=values))

    def data(value: str) -> feature_pb2.Feature:
        return feature_pb2.Feature(bytes_list=feature_pb2.BytesList(value=[value.encode("utf-8")]))

    feature = {LABELS: ints(record.labels), ID: data(record.id)}
    if record.text is not None:
        feature[TEXT] = data(record.text)
    elif record.feature_ids is not None:
        feature[SPARSE_IDS] = ints(record.feature_ids)
        feature[SPARSE_VALUES] = floats(record.feature_values)
    else:
        feature[DENSE] = floats(record.dense or ())
    return example_pb2.Example(features=feature_pb2.Features(feature=feature)).SerializeToString(deterministic=True)


def labels_of_tf_example(serialized: bytes) -> list[int]:
    """The `labels` int64 list of a serialized tf.Example."""
    from tensorflow.core.example import example_pb2

    return list(example_pb2.Example.FromString(serialized).features.feature[LABELS].int64_list.value)
