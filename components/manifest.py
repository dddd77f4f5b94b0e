"""`manifest.json`: what a built data set came from and holds - sources with sha256, format, task, counts per
split, features, labels, rejects by reason - assembled from the driver's static facts and the job's tallies.

Example:
    >>> m = assemble({"format": "xmc"}, {"train": {"examples": 2}}, {"blank_line": 1}, {}, ["0", "1"])
    >>> m["num_labels"], m["rejected"]["total"]
    (2, 1)
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from typing import Any

from cdgt.components.formats.textio import strip_compression
from cdgt_keras.records import SPLITS

MANIFEST_FILE = "manifest.json"


def sha256_file(path: str, chunk: int = 1 << 20) -> str:
    """sha256 of a file's bytes as stored (compressed files are hashed compressed), streaming."""
    digest = hashlib.sha256()
    if "://" in path:
        from apache_beam.io.filesystems import FileSystems

        handle = FileSystems.open(path, compression_type="uncompressed")
    else:
        handle = open(path, "rb")
    with handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def static_facts(source: Any, task: str | None, options: Mapping[str, Any]) -> dict[str, Any]:
    """What is known before the job runs: inputs with sha256, format, task, feature kind and count."""
    return {
        "format": source.format,
        "task": task,
        "sources": [
            {"path": os.path.abspath(p) if "://" not in p else p, "sha256": sha256_file(p)}
            for p in source.input_paths
        ],
        "feature_kind": source.kind,
        "num_features": source.num_features,
        "split_rule": split_rule(source),
        "options": dict(options),
        # each feature id's name (ARFF attributes: words of a bag-of-words), which label texts are matched to
        **({"feature_names": list(source.feature_names)} if getattr(source, "feature_names", None) else {}),
    }


def split_rule(source: Any) -> str:
    """A sentence saying how examples were assigned to splits."""
    if source.format == "debian":
        return "md5(package name) as a number in [0,1): < 0.8 train, < 0.9 validation, else test"
    carve = getattr(source, "carve", 0.0)
    files = ", ".join(f"{strip_compression(os.path.basename(f.path))}={f.split}" for f in source.files)
    if carve:
        return (
            f"by file ({files}); validation = training examples with md5('validation:' + id) "
            f"< {carve} (id = '<file>:<line>')"
        )
    return f"by file ({files})"


def assemble(
    static: Mapping[str, Any],
    counts: Mapping[str, Mapping[str, int]],
    rejects: Mapping[str, int],
    notes: Mapping[str, int],
    label_names: Sequence[str],
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest dict: static facts + per-split counts + labels + rejected / noted counts by reason."""
    splits = {s: {"examples": 0, "no_labels": 0, "positives": 0, **counts.get(s, {})} for s in SPLITS}
    return {
        **static,
        "splits": splits,
        "files": {s: f"{s}/data-*.tfrecord.gz" for s in SPLITS},
        "num_examples": sum(v["examples"] for v in splits.values()),
        "num_labels": len(label_names),
        "rejected": {"total": sum(rejects.values()), "by_reason": dict(sorted(rejects.items()))},
        "notes": dict(sorted(notes.items())),
        **(extra or {}),
        "label_names": list(label_names),
    }


def label_rule(min_count: int, kept: int, dropped: int) -> str:
    """A sentence saying which labels the build kept: all of them, or those with >= min_count training positives."""
    if min_count <= 0:
        return f"every label seen in any split ({kept} kept)"
    return f"labels with >= {min_count} training positives ({kept} kept, {dropped} dropped)"


def unseen_labels(train_counts: Sequence[int], label_names: Sequence[str], shown: int = 20) -> dict[str, Any]:
    """How many labels have no training positive (no model can learn them), and the first `shown` names."""
    names = [label_names[i] for i, count in enumerate(train_counts) if count == 0]
    return {"labels_without_training_positive": len(names), "labels_without_training_positive_names": names[:shown]}


def empty_split_message(empty: Sequence[str], static: Mapping[str, Any]) -> str:
    """One line saying which splits came out empty, how splits were assigned, and what usually causes it."""
    return (
        f"no examples in the {' and '.join(empty)} split{'s' if len(empty) > 1 else ''} "
        f"(splits {static.get('split_rule', '?')}): a header-only file, or every record rejected? "
        "training needs examples in train, validation and test"
    )
