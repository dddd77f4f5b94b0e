"""`cdgt bench profile` times both roads on real features and prints per-batch and per-epoch figures."""

from __future__ import annotations

import json

from cdgt.pipeline.cli import main


def test_profile_prints_both_roads_and_writes_json(tmp_path, capsys):
    out = tmp_path / "profile.json"
    assert main(["bench", "profile", "--dataset", "synthetic", "--batches", "2", "--set", "encoder_hidden=16",
                 "--set", "head_hidden=8", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "sparse road" in text and "dense road" in text and "per epoch" in text
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 2 and all(r["train_step"] > 0 and r["forward"] > 0 for r in rows)
