"""`cdgt train`: train, tune and evaluate CDGTModel without TFX (the fast path for experiments)."""

from __future__ import annotations

import argparse
from pathlib import Path

from cdgt.pipeline.cli.options import add_checkpoint_argument, add_config_arguments, config_from_args, ensure_data
from cdgt.pipeline.datasets import EMBEDDED, add_source_arguments
from cdgt.pipeline.train import CHECKPOINT_DIR

HELP = """\
Train CDGTModel on the embedded synthetic data (default) or on a directory built by `cdgt data build`,
tune decision thresholds on the validation split, and report every metric on the test split, overall and
for head and tail labels. Writes model.keras, config.json, thresholds.json, metrics.json, history.json and
TensorBoard logs (logs/) to --output.

Killed or interrupted, a run keeps its last checkpoint in --output/checkpoint/ (weights, optimizer states,
early stopping, the learning-rate schedule's step, the dropout RNG), written at the end of an epoch once
--checkpoint-every seconds have passed since the last one; rerun the same command with --resume to continue
from there: the run ends exactly as an uninterrupted one would. A checkpoint writes every weight and optimizer
moment (about 0.8 GB for debtags), so one at every epoch's end can double a short run's time.

examples:
  cdgt train --output runs/demo
  cdgt train --data data/yeast --set n_players=3 --set alpha=0.3 --output runs/yeast
  cdgt train --data data/debtags --config my.yaml --output runs/debtags
  cdgt train --data data/debtags --config my.yaml --output runs/debtags --resume    # after a kill
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("train", help="train and evaluate without TFX (fast path)", description=HELP,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    add_source_arguments(parser, "built into runs/data/NAME on first use (as `cdgt run --dataset`)")
    add_config_arguments(parser)
    parser.add_argument("--output", metavar="DIR", type=Path, required=True, help="run directory to write")
    used = parser.add_mutually_exclusive_group()
    used.add_argument("--overwrite", action="store_true",
                      help="replace what a previous run left in --output (without it or --resume a non-empty folder "
                           "is refused, so that two runs' TensorBoard files never mix)")
    used.add_argument("--resume", action="store_true",
                      help="continue the killed run in --output from its last checkpoint (same data and "
                           "config; the result equals an uninterrupted run's)")
    add_checkpoint_argument(parser)
    parser.add_argument("--quiet", action="store_true", help="no per-epoch progress bars")
    parser.set_defaults(func=run)


def check_output(output: Path, overwrite: bool, resume: bool = False, config=None) -> None:
    """Refuse a non-empty output folder unless `overwrite`, which empties it first, or `resume` (check_resumable)."""
    if resume:
        check_resumable(output, config)
        return
    if not output.is_dir() or not any(output.iterdir()):
        return
    if not overwrite:
        raise ValueError(f"--output {output} is not empty (a previous run?): pass --overwrite to replace it, or "
                         "choose another folder")
    import shutil

    for item in output.iterdir():
        shutil.rmtree(item) if item.is_dir() else item.unlink()


def check_resumable(output: Path, config) -> None:
    """--resume needs an unfinished `cdgt train` run of the same config in `output` (its data is checked once
    loaded, pipeline/train.py); anything else is a one-line error."""
    from cdgt_keras.config import CDGTConfig

    if not output.is_dir() or not any(output.iterdir()):
        raise ValueError(f"--resume: --output {output} is empty or missing, nothing to resume; run without --resume "
                         "to start a new run there")
    if (output / "metrics.json").is_file():
        raise ValueError(f"--resume: the run in {output} is complete (metrics.json), nothing to resume; pass "
                         "--overwrite to train it again")
    if not (output / "config.json").is_file():
        raise ValueError(f"--resume: {output} holds no `cdgt train` run (no config.json), nothing to resume; pass "
                         "--overwrite to replace what is there")
    started = CDGTConfig.load(output / "config.json")
    if started != config:
        old, new = started.to_dict(), config.to_dict()
        fields = ", ".join(f"{k} {old[k]!r} -> {new[k]!r}" for k in sorted(new) if old.get(k) != new[k])
        raise ValueError(f"--resume: the run in {output} was started with another config ({fields}); pass the same "
                         "--preset/--config/--set, or --overwrite to start again")


def run(args: argparse.Namespace) -> int:
    data_dir = args.data
    if data_dir is None and args.dataset not in EMBEDDED:
        data_dir = ensure_data(args.dataset, Path("runs"))
    config = config_from_args(args, data_dir)
    check_output(args.output, args.overwrite, args.resume, config)
    from cdgt.pipeline.train import load_features, run_training

    splits, featurizer = load_features(data_dir, args.dataset, config)
    print(f"training CDGTModel on {data_dir or args.dataset}: " + ", ".join(
        f"{name} {data.num_examples:,}" for name, data in splits.items())
        + f"; {splits['train'].num_labels} labels, {splits['train'].num_features} features; "
        + f"preset {config.preset_name or 'none (the dataclass defaults)'}")
    if args.resume:
        from cdgt_keras.checkpoint import completed_epochs
        from cdgt_keras.learning import training_epochs

        done = completed_epochs(str(args.output / CHECKPOINT_DIR))
        epochs = training_epochs(config, splits["train"].num_labels)
        print(f"resuming {args.output} after epoch {done} of {epochs}" if done else
              f"resuming {args.output}: it wrote no checkpoint, starting from epoch 1")
    metrics = run_training(config, splits, args.output, verbose=0 if args.quiet else 2, featurizer=featurizer,
                           resume=args.resume, checkpoint_every=args.checkpoint_every)
    from cdgt_keras.metrics import HEADLINE_METRICS, format_report

    print(f"\ntest split ({metrics['num_test']:,} examples; head = {metrics['num_head_labels']} labels, "
          f"tail = {metrics['num_tail_labels']} labels; percent):")
    print(format_report(metrics["report"]))
    if metrics["num_labels_without_train_positive"]:
        print(f"note: {metrics['num_labels_without_train_positive']} of {metrics['num_labels']} labels have no "
              "training positive; the model cannot learn them and they count as misses")
    headline = "  ".join(f"{label} {100 * metrics[key]:.2f}" for key, label in HEADLINE_METRICS.items())
    print(f"\n{headline}  ({metrics['epochs_run']} epochs, {metrics['train_seconds']:.1f} s)")
    print(f"wrote {args.output}/: model.keras, metrics.json, thresholds.json, config.json, history.json, data.json"
          + (", featurizer.json" if featurizer is not None else ""))
    print(f"watch it: tensorboard --logdir {args.output}/logs")
    return 0
