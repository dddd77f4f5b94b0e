"""The `cdgt` command. Sub-commands register themselves; none imports TensorFlow until it runs.

One module a verb (train, data, run, bench, kubeflow, serve: `register(subparsers)` and the command); options.py
holds what several verbs share (the config options, the named data sets' build), checks.py the path checks every
command runs first, console.py what the command shows. `python -m cdgt.pipeline.cli` is `cdgt`.

Example:
    cdgt --version
    cdgt -q train --dataset synthetic --output runs/demo
    cdgt data build ../shared/data/yeast --format arff --out data/yeast
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

# Each module here exposes `register(subparsers)` and must import nothing heavy at module level.
_COMMAND_MODULES = ("cdgt.pipeline.cli.train", "cdgt.pipeline.cli.data", "cdgt.pipeline.cli.run",
                    "cdgt.pipeline.cli.bench", "cdgt.pipeline.cli.kubeflow", "cdgt.pipeline.cli.serve")


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with every registered sub-command."""
    import importlib

    parser = argparse.ArgumentParser(
        prog="cdgt",
        description=(
            "CD-GTMLL long-tail multi-label learning: train, evaluate and export models whose players "
            "split the label space by frequency and cooperate on rare labels."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run `cdgt COMMAND --help` for the options of one command.",
    )
    add_global_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def add_global_options(parser: argparse.ArgumentParser) -> None:
    """--version, -v/--verbose and -q/--quiet (before the command: `cdgt -q run`)."""
    from cdgt_keras import __version__

    parser.add_argument("--version", action="version", version=f"cdgt {__version__}")
    loudness = parser.add_mutually_exclusive_group()
    loudness.add_argument("-v", "--verbose", action="count", default=0, dest="verbosity",
                          help="show library logs and warnings too (TFX, Beam, TensorFlow's C++ log); -vv: debug")
    loudness.add_argument("-q", "--quiet", action="store_true", dest="global_quiet",
                          help="no progress lines or library warnings: results, warnings of cdgt's own and errors")


def apply_global_options(args: argparse.Namespace) -> None:
    """Set up the console (console.py) and numpy's page size (cdgt_keras.pages), and pass -v / -q to the commands
    that have their own."""
    from cdgt.pipeline.cli.console import configure
    from cdgt_keras.pages import small_pages

    small_pages()  # numpy's huge-page advice off (cdgt_keras.pages), here and in the processes started from here
    configure(args.verbosity, args.global_quiet)
    if args.verbosity and hasattr(args, "verbose"):
        args.verbose = True
    if args.global_quiet and hasattr(args, "quiet"):
        args.quiet = True


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `cdgt` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    apply_global_options(args)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        from cdgt.pipeline.cli.checks import check_path_options

        check_path_options(args)
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (ValueError, OSError) as err:  # bad input, a path that is not there, a full disk: one line
        print(f"cdgt {args.command}: error: {err}", file=sys.stderr)
        return 1

