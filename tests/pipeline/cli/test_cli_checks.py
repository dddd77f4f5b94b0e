"""Issue 16 item 10: `--config` naming a folder and `--output` / `--out` under a regular file are one-line errors
before a command starts (no traceback, nothing written)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdgt.pipeline.cli import main


def _error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]
    return err[0]


def test_config_naming_a_directory_is_one_line(tmp_path: Path, capsys):
    assert main(["train", "--config", str(tmp_path), "--output", str(tmp_path / "run")]) == 1
    assert _error(capsys) == (f"cdgt train: error: --config {tmp_path} is a directory; give a YAML or JSON file of "
                              "config fields")
    assert main(["train", "--config", str(tmp_path / "nope.yaml"), "--output", str(tmp_path / "run")]) == 1
    assert _error(capsys).endswith("nope.yaml: no such file") and not (tmp_path / "run").exists()


@pytest.mark.parametrize("command", [["train"], ["run"], ["export", "."], ["data", "build", "x", "--format", "xmc"]])
def test_output_under_a_regular_file_is_one_line(tmp_path: Path, capsys, command: list[str]):
    (tmp_path / "file").write_text("x")
    option = "--out" if command[0] == "data" else "--output"
    assert main([*command, option, str(tmp_path / "file" / "run")]) == 1
    assert _error(capsys).endswith(f"{option} {tmp_path}/file/run: {tmp_path}/file is a regular file, not a folder")
    assert main([*command, option, str(tmp_path / "file")]) == 1
    assert _error(capsys).endswith(f"{option} {tmp_path}/file is a regular file; give a folder to write into")


def test_kubeflow_output_is_a_file(tmp_path: Path, capsys):
    (tmp_path / "file").write_text("x")
    target = str(tmp_path / "file" / "p.yaml")
    assert main(["kubeflow", "compile", "--image", "i", "--pipeline-root", str(tmp_path), "--output", target]) == 1
    assert "is a regular file, not a folder" in _error(capsys)
