"""Builds of the real data sets: counts equal the data READMEs, statistics equal a direct numpy count."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from ingest_helpers import read_json, read_split, run_build

pytestmark = pytest.mark.data


@pytest.fixture(scope="session")
def built(data_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """Build each real set once per session: name -> (out folder, manifest, seconds)."""
    cache: dict[str, tuple[Path, dict, float]] = {}

    def get(name: str) -> tuple[Path, dict, float]:
        if name not in cache:
            out = tmp_path_factory.mktemp(name)
            start = time.monotonic()
            if name in ("debtags", "deps"):
                manifest = run_build(
                    "debian", [data_dir / "debian-bookworm"], out, source_options={"task": name}, task=name
                )
            else:
                manifest = run_build("arff", [data_dir / name], out)
            cache[name] = (out, manifest, time.monotonic() - start)
            print(f"\n[build {name}: {cache[name][2]:.1f} s]")
        return cache[name]

    return get


def _all_label_counts(out: Path, num_labels: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(train counts, all-split counts, train M) counted directly from the TFRecords with numpy."""
    train = np.zeros(num_labels, dtype=np.int64)
    total = np.zeros(num_labels, dtype=np.int64)
    m = 0
    for split in ("train", "validation", "test"):
        for row in read_split(out, split):
            ids = np.asarray(row["labels"], dtype=np.int64)
            assert np.unique(ids).size == ids.size
            total[ids] += 1
            if split == "train":
                train[ids] += 1
                m += 1
    return train, total, m


@pytest.mark.parametrize(
    ("name", "train", "test", "features", "labels", "top", "rarest"),
    [("yeast", 1500, 917, 103, 14, 1128, 21), ("delicious", 12920, 3185, 500, 983, 5197, 18)],
)
def test_mulan_counts_and_statistics(built, name, train, test, features, labels, top, rarest):
    out, manifest, _ = built(name)
    splits = manifest["splits"]
    assert splits["train"]["examples"] + splits["validation"]["examples"] == train
    assert splits["test"]["examples"] == test
    assert manifest["num_features"] == features and manifest["num_labels"] == labels
    assert manifest["rejected"]["total"] == 0
    train_counts, _, m = _all_label_counts(out, labels)
    stats = read_json(out / "label_stats.json")
    assert stats["counts"] == train_counts.tolist() and stats["num_train"] == m
    assert stats["freq"] == (train_counts / m).tolist()  # in full: the TFX Trainer's model is built from these
    # The README's figures are over the whole training file = our train + validation.
    whole = train_counts + _split_counts(out, "validation", labels)
    assert (whole.max(), whole.min()) == (top, rarest)


def _split_counts(out: Path, split: str, num_labels: int) -> np.ndarray:
    counts = np.zeros(num_labels, dtype=np.int64)
    for row in read_split(out, split):
        counts[row["labels"]] += 1
    return counts


def test_debtags_counts(built):
    out, manifest, _ = built("debtags")
    assert manifest["num_examples"] == 30303 and manifest["num_labels"] == 598
    assert manifest["rejected"]["total"] == 0 and manifest["notes"].get("missing_long_description", 0) == 0
    train, total, m = _all_label_counts(out, 598)
    names = manifest["label_names"]
    assert names[int(total.argmax())] == "devel::library" and total.max() == 10277
    assert (total <= 5).sum() == 85 and (total <= 20).sum() == 224
    assert round(total.sum() / 30303, 2) == 3.70
    stats = read_json(out / "label_stats.json")
    assert (
        stats["counts"] == train.tolist()
        and stats["num_train"] == m == manifest["splits"]["train"]["examples"]
    )
    assert 0.78 < m / 30303 < 0.82


def test_deps_counts(built):
    out, manifest, _ = built("deps")
    assert manifest["num_examples"] == 56929 and manifest["num_labels"] == 41405
    train, total, _ = _all_label_counts(out, 41405)
    assert manifest["label_names"][int(total.argmax())] == "libc6" and total.max() == 21809
    assert (total == 1).sum() == 19032 and (total <= 5).sum() == 35011
    assert read_json(out / "label_stats.json")["counts"] == train.tolist()
    sample = read_split(out, "test")[:50]
    assert all(row["text"].startswith(row["id"] + "\n") for row in sample)


def test_debian_ids_follow_the_hash_split(built):
    from cdgt.components.formats.splits import catalogue_split

    out, _, _ = built("debtags")
    for split in ("validation", "test"):
        ids = [row["id"] for row in read_split(out, split)]
        assert Counter(catalogue_split(i) for i in ids) == Counter({split: len(ids)})
