"""pipeline.local_runner: `cdgt run`'s per-component progress lines and its quiet shutdown."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from cdgt.pipeline import local_runner
from cdgt.pipeline.local_runner import component_progress

REPO = Path(__file__).resolve().parents[2]


class _Launcher:
    """The two methods of TFX's Launcher that component_progress wraps, for one node."""

    def __init__(self, node: str, cached: bool = False, system: bool = False, fails: bool = False,
                 seconds: float = 0.0):
        self._pipeline_node = SimpleNamespace(node_info=SimpleNamespace(id=node))
        self._system_node_handler = object() if system else None
        self.cached, self.fails, self.seconds = cached, fails, seconds

    def launch(self) -> str:
        if not self.cached and not self._system_node_handler:
            self._run_executor()
        return "execution info"

    def _run_executor(self) -> None:
        time.sleep(self.seconds)
        if self.fails:
            raise RuntimeError("the executor failed")


def test_each_component_gets_a_line_when_it_runs_and_when_it_ends():
    lines: list[str] = []
    original = _Launcher.launch
    with component_progress(lines.append, _Launcher):
        assert _Launcher("StatisticsGen", cached=True).launch() == "execution info"
        _Launcher("latest_blessed_model_resolver", system=True).launch()
        _Launcher("Transform").launch()
        with pytest.raises(RuntimeError):
            _Launcher("SchemaGate", fails=True).launch()
    _Launcher("Pusher").launch()  # after the block: no line
    assert lines[:2] == ["StatisticsGen cached", "Transform running"]
    assert lines[2].startswith("Transform done in ") and lines[2].endswith(" s")
    assert lines[3] == "SchemaGate running" and lines[4].startswith("SchemaGate failed after ")
    assert len(lines) == 5 and _Launcher.launch is original


def test_a_long_running_component_says_it_is_still_running(monkeypatch):
    monkeypatch.setattr(local_runner, "HEARTBEAT_SECONDS", 0.1)
    lines: list[str] = []
    with component_progress(lines.append, _Launcher):
        _Launcher("Evaluator", seconds=0.55).launch()
        _Launcher("Pusher").launch()
    time.sleep(0.3)  # no beat once a component has ended
    beats = lines[1:-3]
    assert lines[0] == "Evaluator running" and lines[-3].startswith("Evaluator done in ")
    assert lines[-2:] == ["Pusher running", lines[-1]] and lines[-1].startswith("Pusher done in ")
    assert 3 <= len(beats) <= 5 and all(b.startswith("Evaluator still running (") for b in beats)


def test_tensorflow_shutdown_noise_is_dropped_and_other_exceptions_kept():
    """Objects deleted at interpreter exit: AtomicFunction's __del__ failure is not printed, another one is."""
    script = textwrap.dedent("""
        from cdgt.pipeline.local_runner import quiet_teardown

        class AtomicFunction:
            def __del__(self):
                raise TypeError("'NoneType' object is not subscriptable")

        class Other:
            def __del__(self):
                raise ValueError("the user's own")

        quiet_teardown()
        kept = [AtomicFunction(), Other()]
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0
    assert "AtomicFunction" not in done.stderr and "the user's own" in done.stderr, done.stderr


def test_scratch_directory_holds_the_runs_temporary_files_and_is_removed_even_on_failure(monkeypatch):
    import os
    import tempfile

    monkeypatch.setenv("TMPDIR", "/somewhere/else")
    before = tempfile.gettempdir()
    with pytest.raises(RuntimeError, match="component failed"):
        with local_runner.scratch_directory() as scratch:
            made = tempfile.mkdtemp()
            Path(made, "sdist.tar.gz").write_bytes(b"x" * 1000)
            assert Path(made).parent == Path(scratch) and os.environ["TMPDIR"] == scratch
            raise RuntimeError("component failed")
    assert not Path(scratch).exists()
    assert tempfile.gettempdir() == before and os.environ["TMPDIR"] == "/somewhere/else"
