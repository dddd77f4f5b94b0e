"""`cdgt predict` on many inputs per call (start-up paid once): a file or stdin, one text per line, JSON lines out."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cdgt.pipeline.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_predict_reads_stdin_and_writes_json_lines(text_export, monkeypatch, capsys):
    texts = [f"text editor number {i}" for i in range(300)]  # more than one batch of the predict signature
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("\n".join(texts).encode())))
    assert main(["predict", text_export.path, "--input", "-", "--jsonl"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["input"] for row in rows] == texts
    assert all(set(row) == {"input", "labels", "top_k"} for row in rows)
    assert main(["predict", text_export.path, texts[0], texts[299], "--jsonl"]) == 0
    again = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert again == [rows[0], rows[299]]


def test_json_and_jsonl_are_exclusive(text_export, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["predict", text_export.path, "x", "--json", "--jsonl"])
    assert exit_.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_predict_prints_no_tensorflow_start_up_noise(text_export):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run([sys.executable, "-m", "cdgt.pipeline.cli", "predict", text_export.path, "a text editor"],
                            capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stderr == ""  # no CUDA plugin registration errors, oneDNN or Python-version notices
    assert "a text editor" in result.stdout
