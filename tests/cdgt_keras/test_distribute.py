"""MirroredStrategy on 2 logical CPUs gives the same update and the same logged loss as one device (SPEC §6).

Logical devices must exist before TensorFlow initialises (STACK.md item 4), so the runs happen in a fresh
subprocess (_mirrored_worker.py): same initial weights, one epoch of 4 steps at a global batch of 16, once under
the default strategy (eagerly, to save a trace) and once, compiled, under MirroredStrategy(["/cpu:0", "/cpu:1"]).
The worker uses SGD with momentum: a missing 1/num_replicas gradient scale doubles every update there (Adam
would hide it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("_mirrored_worker.py")
REPO = Path(__file__).resolve().parents[2]
SCHEDULES = ("cyclic", "simultaneous")
# Float32 round-off only: per-replica partial sums are added in another order (measured ~6e-8 on weights that
# move by ~4e-2 in the epoch); a wrong replica scaling moves them by ~4e-2.
WEIGHT_ATOL = 1e-5
LOSS_ATOL = 1e-5


@pytest.fixture(scope="module")
def runs() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env["CUDA_VISIBLE_DEVICES"] = ""
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    proc = subprocess.run([sys.executable, str(WORKER), *SCHEDULES], env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, f"worker failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_mirrored_update_equals_single_device(runs: dict, schedule: str) -> None:
    run = runs[schedule]
    assert run["replicas_single"] == 1 and run["replicas_mirrored"] == 2 and not run["eager_mirrored"]
    assert run["iterations_single"] == run["iterations_mirrored"] == [4, 4, 4, 4]  # 3 players + the encoder
    assert run["num_weights"][0] == run["num_weights"][1] > 0
    assert run["max_abs_change"] > 100 * WEIGHT_ATOL  # the epoch really moved the weights
    assert run["max_abs_diff"] < WEIGHT_ATOL, run


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_mirrored_logged_loss_is_not_scaled_by_replicas(runs: dict, schedule: str) -> None:
    run = runs[schedule]
    assert run["loss_single"] > 0
    assert abs(run["loss_mirrored"] - run["loss_single"]) < LOSS_ATOL, run
    assert abs(run["payoff_mirrored"] - run["payoff_single"]) < LOSS_ATOL, run
