"""Run the pipeline in this process with LocalDagRunner, and read what happened back from ML-Metadata.

LocalDagRunner runs the Trainer in-process, so the logical CPU devices MirroredStrategy replicates over must be
configured before TensorFlow initialises (they are fixed at its first op): call
`cdgt_keras.distribute.set_cpu_replicas` first.

Example:
    >>> from cdgt_keras.distribute import set_cpu_replicas
    >>> set_cpu_replicas(2)  # before anything runs a TensorFlow op  # doctest: +SKIP
    >>> run(create_pipeline(settings, config))           # doctest: +SKIP
    >>> summary = run_summary(settings.metadata_path, settings.name)  # doctest: +SKIP
    >>> summary.states["CdgtTrainer"]                    # doctest: +SKIP
    'CACHED'
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

HEARTBEAT_SECONDS = 60.0  # a running component says so this often (the Evaluator and Transform run for minutes)
_STATE_NAMES = {0: "UNKNOWN", 1: "NEW", 2: "RUNNING", 3: "COMPLETE", 4: "FAILED", 5: "CACHED", 6: "CANCELED"}


def run(pipeline: Any, progress: Callable[[str], None] | None = None) -> None:
    """Run the pipeline to completion (cached components are reused); `progress` gets one line when a component
    starts executing and one when it ends (`Transform done in 31.2 s`, `StatisticsGen cached`). TensorFlow's
    shutdown noise is dropped (quiet_teardown)."""
    from tfx import v1 as tfx

    quiet_teardown()
    with scratch_directory(), component_progress(progress) if progress else contextlib.nullcontext():
        tfx.orchestration.LocalDagRunner().run(pipeline)


@contextlib.contextmanager
def scratch_directory(prefix: str = "cdgt-run-") -> Iterator[str]:
    """Point the temporary directory (`tempfile` and `TMPDIR`, so Beam's worker processes too) at a fresh directory
    for the block, and remove it and all it holds afterwards, even when the block fails.

    Why: each Beam component of a TFX run builds a 50 MB source package of TFX for remote workers in a directory
    of its own under /tmp and never removes it (tfx/utils/dependency_utils.py, TFX 1.16); five components per run
    filled a disk over a few hundred runs. Nothing a run keeps lives in the temporary directory: its artifacts are
    under the pipeline root.

    Example:
        >>> import os, tempfile
        >>> with scratch_directory() as scratch:
        ...     inside = tempfile.mkdtemp()
        ...     inside.startswith(scratch), os.environ["TMPDIR"] == scratch
        (True, True)
        >>> os.path.exists(scratch)
        False
    """
    import os
    import shutil
    import tempfile

    scratch = tempfile.mkdtemp(prefix=prefix)
    saved_tempdir, saved_env = tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir, os.environ["TMPDIR"] = scratch, scratch
    try:
        yield scratch
    finally:
        tempfile.tempdir = saved_tempdir
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env
        shutil.rmtree(scratch, ignore_errors=True)


class _QuietTeardown:
    """sys.unraisablehook that drops what TensorFlow's AtomicFunction.__del__ raises while Python shuts down.

    Why: graph functions still alive at exit (the Trainer's and TFMA's models) are deleted after TensorFlow's module
    globals are gone, and each prints `Exception ignored in: <function AtomicFunction.__del__ ...>` with a
    traceback that says nothing about the run. Everything else goes to the previous hook. The hook keeps what it
    needs on itself: module globals may already be None when it is called."""

    def __init__(self, previous: Callable[[Any], None]):
        self.previous = previous

    def __call__(self, unraisable: Any) -> None:
        if getattr(unraisable.object, "__qualname__", "") != "AtomicFunction.__del__":
            self.previous(unraisable)


def quiet_teardown() -> None:
    """Install _QuietTeardown once for this process."""
    import sys

    if not isinstance(sys.unraisablehook, _QuietTeardown):
        sys.unraisablehook = _QuietTeardown(sys.unraisablehook)


@contextlib.contextmanager
def component_progress(show: Callable[[str], None], launcher_class: Any = None) -> Iterator[None]:
    """Show a line as each component starts executing (`Transform running`), every HEARTBEAT_SECONDS while it runs
    (`Evaluator still running (60 s)`) and as it ends (`Transform done in 31.2 s`, `StatisticsGen cached`) while the
    block runs.

    How: LocalDagRunner runs each node through `Launcher.launch`, which calls `Launcher._run_executor` only when the
    execution is not cached (TFX 1.16, tfx/orchestration/portable/launcher.py); both are wrapped for the block and
    restored after. Not through TFX's logs: a library that parses absl flags on the way (Transform does) raises
    the absl logger's level and silences them."""
    if launcher_class is None:
        from tfx.orchestration.portable.launcher import Launcher as launcher_class
    launch, run_executor = launcher_class.launch, launcher_class._run_executor
    executed: set[str] = set()

    def node_of(launcher: Any) -> str:
        return launcher._pipeline_node.node_info.id

    def timed_launch(self: Any, *args: Any, **kwargs: Any) -> Any:
        started, node = time.monotonic(), node_of(self)
        try:
            result = launch(self, *args, **kwargs)
        except BaseException:
            show(f"{node} failed after {time.monotonic() - started:.1f} s")
            raise
        if node in executed:
            show(f"{node} done in {time.monotonic() - started:.1f} s")
        elif getattr(self, "_system_node_handler", None) is None:  # resolvers and importers run no executor
            show(f"{node} cached")
        return result

    def announced_run_executor(self: Any, *args: Any, **kwargs: Any) -> Any:
        executed.add(node_of(self))
        show(f"{node_of(self)} running")
        with _heartbeat(show, node_of(self), HEARTBEAT_SECONDS):
            return run_executor(self, *args, **kwargs)

    launcher_class.launch, launcher_class._run_executor = timed_launch, announced_run_executor
    try:
        yield
    finally:
        launcher_class.launch, launcher_class._run_executor = launch, run_executor


def _heartbeat(show: Callable[[str], None], node: str, every: float) -> contextlib.AbstractContextManager[None]:
    """`NODE still running (N s)` every `every` seconds from a daemon thread until the block ends: a component
    whose own logs are silenced (or that has none) still shows it is alive."""
    from cdgt.pipeline.periodic import every as periodically

    started = time.monotonic()
    return periodically(every, lambda: show(f"{node} still running ({time.monotonic() - started:.0f} s)"),
                        f"cdgt-heartbeat-{node}")


@dataclass
class RunSummary:
    """The latest run of a pipeline as ML-Metadata recorded it."""

    run_id: str
    states: dict[str, str]  # component id -> COMPLETE | CACHED | FAILED | ...
    artifacts: dict[str, dict[str, Any]]  # artifact type name -> {"uri", "properties"} of the latest one


def _store(metadata_path: str) -> Any:
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2

    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = metadata_path
    config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    return metadata_store.MetadataStore(config)


def _properties(artifact: Any) -> dict[str, Any]:
    out = {}
    for key, value in artifact.custom_properties.items():
        kind = value.WhichOneof("value")
        out[key] = getattr(value, kind) if kind else None
    return out


def run_summary(metadata_path: str, pipeline_name: str,
                types: tuple[str, ...] = ("cdgt.MultiLabelMetrics", "ModelBlessing", "ModelEvaluation", "PushedModel",
                                          "Model", "ModelRun")) -> RunSummary:
    """Component states of the pipeline's latest run and the latest artifact of each type in `types`."""
    store = _store(metadata_path)
    runs = [c for c in store.get_contexts_by_type("pipeline_run") if _belongs(store, c, pipeline_name)]
    if not runs:
        raise ValueError(f"no run of pipeline {pipeline_name!r} in {metadata_path}")
    latest = max(runs, key=lambda c: c.create_time_since_epoch)
    states = {}
    for execution in sorted(store.get_executions_by_context(latest.id), key=lambda e: e.id):
        state = execution.last_known_state
        states[_node_of(store, execution.id)] = _STATE_NAMES.get(state, str(state))
    artifacts = {}
    for type_name in types:
        found = store.get_artifacts_by_type(type_name)
        if found:
            newest = max(found, key=lambda a: a.id)
            artifacts[type_name] = {"uri": newest.uri, "properties": _properties(newest)}
    return RunSummary(latest.name, states, artifacts)


def _belongs(store: Any, run_context: Any, pipeline_name: str) -> bool:
    parents = store.get_parent_contexts_by_context(run_context.id)
    return any(p.name == pipeline_name for p in parents) if parents else True


def _node_of(store: Any, execution_id: int) -> str:
    for context in store.get_contexts_by_execution(execution_id):
        if context.type == "node":
            return context.name.split(".", 1)[-1]
    return str(execution_id)


def validation_failures(evaluation_uri: str) -> list[str]:
    """Why TFMA did not bless: one line per failed threshold, e.g. 'auc 0.5132: change_threshold'."""
    import tensorflow_model_analysis as tfma

    result = tfma.load_validation_result(evaluation_uri)
    out = []
    for per_slice in result.metric_validations_per_slice:
        for failure in per_slice.failures:
            kinds = [k for k in ("value_threshold", "change_threshold") if failure.metric_threshold.HasField(k)]
            value = failure.metric_value.double_value.value
            what = "change vs the latest blessed model" if failure.metric_key.is_diff else "value"
            out.append(f"{failure.metric_key.name} {what} {value:+.4f}: {', '.join(kinds)}")
    return out
