"""Issue 16 item 4, the TFX half: `cdgt run` checks the shards ImportExampleGen reads against manifest.json.

A train shard replaced by another split's file stops the run at ShardCheck, before Transform, with one line naming
the file and the count the manifest records; a shard whose bytes changed fails its sha256; untouched data passes.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from cdgt.components.shard_check import ShardMismatch, check_shards
from cdgt.pipeline.cli import main
from cdgt.pipeline.local_runner import run_summary

CONFIG = ["--set", "epochs=1", "--set", "encoder_hidden=16", "--set", "head_hidden=8"]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A tiny `cdgt data build` output (XMC, 60 + 10 examples), whose manifest records every shard's sha256."""
    from cdgt.components.example_gen import BuildOptions, build
    from cdgt.components.formats.sources import make_source

    tmp = tmp_path_factory.mktemp("source")
    (tmp / "train.txt").write_text("60 3 4\n" + "".join(f"{i % 4} {i % 3}:1\n" for i in range(60)))
    (tmp / "test.txt").write_text("10 3 4\n" + "".join(f"{i % 4} {i % 3}:1\n" for i in range(10)))
    source = make_source("xmc", [str(tmp / "train.txt"), str(tmp / "test.txt")])
    manifest = build(source, BuildOptions(out=str(tmp / "tiny")), ["--direct_running_mode=in_memory"])
    assert set(manifest["data_sha256"]) == set(manifest["data_files"])
    return tmp / "tiny"


def _copy(built: Path, tmp_path: Path) -> tuple[Path, dict]:
    data = tmp_path / "tiny"
    shutil.copytree(built, data)
    return data, json.loads((data / "manifest.json").read_text())


def _shard(data: Path, manifest: dict, split: str) -> Path:
    return data / next(f for f in manifest["data_files"] if f.startswith(f"{split}/"))


def test_untouched_data_passes_with_the_manifest_counts(built):
    manifest = json.loads((built / "manifest.json").read_text())
    assert check_shards(str(built)) == {s: v["examples"] for s, v in manifest["splits"].items()}


def test_a_changed_shard_fails_its_sha256(built, tmp_path):
    data, manifest = _copy(built, tmp_path)
    shard = _shard(data, manifest, "test")
    shard.write_bytes(gzip.compress(gzip.decompress(shard.read_bytes()), compresslevel=1, mtime=1))  # same records
    with pytest.raises(ShardMismatch, match=rf"{shard}: its sha256 differs from the one manifest.json records"):
        check_shards(str(data))


def test_a_train_shard_replaced_by_another_split_stops_the_run_naming_the_file(built, tmp_path, capsys):
    data, manifest = _copy(built, tmp_path)
    train, validation = _shard(data, manifest, "train"), _shard(data, manifest, "validation")
    shutil.copyfile(validation, train)
    out = tmp_path / "run"
    assert main(["run", "--data", str(data), "--output", str(out), *CONFIG]) == 1
    err = capsys.readouterr().err
    expected = (f"{data}/train: {manifest['splits']['validation']['examples']} examples in "
                f"{train.relative_to(data)} but manifest.json says {manifest['splits']['train']['examples']}")
    line = next(line for line in err.splitlines() if "stopped by ShardCheck" in line)
    assert expected in line, err
    states = run_summary(str(out / "metadata.sqlite"), "cdgt-tiny").states
    assert states["ImportExampleGen"] == "COMPLETE" and states["ShardCheck"] == "FAILED", states
    assert "Transform" not in states and "CdgtTrainer" not in states
    assert not (out / "serving").exists()
