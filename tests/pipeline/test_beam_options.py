"""Beam options of the data steps: a chosen runner or mode is kept; the DirectRunner default follows the cores."""

from __future__ import annotations

import argparse

import pytest

from cdgt.pipeline.beam_options import MIN_CORES_FOR_PROCESSES, add_beam_arguments, beam_args, beam_pipeline_args


def test_default_is_in_memory_on_small_machines_and_all_cores_on_large_ones():
    assert beam_pipeline_args([], cores=MIN_CORES_FOR_PROCESSES - 1) == ["--direct_running_mode=in_memory"]
    assert beam_pipeline_args([], cores=16) == ["--direct_running_mode=multi_processing", "--direct_num_workers=16"]


def test_explicit_workers_and_runner_win():
    assert beam_pipeline_args([], workers=3, cores=2) == [
        "--direct_running_mode=multi_processing", "--direct_num_workers=3"]
    assert beam_pipeline_args([], workers=1, cores=64) == ["--direct_running_mode=in_memory"]
    flink = ["--runner=FlinkRunner", "--flink_master=host:8081"]
    assert beam_pipeline_args(flink, workers=4) == flink
    with pytest.raises(ValueError, match="direct-num-workers"):
        beam_pipeline_args([], workers=-1)


def test_flags_parse_into_options():
    parser = argparse.ArgumentParser()
    add_beam_arguments(parser)
    args = parser.parse_args(["--beam-arg=--runner=DataflowRunner", "--beam-arg=--project=p"])
    assert beam_args(args) == ["--runner=DataflowRunner", "--project=p"]
    args = parser.parse_args(["--direct-num-workers", "2"])
    assert beam_args(args) == ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
