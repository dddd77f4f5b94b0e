"""`cdgt data build` and `cdgt data stats`: ingest ARFF / XMC / CSV / the Debian catalogue into
TFRecords with a manifest and label statistics, and summarise a built set. Nothing heavy is imported until a
command runs.

Example:
    cdgt data build ../shared/data/yeast --format arff --out data/yeast
    cdgt data build ../shared/data/debian-bookworm --format debian --task debtags --out data/debtags
    cdgt data stats data/debtags
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import traceback
from typing import Any

from cdgt.pipeline.beam_options import add_beam_arguments, beam_args
from cdgt.pipeline.cli.console import progress

_SOURCE_HELP = """\
SOURCE is one or more folders or files. A data file's split comes from its name: it must contain
'train', 'test' or 'valid'/'validation'/'val'/'dev' (as a word, e.g. yeast-train.arff.xz, test.txt).
Files may be plain, .xz, .lz4 or .gz.
  arff:   a MULAN folder holding <name>-train.arff[.xz], <name>-test.arff[.xz] and <name>.xml[.xz],
          or those files given explicitly. Labels are the last L attributes, L = labels in the .xml.
  xmc:    Extreme Classification Repository text files (train.txt, test.txt, ...).
  csv:    CSV files with a header row (train.csv, test.csv, ...).
  debian: a folder (or files) with Packages and Translation-en files, e.g. ../shared/data/debian-bookworm
          or /var/lib/apt/lists; split 80/10/10 by md5 of the package name.
