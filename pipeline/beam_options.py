"""Beam pipeline options shared by every command that runs a data step (`cdgt data build`, `cdgt run`).

Any Beam runner is reached with `--beam-arg` (repeatable, e.g. `--beam-arg=--runner=DataflowRunner`). Without a
runner, the local DirectRunner runs in multi-processing mode on all cores when the machine has at least
`MIN_CORES_FOR_PROCESSES` cores, and in memory otherwise: on 2 cores the worker processes cost more than they give
(measured: the deps build took 26 s in memory and 41 s with 2 worker processes).

Example:
    >>> beam_pipeline_args([], workers=0, cores=2)
    ['--direct_running_mode=in_memory']
    >>> beam_pipeline_args([], workers=0, cores=8)
    ['--direct_running_mode=multi_processing', '--direct_num_workers=8']
"""

from __future__ import annotations

import argparse
import os

MIN_CORES_FOR_PROCESSES = 4


def add_beam_arguments(parser: argparse.ArgumentParser) -> None:
    """--beam-arg (repeatable) and --direct-num-workers."""
    parser.add_argument("--beam-arg", action="append", default=[], metavar="ARG", dest="beam_arg",
                        help="a Beam pipeline option, repeatable, e.g. --beam-arg=--runner=DataflowRunner "
                             "--beam-arg=--project=P (default: the local DirectRunner)")
    parser.add_argument("--direct-num-workers", type=int, default=0, metavar="N",
                        help="DirectRunner worker processes; 1 = single process in memory; default (0): all cores "
                             f"in multi-processing mode on machines with >= {MIN_CORES_FOR_PROCESSES} cores, "
                             "else in memory")


def beam_pipeline_args(extra: list[str], workers: int = 0, cores: int | None = None) -> list[str]:
    """Pipeline options: `extra` as given, plus the DirectRunner's mode unless `extra` chooses a runner or mode."""
    if workers < 0:
        raise ValueError(f"--direct-num-workers must be >= 0, got {workers}")
    args = list(extra)
    if any(a.startswith(("--runner", "--direct_running_mode")) for a in args):
        return args
    cores = cores or os.cpu_count() or 1
    workers = workers or (cores if cores >= MIN_CORES_FOR_PROCESSES else 1)
    if workers == 1:
        return [*args, "--direct_running_mode=in_memory"]
    return [*args, "--direct_running_mode=multi_processing", f"--direct_num_workers={workers}"]


def beam_args(args: argparse.Namespace) -> list[str]:
    """The pipeline options of parsed `add_beam_arguments` flags."""
    return beam_pipeline_args(args.beam_arg, args.direct_num_workers)
