"""MultiWorkerMirroredStrategy: two worker processes on 127.0.0.1 end with identical weights, equal to one
process with the same global batch (SPEC §6: the cyclic per-player updates stay exact across workers)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

WORKER = Path(__file__).with_name("_multiworker_worker.py")
REPO = Path(__file__).resolve().parents[2]
# Float32 round-off only: the all-reduce adds the two workers' partial gradients in another order.
ATOL = 1e-5


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _env(tf_config: dict | None) -> dict:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("TF_CONFIG", None)
    if tf_config is not None:
        env["TF_CONFIG"] = json.dumps(tf_config)
    return env


def _last_json(text: str) -> dict:
    return json.loads(text.strip().splitlines()[-1])


@pytest.mark.parametrize("schedule", ["cyclic", "simultaneous"])
def test_two_workers_match_one_process(tmp_path: Path, schedule: str) -> None:
    weights = str(tmp_path / "init.weights.h5")
    single = subprocess.run([sys.executable, str(WORKER), weights, str(tmp_path / "single"), schedule],
                            env=_env(None), capture_output=True, text=True, timeout=300)
    assert single.returncode == 0, single.stderr[-3000:]
    cluster = {"worker": [f"127.0.0.1:{port}" for port in _free_ports(2)]}
    procs = [subprocess.Popen([sys.executable, str(WORKER), weights, str(tmp_path / f"worker{i}"), schedule],
                              env=_env({"cluster": cluster, "task": {"type": "worker", "index": i}}),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    outputs = [p.communicate(timeout=300) for p in procs]
    for proc, (_, err) in zip(procs, outputs):
        assert proc.returncode == 0, err[-3000:]
    info = [_last_json(out) for out, _ in outputs]
    # CollectiveAllReduceStrategy is the class behind tf.distribute.MultiWorkerMirroredStrategy
    assert [i["strategy"] for i in info] == ["CollectiveAllReduceStrategy"] * 2 and info[0]["replicas"] == 2
    init, ref = np.load(tmp_path / "single.init.npz"), np.load(tmp_path / "single.npz")
    w0, w1 = np.load(tmp_path / "worker0.npz"), np.load(tmp_path / "worker1.npz")
    moved = max(float(np.abs(ref[key] - init[key]).max()) for key in ref.files)
    assert moved > 100 * ATOL  # the steps moved the weights far more than the tolerance
    for key in ref.files:
        np.testing.assert_array_equal(w0[key], w1[key])  # the workers stay in lock step
        np.testing.assert_allclose(w0[key], ref[key], atol=ATOL)
    assert info[0]["loss"] == pytest.approx(_last_json(single.stdout)["loss"], abs=ATOL)
