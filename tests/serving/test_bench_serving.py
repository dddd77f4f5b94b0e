"""`cdgt bench serving`: figures for every kind of export, printed with the machine and written as JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdgt.bench.serving import bench_model, synthetic_inputs
from cdgt.pipeline.cli import main


@pytest.mark.parametrize("kind", ["dense", "sparse", "text"])
def test_bench_model_times_the_predict_signature(kind, request):
    export = request.getfixturevalue(f"{kind}_export")
    result = bench_model(Path(export.path).parent, requests=5, batch=8, batches=2, warmup=1)
    assert result["feature_kind"] == kind and result["num_labels"] == 7
    assert 0 < result["batch_1"]["p50_ms"] <= result["batch_1"]["p99_ms"]
    assert result["batch_8"]["examples_per_second"] > 0


def test_synthetic_inputs_fit_the_model():
    rows = synthetic_inputs("sparse", 3, width=12)
    assert all(max(r["feature_ids"]) < 12 and len(r["feature_ids"]) == len(r["feature_values"]) for r in rows)
    with pytest.raises(ValueError, match="input width"):
        synthetic_inputs("dense", 3, width=None)


def test_bench_serving_command_prints_figures_and_machine(text_export, tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert main(["bench", "serving", text_export.path, "--requests", "4", "--batches", "2", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("machine: ") and "cores" in printed and "batch 1: p50" in printed
    saved = json.loads(out.read_text())
    assert saved["machine"]["cores"] >= 1 and saved["results"][0]["batch_64"]["calls"] == 2
