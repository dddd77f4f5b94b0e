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


def test_profile_reads_the_features_its_config_makes(monkeypatch):
    """One road: a text set is profiled on the features the config's text options make (the embedding's columns
    with `recommended_text`), as the bench's runs and `cdgt train` train on, not on the default options'."""
    import cdgt.bench.datasets as datasets
    from cdgt.bench.profile import profile_steps
    from cdgt_keras.config import CDGTConfig

    seen, real = [], datasets.load_dataset

    def spy(name, *args, features=None, **kwargs):
        seen.append(features)
        return real(name, *args, features=features, **kwargs)

    monkeypatch.setattr(datasets, "load_dataset", spy)
    config = CDGTConfig.preset("recommended").replace(encoder_hidden=(16,), head_hidden=(8,), text_ngrams=1)
    rows = profile_steps("synthetic", config, batches=1)
    assert seen == [config] and len(rows) == 2
