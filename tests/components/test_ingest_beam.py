"""The Beam ingestion job on small fixtures: outputs, manifest, rejects, vocabulary, rare variants, stats."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import numpy as np
import pytest
from ingest_helpers import read_json, read_split, run_build, write_xmc

from cdgt.components.formats.splits import catalogue_split
from cdgt.components.label_stats import compute_label_stats
from cdgt_keras.labels import label_frequencies
from cdgt_keras.metrics import propensities

XML = (
    '<labels xmlns="http://mulan.sourceforge.net/labels"><label name="A"/><label name="B"/>'
    '<label name="C"/></labels>'
)


def _arff(tmp_path: Path, train_rows: int = 60) -> Path:
    folder = tmp_path / "toy"
    folder.mkdir()
    head = (
        "@relation toy\n@attribute f1 numeric\n@attribute f2 numeric\n@attribute A {0,1}\n"
        "@attribute B {0,1}\n@attribute C {0,1}\n@data\n"
    )
    rng = np.random.default_rng(0)
    for split, n in (("train", train_rows), ("test", 10)):
        rows = [
            f"{rng.normal():.3f},{rng.normal():.3f},{i % 2},{int(i % 3 == 0)},{int(i % 7 == 0)}"
            for i in range(n)
        ]
        with lzma.open(folder / f"toy-{split}.arff.xz", "wt") as handle:
            handle.write(head + "\n".join(rows) + "\n")
    (folder / "toy.xml").write_text(XML)
    return folder


def test_arff_build_writes_splits_manifest_and_stats(tmp_path: Path):
    manifest = run_build("arff", [_arff(tmp_path)], tmp_path / "out")
    splits = manifest["splits"]
    assert splits["train"]["examples"] + splits["validation"]["examples"] == 60
    assert splits["validation"]["examples"] > 0 and splits["test"]["examples"] == 10
    assert manifest["num_labels"] == 3 and manifest["label_names"] == ["A", "B", "C"]
    assert manifest["num_features"] == 2 and manifest["feature_kind"] == "dense"
    assert manifest["feature_names"] == ["f1", "f2"]  # the attributes before the labels' (label texts match them)
    assert all(len(s["sha256"]) == 64 for s in manifest["sources"]) and len(manifest["sources"]) == 3
    train = read_split(tmp_path / "out", "train")
    assert len(train) == splits["train"]["examples"] and len(train[0]["features"]) == 2
    stats = read_json(tmp_path / "out" / "label_stats.json")
    counts = np.zeros(3, dtype=int)
    for row in train:
        counts[row["labels"]] += 1
    assert stats["counts"] == counts.tolist() and stats["num_train"] == len(train)
    assert stats["summary"]["M"] == len(train) and len(stats["propensities"]) == 3
    # To the bit what `cdgt train` computes from the split itself: the TFX Trainer builds its model from these.
    _, freq = label_frequencies([row["labels"] for row in train], 3)
    assert stats["freq"] == freq.tolist()
    prop = propensities(counts, len(train), stats["propensity_a"], stats["propensity_b"])
    assert stats["propensities"] == prop.tolist()
    again = compute_label_stats(str(tmp_path / "out"), ["--direct_running_mode=in_memory"])
    assert again == stats


def test_existing_output_needs_overwrite(tmp_path: Path):
    folder = _arff(tmp_path)
    run_build("arff", [folder], tmp_path / "out")
    with pytest.raises(FileExistsError, match="overwrite"):
        run_build("arff", [folder], tmp_path / "out")
    run_build("arff", [folder], tmp_path / "out", overwrite=True)


BAD_XMC = ["0,1 0:1 2:0.5", "5 1:1", "1 9:1", "2 3:nan", "1,1 0:1", " 1:2", "0 0:x"]


def test_skip_mode_writes_rejects_and_counts_them(tmp_path: Path):
    train = write_xmc(tmp_path / "train.txt", "9 4 3", BAD_XMC)
    test = write_xmc(tmp_path / "test.txt", "1 4 3", ["2 0:1"])
    valid = write_xmc(tmp_path / "valid.txt", "1 4 3", ["1 0:1"])  # a validation file: nothing carved from train
    manifest = run_build("xmc", [train, test, valid], tmp_path / "out", on_error="skip")
    rejects = [json.loads(line) for line in (tmp_path / "out" / "rejects.jsonl").read_text().splitlines()]
    reasons = {(r["line"], r["reason"]) for r in rejects}
    assert reasons == {
        (3, "label_id_out_of_range"),
        (4, "feature_id_out_of_range"),
        (5, "non_finite"),
        (6, "duplicate_label"),
        (8, "non_numeric"),
        (1, "header_count_mismatch"),
    }
    assert all(r["file"].endswith("train.txt") for r in rejects)
    assert manifest["rejected"]["total"] == 6 and manifest["rejected"]["by_reason"]["non_finite"] == 1
    assert manifest["splits"]["train"] == {"examples": 2, "no_labels": 1, "positives": 2}
    assert read_split(tmp_path / "out", "test")[0]["labels"] == [2]


def test_fail_mode_names_file_and_line(tmp_path: Path):
    train = write_xmc(tmp_path / "train.txt", "2 4 3", ["0 0:1", "1 7:1"])
    test = write_xmc(tmp_path / "test.txt", "1 4 3", ["2 0:1"])
    with pytest.raises(Exception, match=r"train\.txt:3: feature id 7 out of range") as info:
        run_build("xmc", [train, test], tmp_path / "out")
    assert "feature_id_out_of_range" in str(info.value)


def test_csv_names_min_count_and_unknown_label(tmp_path: Path):
    rows = ["x,labels", "1,cat|dog", "2,cat", "3,", "4,bird|cat"]
    (tmp_path / "train.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "test.csv").write_text("x,labels\n5,dog|bird\n")
    (tmp_path / "valid.csv").write_text("x,labels\n6,cat\n")
    manifest = run_build("csv", [tmp_path], tmp_path / "out", min_label_count=2)
    assert manifest["label_names"] == ["cat"] and manifest["labels_dropped_below_min_count"] == 2
    assert manifest["splits"]["test"]["no_labels"] == 1 and manifest["splits"]["train"]["no_labels"] == 1
    (tmp_path / "vocab.txt").write_text("cat\ndog\n")
    with pytest.raises(Exception, match=r"test\.csv:2: unknown label name 'bird'.*the first of 2 bad records"):
        run_build(
            "csv",
            [tmp_path / "train.csv", tmp_path / "test.csv"],
            tmp_path / "out2",
            source_options={"label_vocab": str(tmp_path / "vocab.txt")},
        )


def test_debian_catalogue_join_split_and_tasks(tmp_path: Path, debian_catalogue: Path):
    folder = debian_catalogue
    manifest = run_build(
        "debian", [folder], tmp_path / "tags", source_options={"task": "debtags"}, task="debtags"
    )
    assert manifest["num_examples"] == 30 and manifest["notes"]["excluded_no_labels"] == 10
    assert manifest["label_names"] == ["t::0", "t::1", "t::2"]
    rows = {
        r["id"]: (split, r)
        for split in ("train", "validation", "test")
        for r in read_split(tmp_path / "tags", split)
    }
    assert all(catalogue_split(name) == split for name, (split, _) in rows.items())
    assert rows["p3"][1]["text"] == "p3\nshort 3\nlong 3" and rows["p3"][1]["labels"] == [0, 1, 2]
    deps = run_build("debian", [folder], tmp_path / "deps", source_options={"task": "deps"}, task="deps")
    assert deps["num_examples"] == 27 and deps["label_names"] == [
        "lib0",
        "lib1",
        "lib2",
        "lib3",
        "lib4",
        "libc6",
    ]


def test_rare_variant_removes_seeded_share_of_rare_positives(tmp_path: Path):
    lines = [f"{i % 2},{2 + (i % 10 == 0)}{',4' if i < 8 else ''} 0:1" for i in range(200)]
    train = write_xmc(tmp_path / "train.txt", "200 2 5", lines)
    test = write_xmc(tmp_path / "test.txt", "2 2 5", ["4 0:1", "3 0:1"])
    files = [train, test, write_xmc(tmp_path / "valid.txt", "1 2 5", ["0 0:1"])]
    base = run_build("xmc", files, tmp_path / "base")
    rare = run_build("xmc", files, tmp_path / "rare", rare_fraction=0.5, rare_k=2, seed=3)
    run_build("xmc", files, tmp_path / "again", rare_fraction=0.5, rare_k=2, seed=3)
    before = read_json(tmp_path / "base" / "label_stats.json")["counts"]
    after = read_json(tmp_path / "rare" / "label_stats.json")["counts"]
    assert rare["rare_variant"]["labels"] == [3, 4] and before[3:] == [20, 8]
    assert after == [*before[:3], 10, 4] and rare["rare_variant"]["positives_removed"] == 14
    assert read_split(tmp_path / "rare", "train") == read_split(tmp_path / "again", "train")
    assert read_split(tmp_path / "rare", "test") == read_split(tmp_path / "base", "test")
    assert base["splits"]["train"]["examples"] == rare["splits"]["train"]["examples"] == 200


def test_multiprocessing_and_single_process_write_the_same_bytes_and_statistics(tmp_path: Path):
    """Each split is written in the order of its ids, whatever order the runner hands the records over in."""
    rng = np.random.default_rng(1)
    lines = []
    for _ in range(3000):
        labels = sorted(set(rng.zipf(1.6, size=rng.integers(0, 4)).clip(max=300) - 1))
        lines.append(",".join(map(str, labels)) + " " + f"{rng.integers(50)}:1")
    train = write_xmc(tmp_path / "train.txt", "3000 50 300", lines)
    test = write_xmc(tmp_path / "test.txt", "1 50 300", ["0 0:1"])
    single = run_build("xmc", [train, test], tmp_path / "single")
    multi = run_build(
        "xmc",
        [train, test],
        tmp_path / "multi",
        args=["--direct_running_mode=multi_processing", "--direct_num_workers=2"],
    )
    assert single["splits"] == multi["splits"]
    assert read_json(tmp_path / "single" / "label_stats.json") == read_json(
        tmp_path / "multi" / "label_stats.json"
    )
    assert single["data_sha256"] == multi["data_sha256"], "two runners wrote the same data in different bytes"
    lines = [int(row["id"].removeprefix("train.txt:")) for row in read_split(tmp_path / "single", "train")]
    assert lines == sorted(lines) and len(lines) > 2000  # ids `train.txt:LINE`, numbers by value: the file's order
