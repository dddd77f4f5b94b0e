"""pipeline/cli/options.py: the config options several verbs share (moved from tests/cdgt_keras/test_config.py)."""

from __future__ import annotations

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
