"""`cdgt train --resume` (issue 16 item 7): a run killed after epoch k and resumed ends exactly where an
uninterrupted run ends; --resume refuses a folder it cannot continue, in one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import keras
import numpy as np
import pytest

import cdgt.pipeline.train as train
from cdgt.pipeline.cli import main

ROOT = Path(__file__).resolve().parents[2]
# Two shuffled passes an epoch (min_steps_per_epoch), dropout, early stopping and a weight averaging whose mean
# has begun before the kill (snapshots every 3rd step of the last 48 of 80, from step 35): every piece of state
# resumes.
ARGS = ["--quiet", "--set", "epochs=4", "--set", "encoder_hidden=32", "--set", "head_hidden=16",
        "--set", "min_steps_per_epoch=20", "--set", "early_stopping_patience=2",
        "--set", "averaging_fraction=0.6", "--set", "averaging_every=3", "--checkpoint-every", "0"]
KILLED_AFTER = 2


class _KillAtEpoch(keras.callbacks.Callback):
    """Ctrl-C at the start of epoch `epoch` (0-based): epochs before it are complete and checkpointed."""

    def __init__(self, epoch: int):
        super().__init__()
        self.epoch = epoch

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        if epoch == self.epoch:
            raise KeyboardInterrupt


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("resume") / "uninterrupted"
    assert main(["train", "--output", str(out), *ARGS]) == 0
    return out


@pytest.fixture(scope="module")
def killed(tmp_path_factory) -> Path:
    """A run interrupted after epoch KILLED_AFTER, as a kill leaves it: a checkpoint, no model, no metrics."""
    out = tmp_path_factory.mktemp("resume") / "killed"
    real = train.fit_model

    def fit_then_kill(*args, callbacks=None, **kwargs):
        return real(*args, callbacks=[*(callbacks or []), _KillAtEpoch(KILLED_AFTER)], **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(train, "fit_model", fit_then_kill)
        assert main(["train", "--output", str(out), *ARGS]) == 130
    return out


def _cdgt(*args: str) -> subprocess.CompletedProcess:
    """`cdgt ARGS` in a fresh process, as a rerun after a kill is."""
    code = f"import sys\nfrom cdgt.pipeline.cli import main\nsys.exit(main({list(args)!r}))\n"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT)


def test_a_killed_run_leaves_its_last_epoch_checkpoint(killed):
    state = json.loads((killed / "checkpoint" / "state.json").read_text())
    assert state["epoch"] == KILLED_AFTER and state["averaged"] >= 1  # the mean had begun
    assert not (killed / "model.keras").exists() and not (killed / "metrics.json").exists()
    history = json.loads((killed / "checkpoint" / "history.json").read_text())
    assert len(history["loss"]) == KILLED_AFTER


def test_resume_refuses_another_config_or_other_data(killed, capsys):
    assert main(["train", "--output", str(killed), "--resume", *ARGS, "--set", "epochs=5"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--resume" in err and "epochs" in err and "another config" in err
    assert main(["train", "--output", str(killed), "--resume", "--dataset", "synthetic-sparse", *ARGS]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--resume" in err and "other data" in err
    assert json.loads((killed / "checkpoint" / "state.json").read_text())["epoch"] == KILLED_AFTER  # untouched


def test_a_resumed_run_ends_exactly_as_an_uninterrupted_one(uninterrupted, killed):
    rerun = _cdgt("train", "--output", str(killed), "--resume", *ARGS)
    assert rerun.returncode == 0, rerun.stderr
    assert f"resuming {killed} after epoch {KILLED_AFTER} of 4" in rerun.stdout
    full, resumed = (json.loads((d / "metrics.json").read_text()) for d in (uninterrupted, killed))
    assert resumed["epochs_run"] == full["epochs_run"]
    for key, value in full.items():
        if isinstance(value, float) and not key.endswith("_seconds"):
            assert resumed[key] == pytest.approx(value, abs=1e-6, nan_ok=True), key
    for row, values in full["report"].items():
        for key, value in values.items():
            assert resumed["report"][row][key] == pytest.approx(value, abs=1e-6, nan_ok=True), (row, key)
    history = [json.loads((d / "history.json").read_text()) for d in (uninterrupted, killed)]
    assert history[1].keys() == history[0].keys()
    for key, values in history[0].items():
        np.testing.assert_allclose(history[1][key], values, rtol=1e-5, atol=1e-6, err_msg=key)
    weights = [keras.models.load_model(d / "model.keras").get_weights() for d in (uninterrupted, killed)]
    for a, b in zip(*weights, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    assert not (killed / "checkpoint").exists()  # finished: nothing left to resume


def test_a_sigkilled_run_resumes_to_the_same_metrics(uninterrupted, tmp_path):
    """The issue's case: `kill -9` mid-training (possibly mid-checkpoint), then the same command with --resume."""
    out = tmp_path / "sigkilled"
    command = [sys.executable, "-m", "cdgt.pipeline.cli", "train", "--output", str(out), *ARGS]
    proc = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state, deadline = out / "checkpoint" / "state.json", time.monotonic() + 300
    while not state.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    epoch = json.loads(state.read_text())["epoch"] if state.exists() else 0
    assert not (out / "metrics.json").exists(), f"could not interrupt training in time (epoch {epoch})"
    rerun = _cdgt("train", "--output", str(out), "--resume", *ARGS)
    assert rerun.returncode == 0, rerun.stderr
    full, resumed = (json.loads((d / "metrics.json").read_text()) for d in (uninterrupted, out))
    for key in ("epochs_run", "micro_f1", "macro_f1", "rare_f1", "p_at_1", "psp_at_5"):
        assert resumed[key] == pytest.approx(full[key], abs=1e-6), key


def test_resume_of_a_finished_run_says_it_is_complete(uninterrupted, capsys):
    assert main(["train", "--output", str(uninterrupted), "--resume", *ARGS]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "complete" in err and "--overwrite" in err


@pytest.mark.parametrize("make", [False, True])
def test_resume_of_an_empty_folder_is_a_clear_error(tmp_path, capsys, make):
    out = tmp_path / "empty"
    if make:
        out.mkdir()
    assert main(["train", "--output", str(out), "--resume", *ARGS]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--resume" in err and "nothing to resume" in err


def test_resume_and_overwrite_exclude_each_other_and_help_explains_resume(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--output", "x", "--resume", "--overwrite"])
    assert "not allowed with" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--resume" in out and "last checkpoint" in out and "--checkpoint-every" in out
