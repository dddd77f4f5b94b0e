"""What several verbs share: the config options (`cdgt train`, `run`, `kubeflow compile`, `bench`), the
checkpoints' interval (`cdgt train`, `run`, `kubeflow compile`) and the named data sets' build on first use
(`cdgt train`, `run`, `kubeflow compile`).

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_config_arguments(parser)
    >>> config_from_args(parser.parse_args(["--preset", "paper", "--set", "alpha=0.3"])).alpha
    0.3
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cdgt.pipeline.cli.console import progress


def checkpoint_seconds(text: str) -> float:
    """--checkpoint-every's value: a finite number of seconds, 0 or more.

        >>> checkpoint_seconds("0"), checkpoint_seconds("600")
        (0.0, 600.0)
    """
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (0 or more)")
    return value


def add_checkpoint_argument(parser: argparse.ArgumentParser) -> None:
    """--checkpoint-every SECONDS (cdgt_keras.cadence: when the training writes its checkpoint)."""
    from cdgt_keras.cadence import CHECKPOINT_EVERY_SECONDS

    parser.add_argument("--checkpoint-every", metavar="SECONDS", type=checkpoint_seconds,
                        default=CHECKPOINT_EVERY_SECONDS,
                        help="checkpoint the training at the first epoch's end this many seconds after the last "
                             "checkpoint (or the start), so that a killed run resumes from there; 0: at every "
                             "epoch's end. A checkpoint writes every weight and optimizer moment, about 0.8 GB for "
                             "debtags (default: %(default)g)")


def add_config_arguments(parser: argparse.ArgumentParser, by_data: bool = True) -> None:
    """--config FILE and --set key=value (repeatable): the one road into CDGTConfig. `by_data`: the verb picks the
    default preset from its data (config_from_args with a data directory), else it starts from `recommended`."""
    parser.add_argument("--config", metavar="FILE", type=Path,
                        help="YAML or JSON file of config fields (may name its own `preset: paper`)")
    from cdgt_keras.presets import DEFAULT_PRESET, PRESETS, TEXT_PRESET, TEXT_PRESET_MAX_LABELS

    default = (f"what the benchmarks ship, {TEXT_PRESET} when the data's features are raw text of at most "
               f"{TEXT_PRESET_MAX_LABELS:,} labels and {DEFAULT_PRESET} otherwise" if by_data else DEFAULT_PRESET)
    parser.add_argument("--preset", metavar="NAME", default=None, choices=sorted(PRESETS),
                        help=f"start from a named preset: {', '.join(sorted(PRESETS))} (default: {default}; "
                             "`paper` is the paper's literal method)")
    parser.add_argument("--set", metavar="KEY=VALUE", action="append", default=[], dest="overrides",
                        help="override one config field, e.g. --set alpha=0.3 --set head_hidden=256,128")


def config_from_args(args: argparse.Namespace, data_dir: Path | None = None):
    """CDGTConfig from a preset, --config and --set, applied in that order.

    The preset is --preset when given, else the config file's own `preset:`, else the default for the data in
    `data_dir` (cdgt_keras.presets.default_preset: `recommended_text` for raw text of up to 4,096 labels, read from
    its manifest.json; `recommended` otherwise); every field the file names overrides the preset, and --set
    overrides both.
    """
    from cdgt_keras.config import CDGTConfig, read_config_file
    from cdgt_keras.presets import default_preset

    data = read_config_file(args.config) if args.config else {}
    named = data.pop("preset", None) or data.pop("preset_name", None)
    preset = args.preset or named or default_preset(*manifest_facts(data_dir))
    try:
        config = CDGTConfig.from_dict({**data, "preset": preset})
    except (ValueError, TypeError) as err:
        raise ValueError(f"{args.config}: {err}" if args.config else str(err)) from None
    return config.with_overrides(args.overrides)


def manifest_facts(data_dir: str | Path | None) -> tuple[str | None, int]:
    """(feature_kind, num_labels) of a built data directory's manifest.json; (None, 0) without one (the embedded
    synthetic sets, whose features are not text)."""
    if data_dir is None:
        return None, 0
    from cdgt_keras.records import read_manifest

    try:
        facts = read_manifest(data_dir)
        return facts.get("feature_kind"), int(facts.get("num_labels") or 0)
    except FileNotFoundError:
        return None, 0
    except (OSError, ValueError, TypeError, AttributeError) as err:
        raise ValueError(f"{data_dir}/manifest.json: not a readable data manifest ({err})") from None


def _log(message: str) -> None:
    progress("run", message, sys.stdout)


def ensure_data(dataset: str, out: Path, beam: list[str] | None = None) -> Path:
    """The built data directory for `dataset` under `out/data/`, building it on first use (pipeline.datasets)."""
    from cdgt.pipeline.datasets import build_named

    return build_named(dataset, out / "data", beam, log=_log)