Where no validation file exists, a training example goes to validation when md5('validation:' + id) < the
--validation-fraction (id = '<file name>:<line>'): deterministic, no seed needed."""


def register(subparsers: Any) -> None:
    """Add `data build` and `data stats` to the `cdgt` sub-commands."""
    data = subparsers.add_parser(
        "data",
        help="build TFRecord data sets from ARFF / XMC / CSV / Debian sources; show label statistics",
        description="Ingest multi-label data with Apache Beam and inspect its long tail.",
    )
    commands = data.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    data.set_defaults(func=lambda _args: data.print_help() or 2)
    _register_build(commands)
    _register_stats(commands)


def _register_build(commands: Any) -> None:
    build = commands.add_parser(
        "build",
        help="ingest a source into <out>/<split>/data-*.tfrecord.gz + manifest.json + label_stats.json",
        description="Run the Beam ingestion job (DirectRunner by default; any runner via --beam-arg).",
        epilog=_SOURCE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    build.add_argument("source", nargs="+", metavar="SOURCE", help="folders or files (see below)")
    build.add_argument(
        "--format", required=True, choices=("arff", "xmc", "csv", "debian"), help="input format"
    )
    build.add_argument(
        "--task",
        choices=("debtags", "deps"),
        default=None,
        help="Debian only: labels = Tag values (debtags) or Depends+Pre-Depends+Recommends "
        "targets (deps); default debtags",
    )
    build.add_argument("--out", required=True, help="output folder (local path or a Beam filesystem URL)")
    build.add_argument(
        "--on-error",
        choices=("fail", "skip"),
        default="fail",
        help="fail: read everything, then stop with the first malformed record (file and line) and the count "
        "of bad ones, writing no manifest (default); skip: write them to <out>/rejects.jsonl and count them by "
        "reason in the manifest",
    )
    build.add_argument(
        "--min-label-count",
        type=int,
        default=0,
        metavar="K",
        help="drop labels with fewer than K training positives (ids renumbered in order; "
        "examples left without labels are kept and counted)",
    )
    build.add_argument(
        "--validation-fraction",
        type=float,
        default=0.1,
        metavar="F",
        help="share of training examples carved into validation when a source has no "
        "validation file (hash-based, default 0.1)",
    )
    build.add_argument(
        "--rare-variant",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="-R variant, a harder long tail: remove this fraction (e.g. 0.3-0.5) of the training "
        "positives of the --rare-k rarest labels; validation and test untouched",
    )
    build.add_argument("--rare-k", type=int, default=0, metavar="K", help="how many rarest labels to thin")
    build.add_argument("--seed", type=int, default=0, help="seed of the rare-variant choice (default 0)")
    build.add_argument("--label-column", default="labels", help="CSV: the label column (default 'labels')")
    build.add_argument("--id-column", default=None, help="CSV: an optional example-id column")
    build.add_argument("--label-delimiter", default="|", help="CSV: separator inside the label column ('|')")
    build.add_argument(
        "--label-ids", action="store_true", help="CSV: labels are integer ids (default: names)"
    )
    build.add_argument(
        "--num-labels",
        type=int,
        default=None,
        help="CSV with --label-ids: L; an id >= L is an error (default: max id + 1)",
    )
    build.add_argument(
        "--label-vocab",
        default=None,
        metavar="FILE",
        help="CSV: label names, one per line (line i = id i); an unknown name is an error",
    )
    build.add_argument("--overwrite", action="store_true", help="replace an earlier build in --out")
    build.add_argument("-v", "--verbose", action="store_true",
                       help="on an error, print the Beam traceback too (default: the one-line reason)")
    add_beam_arguments(build)
    build.set_defaults(func=run_build)


def _register_stats(commands: Any) -> None:
    stats = commands.add_parser(
        "stats",
        help="print the long-tail summary of a built set and plot its label-frequency curve",
        description="Read DIR/label_stats.json (computing it with Beam from DIR/train if missing) and "
        "write DIR/label_frequency.png (log-log rank vs training count).",
    )
    stats.add_argument("dir", metavar="DIR", help="a folder written by `cdgt data build`")
    stats.add_argument(
        "--png", default=None, help="where to write the plot (default DIR/label_frequency.png)"
    )
    stats.add_argument(
        "--recompute", action="store_true", help="recompute label_stats.json from DIR/train with a Beam job"
    )
    stats.set_defaults(func=run_stats)


def _log(message: str) -> None:
    progress("data", message)


def run_build(args: argparse.Namespace) -> int:
    """`cdgt data build`: returns 0 on success, 1 on bad input (message names file and line)."""
    from cdgt.components.example_gen import BuildOptions, build
    from cdgt.components.formats.sources import make_source

    if args.task and args.format != "debian":
        raise ValueError("--task applies to --format debian only")
    csv_options = dict(
        label_column=args.label_column,
        id_column=args.id_column,
        delimiter=args.label_delimiter,
        label_ids=args.label_ids,
        num_labels=args.num_labels,
        label_vocab=args.label_vocab,
    )
    options = {"debian": {"task": args.task or "debtags"}, "csv": csv_options}.get(args.format, {})
    source = make_source(args.format, args.source, validation_fraction=args.validation_fraction, **options)
    config = BuildOptions(
        out=args.out,
        task=args.task or ("debtags" if args.format == "debian" else None),
        on_error=args.on_error,
        min_label_count=args.min_label_count,
        rare_fraction=args.rare_variant,
        rare_k=args.rare_k,
        seed=args.seed,
        overwrite=args.overwrite,
    )
    start = time.monotonic()
    _log(f"building {args.format} from {', '.join(args.source)} into {args.out} (Beam: {beam_args(args)})")
    if not args.verbose:
        _quiet_runner_tracebacks()
    try:
        manifest = build(source, config, beam_args(args))
    except Exception as err:  # a runner wraps the worker's exception; show the input error's one line
        message = _input_error_message(err)
        if message is None:
            raise
        if args.verbose:
            traceback.print_exc()
        print(f"cdgt data build: error: {message}", file=sys.stderr)
        return 1
    _log(f"done in {time.monotonic() - start:.1f} s")
    print(build_summary(manifest))
    print(f"wrote {args.out}/{{train,validation,test}}/, manifest.json, label_stats.json")
    return 0


_RUNNER_LOGGERS = ("apache_beam.runners.common", "apache_beam.runners.portability.local_job_service",
                   "apache_beam.runners.worker")


def _quiet_runner_tracebacks() -> None:
    """Drop the runners' logs of a worker's error (each with its traceback): the reason is printed in one line
    after the job fails. The portable runner relays job messages to the root logger, hence the filter there."""
    for name in _RUNNER_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    logging.getLogger().addFilter(
        lambda record: not (record.levelno >= logging.ERROR and "Traceback (most recent call last)" in
                            record.getMessage()))


def _input_error_message(err: BaseException) -> str | None:
    """The one line to print for a failed build: the input error or OSError inside `err`, else None."""
    from cdgt.components.formats.errors import find_error_message, root_input_error, without_step

    found = root_input_error(err)
    return without_step(str(found)) if found is not None else find_error_message(str(err))


def build_summary(manifest: dict[str, Any]) -> str:
    """The line printed after a build: examples per split, labels (and how many have no training positive),
    rejected and noted records by reason."""
    counts = ", ".join(f"{s} {v['examples']:,}" for s, v in manifest["splits"].items())
    line = f"{counts}; {manifest['num_labels']:,} labels"
    unseen = manifest.get("labels_without_training_positive", 0)
    if unseen:
        names = manifest.get("labels_without_training_positive_names", [])[:5]
        line += f" ({unseen:,} without a training positive, e.g. {', '.join(map(str, names))})"
    rejected = manifest["rejected"]
    line += f"; rejected {rejected['total']:,}" + (f" {rejected['by_reason']}" if rejected["by_reason"] else "")
    if manifest.get("notes"):
        line += f"; noted {manifest['notes']}"
    return line


def run_stats(args: argparse.Namespace) -> int:
    """`cdgt data stats`: print the long-tail summary and write the log-log frequency plot."""
    from cdgt.components.label_stats import STATS_FILE, compute_label_stats, read_json

    path = os.path.join(args.dir, STATS_FILE)
    if args.recompute or not os.path.exists(path):
        _log(f"computing {path} with Beam")
        stats = compute_label_stats(args.dir, ["--direct_running_mode=in_memory"])
    else:
        stats = read_json(path)
    for key, value in stats["summary"].items():
        print(f"{key:32s} {value}")
    names = stats.get("label_names") or []
    top = [f"{names[i] if names else i} ({stats['counts'][i]})" for i in stats["order"][:5]]
    print(f"{'top labels':32s} {', '.join(top)}")
    png = args.png or os.path.join(args.dir, "label_frequency.png")
    plot_frequency_curve(stats, png)
    print(f"wrote {png}")
    return 0


def plot_frequency_curve(stats: dict, png: str) -> None:
    """The label-frequency curve of label statistics (components/label_stats.py) as a PNG."""
    from cdgt.pipeline.plots import frequency_curve, pyplot

    summary = stats["summary"]
    fig = frequency_curve(stats["counts"], len(stats["head"]), len(stats["tail"]),
                          title=f"M = {summary['M']:,}, L = {summary['L']:,}", figsize=(6, 4))
    fig.savefig(png, dpi=120)
    pyplot().close(fig)
