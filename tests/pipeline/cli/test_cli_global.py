"""The top-level `cdgt` options (--version, -v/--verbose, -q/--quiet), what the console drops and keeps, and help
texts that say things themselves instead of citing documents a user does not have."""

from __future__ import annotations

import argparse
import logging
import os
import re
import warnings

import pytest

from cdgt.pipeline.cli import apply_global_options, build_parser, console, main

# pipeline/cli/bench.py and bench/ are left out here: their help texts are being rewritten elsewhere
CHECKED_COMMANDS = (["train"], ["data", "build"], ["data", "stats"], ["run"], ["kubeflow", "compile"], ["export"],
                    ["predict"], ["query"], ["bench", "quality"], ["bench", "thresholds"], ["bench", "serving"],
                    ["bench", "profile"], ["bench", "features"])


@pytest.fixture(autouse=True)
def _default_console():
    yield
    console.configure(0, False)


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    from cdgt_keras import __version__
    assert capsys.readouterr().out.strip() == f"cdgt {__version__}"


def test_verbose_and_quiet_reach_the_commands_that_have_their_own():
    parser = build_parser()
    args = parser.parse_args(["-q", "train", "--dataset", "synthetic", "--output", "o"])
    apply_global_options(args)
    assert args.quiet and console.is_quiet()
    args = parser.parse_args(["-vv", "data", "build", "src", "--format", "arff", "--out", "o"])
    apply_global_options(args)
    assert args.verbosity == 2 and args.verbose and not console.is_quiet()
    with pytest.raises(SystemExit):
        parser.parse_args(["-q", "-v", "run"])


@pytest.mark.parametrize(("given", "on"), [(None, False), ("1", True), ("0", False)])
def test_a_command_turns_numpys_huge_page_advice_off_unless_the_user_set_it(monkeypatch, given, on):
    import numpy as np

    from cdgt_keras.pages import VARIABLE

    if given is None:
        monkeypatch.delenv(VARIABLE, raising=False)
    else:
        monkeypatch.setenv(VARIABLE, given)
    before = np.core.multiarray._get_madvise_hugepage()
    try:
        apply_global_options(build_parser().parse_args(["train", "--dataset", "synthetic", "--output", "o"]))
        assert np.core.multiarray._get_madvise_hugepage() is on
        assert os.environ[VARIABLE] == (given or "0")  # what a process started from this one reads
    finally:
        np.core.multiarray._set_madvise_hugepage(before)


def test_quiet_drops_progress_lines_only(capsys):
    console.configure(0, quiet=True)
    console.progress("run", "step 1")
    assert capsys.readouterr().err == ""
    console.configure(0, quiet=False)
    console.progress("run", "step 1")
    assert capsys.readouterr().err == "[cdgt run] step 1\n"


def _shown(message: str, category: type[Warning], module: str) -> bool:
    with warnings.catch_warnings(record=True) as caught:
        warnings.warn_explicit(message, category, f"{module.replace('.', '/')}.py", 1, module=module, registry={})
    return bool(caught)


def test_library_noise_is_dropped_and_the_users_own_warnings_kept(caplog):
    console.configure(0, quiet=False)
    assert not _shown("divide by zero encountered in divide", RuntimeWarning, "tensorflow_model_analysis.metrics.x")
    assert not _shown("invalid value encountered in scalar divide", RuntimeWarning, "numpy.core._methods")
    assert _shown("config field alpha is unusual", UserWarning, "pipeline.train")
    assert _shown("divide by zero encountered in log", RuntimeWarning, "cdgt_keras.metrics")
    with caplog.at_level(logging.WARNING):
        logging.getLogger("tensorflow").warning("From x.py:1: tf_record_iterator (from tensorflow.python.lib.io."
                                                "tf_record) is deprecated and will be removed in a future version.")
        logging.getLogger("apache_beam.io.tfrecordio").warning("Couldn't find python-snappy so the implementation "
                                                               "of _TFRecordUtil._masked_crc32c is not as fast")
        logging.getLogger("pipeline.run").warning("the user's own warning")
    assert [r.getMessage() for r in caplog.records] == ["the user's own warning"]


def test_the_storage_notice_and_tfx_execution_failed_line_are_dropped(caplog):
    warnings.resetwarnings()  # pytest's own config ignores every FutureWarning
    console.configure(0, quiet=False)
    assert not _shown("Support for google-cloud-storage < 3.0.0 will be removed in a future version of "
                      "google-cloud-aiplatform. Please upgrade to google-cloud-storage >= 3.0.0.", FutureWarning,
                      "google.cloud.aiplatform.models")
    assert _shown("the user's own FutureWarning", FutureWarning, "pipeline.train")
    with caplog.at_level(logging.INFO, logger="absl"):  # whatever level an earlier test left absl at
        logging.getLogger("absl").error("Execution %d failed.", 3)
        logging.getLogger("absl").error("Execution 3 failed: the user's business")
        logging.getLogger("absl").info("Execution %d succeeded.", 4)
    assert [r.getMessage() for r in caplog.records] == ["Execution 3 failed: the user's business",
                                                        "Execution 4 succeeded."]


def test_verbose_keeps_library_warnings():
    console.configure(1, quiet=False)
    warnings.resetwarnings()
    assert _shown("divide by zero encountered in divide", RuntimeWarning, "tensorflow_model_analysis.metrics.x")


def _help(parser: argparse.ArgumentParser, path: list[str]) -> str:
    for name in path:
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
    return parser.format_help()


@pytest.mark.parametrize("command", CHECKED_COMMANDS, ids=" ".join)
def test_help_cites_no_document_the_user_does_not_have(command):
    text = _help(build_parser(), command)
    assert not re.search(r"SPEC §|STACK\.md|\bissue \d+", text), text
