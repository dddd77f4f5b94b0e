"""pipeline/cli/options.py: the config options several verbs share (moved from tests/cdgt_keras/test_config.py)."""

from __future__ import annotations

import pytest

from cdgt_keras.config import CDGTConfig


def test_command_line_preset_precedence(tmp_path):
    import argparse

    from cdgt.pipeline.cli.options import add_config_arguments, config_from_args
    from cdgt_keras.config import DEFAULT_PRESET

    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    assert config_from_args(parser.parse_args([])) == CDGTConfig.preset(DEFAULT_PRESET)
    assert config_from_args(parser.parse_args(["--preset", "paper"])) == CDGTConfig.preset("paper")
    path = tmp_path / "c.yaml"
    path.write_text("preset: paper\nalpha: 0.5\nepochs: 3\n")  # the file's preset wins over the default one
    assert config_from_args(parser.parse_args(["--config", str(path)])) == CDGTConfig.preset("paper", epochs=3)
    path.write_text("alpha: 0.3\n")  # no preset in the file: the default preset, every named field over it
    got = config_from_args(parser.parse_args(["--config", str(path), "--preset", "rarity_bce", "--set", "seed=4"]))
    assert got == CDGTConfig.preset("rarity_bce", alpha=0.3, seed=4)
    saved = tmp_path / "run.json"  # a run's saved config.json comes back exactly
    CDGTConfig.preset("paper", alpha=0.1).save(saved)
    assert config_from_args(parser.parse_args(["--config", str(saved)])) == CDGTConfig.preset("paper", alpha=0.1)


def test_raw_text_data_starts_from_the_text_preset(tmp_path):
    """With no preset named, the data's manifest picks the default: `recommended_text` on raw text of up to 4,096
    labels (what it was measured on), `recommended` on larger text label spaces and on sparse or dense features; a
    named preset, or one the config file names, wins over both."""
    import argparse
    import json

    from cdgt.pipeline.cli.options import add_config_arguments, config_from_args, manifest_facts

    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    data = {}
    for name, kind, labels in (("text", "text", 598), ("wide", "text", 18_632), ("sparse", "sparse", 159)):
        data[name] = tmp_path / name
        data[name].mkdir()
        (data[name] / "manifest.json").write_text(json.dumps({"feature_kind": kind, "num_labels": labels}))
    assert manifest_facts(data["text"]) == ("text", 598) and manifest_facts(None) == (None, 0)
    assert manifest_facts(tmp_path) == (None, 0)  # no manifest: the embedded sets
    default = parser.parse_args([])
    got = config_from_args(default, data["text"])
    assert got == CDGTConfig.preset("recommended_text") and got.preset_name == "recommended_text"
    assert (got.text_embedding, got.wide_input, got.alpha, got.rerank_slack) == ("all-MiniLM-L6-v2", "embedding",
                                                                                 1.0, 0.003)
    for other in ("wide", "sparse"):
        assert config_from_args(default, data[other]).preset_name == "recommended"
    assert config_from_args(default) == CDGTConfig.preset("recommended")
    named = config_from_args(parser.parse_args(["--preset", "recommended"]), data["text"])
    assert named.preset_name == "recommended"
    path = tmp_path / "c.yaml"
    path.write_text("preset: paper\n")
    assert config_from_args(parser.parse_args(["--config", str(path)]), data["text"]) == CDGTConfig.preset("paper")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "manifest.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"manifest\.json: not a readable data manifest"):
        config_from_args(default, tmp_path / "bad")


def test_the_named_text_sets_are_known_as_text_before_they_are_built():
    from cdgt.pipeline.datasets import text_features

    assert [text_features(n) for n in ("debtags", "deps", "deps-all", "debtags-R30", "bibtex", "synthetic",
                                       "nonexistent")] == [True, True, True, True, False, False, False]
