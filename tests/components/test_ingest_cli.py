"""`cdgt data build` / `cdgt data stats`: options, exit codes, messages, and no heavy import at --help."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ingest_helpers import read_json, write_xmc

from cdgt.pipeline.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_registering_the_commands_imports_nothing_heavy():
    code = (
        "import argparse, sys\n"
        "import cdgt.pipeline.cli.data as d\n"
        "p = argparse.ArgumentParser(); d.register(p.add_subparsers())\n"
        "a = p.parse_args(['data', 'build', 'x', '--format', 'arff', '--out', 'o'])\n"
        "assert callable(a.func)\n"
        "heavy = [m for m in ('tensorflow', 'apache_beam', 'matplotlib') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_help_explains_the_options(capsys):
    try:
        main(["data", "build", "--help"])
    except SystemExit as stop:
        assert stop.code == 0
    text = capsys.readouterr().out
    for option in (
        "--on-error",
        "--min-label-count",
        "--rare-variant",
        "--beam-arg",
        "--direct-num-workers",
        "<name>.xml",
        "--task",
    ):
        assert option in text


def test_build_then_stats(tmp_path: Path, capsys):
    lines = [f"{i % 3},{3 + i % 2} {i % 5}:1" for i in range(40)]
    write_xmc(tmp_path / "train.txt", "40 5 6", lines)
    write_xmc(tmp_path / "test.txt", "1 5 6", ["5 0:1"])
    out = tmp_path / "out"
    assert (
        main(
            [
                "data",
                "build",
                str(tmp_path / "train.txt"),
                str(tmp_path / "test.txt"),
                "--format",
                "xmc",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert "rejected 0" in capsys.readouterr().out
    assert read_json(out / "manifest.json")["num_labels"] == 6
    assert main(["data", "stats", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "labels_with_0_positives" in printed and (out / "label_frequency.png").stat().st_size > 1000


def test_bad_input_exits_1_naming_file_and_line(tmp_path: Path, capsys):
    write_xmc(tmp_path / "train.txt", "3 5 6", ["0 0:1", "9 0:1", "0 7:1"])
    write_xmc(tmp_path / "test.txt", "1 5 6", ["0 0:1"])
    code = main(["data", "build", str(tmp_path), "--format", "xmc", "--out", str(tmp_path / "out")])
    assert code == 1
    err = capsys.readouterr().err
    assert "train.txt:3: label id 9 out of range [0, 6)" in err and "the first of 2 bad records" in err
    assert "Traceback" not in err and not (tmp_path / "out" / "manifest.json").exists()
    kept = read_json(tmp_path / "out" / "build_error.json")["error"]  # the README: the reason is kept there
    assert kept.startswith(f"{tmp_path / 'train.txt'}:3: label id 9 out of range [0, 6)")
    assert main(["data", "build", str(tmp_path), "--format", "xmc", "--out", str(tmp_path / "out"), "-v"]) == 1
    err = capsys.readouterr().err  # -v: the traceback too (the unfinished build's files are replaced)
    assert "Traceback" in err and "unfinished build" in err and err.rstrip().endswith("builds the rest)")
    write_xmc(tmp_path / "train.txt", "3 5 6", ["0 0:1", "1 0:1", "0 4:1"])
    assert main(["data", "build", str(tmp_path), "--format", "xmc", "--out", str(tmp_path / "out")]) == 0
    assert not (tmp_path / "out" / "build_error.json").exists()  # a finished build leaves no reason behind


def test_record_errors_print_no_beam_traceback(tmp_path: Path):
    write_xmc(tmp_path / "train.txt", "2 5 6", ["0 0:1", "9 0:1"])
    write_xmc(tmp_path / "test.txt", "1 5 6", ["0 0:1"])
    command = [sys.executable, "-m", "cdgt.pipeline.cli", "data", "build", str(tmp_path), "--format", "xmc",
               "--out", str(tmp_path / "out")]
    out = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 1
    assert "Traceback" not in out.stderr and "apache_beam.runners" not in out.stderr
    assert out.stderr.rstrip().splitlines()[-1].startswith("cdgt data build: error: ")
    assert "train.txt:3: label id 9 out of range [0, 6) [label_id_out_of_range] (the first of 1 bad" in out.stderr
