"""`cdgt data build` shows progress per Beam stage while it runs (records read, rejected, written per split) and
each stage's counts over the whole job when it ends; `cdgt -q` drops those lines."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ingest_helpers import write_xmc

from cdgt.components import build_progress
from cdgt.pipeline.cli import main


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_tally_shows_its_counts_at_most_once_per_interval():
    clock, shown = _Clock(), []
    tally = build_progress.Tally(every_seconds=10.0, clock=clock, show=shown.append)
    tally.add("Read", "records", 5)
    tally.add("Read", "rejected")
    assert shown == []  # nothing before the interval has passed
    clock.now = 112.0
    tally.add("Write", "train", 4)
    assert shown == ["[cdgt data] 12 s: Read 5 records, 1 rejected; Write train 4"]
    clock.now = 115.0
    tally.add("Write", "test")
    assert len(shown) == 1
    clock.now = 122.5
    tally.add("Write", "test")
    assert shown[-1] == "[cdgt data] 22 s: Read 5 records, 1 rejected; Write train 4, test 2"


def test_the_job_line_orders_stages_and_splits():
    counts = {("Write", "test"): 2, ("Read Packages", "records"): 7, ("Write", "train"): 9,
              ("Vocab", "records"): 7, ("Read Packages", "rejected"): 1, ("Write", "validation"): 3}
    assert build_progress.job_line(counts) == (
        "stages: Vocab 7 records; Read Packages 7 records, 1 rejected; Write train 9, validation 3, test 2")
    assert build_progress.job_line({}) is None


def _source(folder: Path) -> Path:
    """20 training lines, one with a label id beyond L; 2 validation and 3 test lines."""
    folder.mkdir()
    train = [f"{i % 3} {i % 4}:1" for i in range(19)]
    write_xmc(folder / "train.txt", "20 4 3", [*train[:7], "9 0:1", *train[7:]])
    write_xmc(folder / "valid.txt", "2 4 3", ["0 1:1", "1 2:1"])
    write_xmc(folder / "test.txt", "3 4 3", ["0 1:1", "1 2:1", "2 3:1"])
    return folder


def _build(tmp_path: Path, *extra: str) -> list[str]:
    return ["data", "build", str(tmp_path / "src"), "--format", "xmc", "--out", str(tmp_path / "out"),
            "--on-error", "skip", *extra]


EXPECTED = "stages: Read 24 records, 1 rejected; Write train 19, validation 2, test 3"


def test_a_build_shows_records_read_rejected_and_written_while_it_runs_and_per_stage_at_the_end(
        tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setenv(build_progress.QUIET_ENV, "0")
    monkeypatch.setattr(build_progress, "EVERY_SECONDS", 0.0)  # a line for every count
    _source(tmp_path / "src")
    assert main(_build(tmp_path, "--direct-num-workers", "1")) == 0
    err = capsys.readouterr().err
    live = re.findall(r"\[cdgt data\] \d+ s: (.*)", err)
    assert live[0] == "Read 1 records" and any(", 1 rejected;" in line for line in live)  # as it happens
    assert live[-1] == "Read 24 records, 1 rejected; Write test 3, train 19, validation 2"
    assert f"[cdgt data] {EXPECTED}" in err.splitlines()


def test_the_stage_counts_are_summed_over_worker_processes(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setenv(build_progress.QUIET_ENV, "0")
    _source(tmp_path / "src")
    assert main(_build(tmp_path, "--direct-num-workers", "2")) == 0
    assert f"[cdgt data] {EXPECTED}" in capsys.readouterr().err.splitlines()


def test_quiet_drops_the_progress_lines_here_and_in_worker_processes(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setenv(build_progress.QUIET_ENV, "0")
    monkeypatch.setattr(build_progress, "EVERY_SECONDS", 0.0)
    _source(tmp_path / "src")
    assert main(["-q", *_build(tmp_path, "--direct-num-workers", "1")]) == 0
    captured = capsys.readouterr()
    assert "[cdgt data]" not in captured.err and "rejected 1" in captured.out
    assert os.environ[build_progress.QUIET_ENV] == "1"  # what the worker processes of a runner inherit
