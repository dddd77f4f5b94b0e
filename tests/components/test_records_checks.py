"""Issue 16 items 4 and 10: reading a built data directory checks its shards against manifest.json (counts, the
shard list) and names a truncated shard, instead of training on whatever the files hold."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from cdgt.components.synthetic_source import write_synthetic
from cdgt_keras.records import read_splits

SHARD = "data-00000-of-00001.tfrecord.gz"


@pytest.fixture()
def built(tmp_path: Path) -> Path:
    out = tmp_path / "data"
    write_synthetic(str(out), num_examples=200, num_labels=6)
    return out


def test_a_train_shard_replaced_by_another_split_names_the_file_and_counts(built: Path):
    assert read_splits(built)["train"].num_examples == 140
    shutil.copy(built / "test" / SHARD, built / "train" / SHARD)
    with pytest.raises(ValueError, match=rf"data/train: 40 examples in train/{SHARD} but manifest.json says 140"):
        read_splits(built)


def test_a_shard_the_manifest_does_not_list_is_named(built: Path):
    shutil.copy(built / "test" / SHARD, built / "test" / "data-extra.tfrecord.gz")
    with pytest.raises(ValueError, match=r"data/test: the shards differ .*not listed: \['test/data-extra"):
        read_splits(built)


def test_a_truncated_shard_is_named(built: Path):
    path = built / "validation" / SHARD
    raw = gzip.decompress(path.read_bytes())
    path.write_bytes(gzip.compress(raw)[: len(gzip.compress(raw)) // 2])
    with pytest.raises(ValueError, match=rf"validation/{SHARD}: truncated or corrupt TFRecord shard"):
        read_splits(built)


def test_a_changed_shard_of_a_build_fails_its_sha256(tmp_path: Path):
    from cdgt.components.example_gen import BuildOptions, build
    from cdgt.components.formats.sources import make_source

    (tmp_path / "train.txt").write_text("30 3 4\n" + "".join(f"{i % 4} {i % 3}:1\n" for i in range(30)))
    (tmp_path / "test.txt").write_text("2 3 4\n0 0:1\n1 1:1\n")
    source = make_source("xmc", [str(tmp_path / "train.txt"), str(tmp_path / "test.txt")])
    manifest = build(source, BuildOptions(out=str(tmp_path / "out")), ["--direct_running_mode=in_memory"])
    assert set(manifest["data_sha256"]) == set(manifest["data_files"])
    assert read_splits(tmp_path / "out")["test"].num_examples == 2
    shard = tmp_path / "out" / manifest["data_files"][0]
    shard.write_bytes(gzip.compress(gzip.decompress(shard.read_bytes()), compresslevel=1, mtime=1))
    with pytest.raises(ValueError, match=rf"{shard.name}: its sha256 differs from the one manifest.json records"):
        read_splits(tmp_path / "out")


def test_cdgt_train_on_a_truncated_shard_is_one_line_naming_it(built: Path, tmp_path: Path, capsys):
    from cdgt.pipeline.cli import main

    path = built / "train" / SHARD
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    assert main(["train", "--data", str(built), "--output", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err) and err[-1].startswith("cdgt train: error: ")
    assert f"train/{SHARD}: truncated or corrupt TFRecord shard" in err[-1]
    assert not (tmp_path / "run" / "model.keras").exists()
