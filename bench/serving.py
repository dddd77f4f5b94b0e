"""`cdgt bench serving`: in-process latency and throughput of an exported model's `predict` signature.

What is timed: one call of the loaded SavedModel's `predict` signature on raw input (text, dense or sparse; the
preprocessing inside the graph included) until its outputs are numpy arrays: p50/p99 latency at batch 1 and
throughput at batch 64, after a warm-up. Inputs are synthetic (text: sentences of 20-60 common words, most of
them software words; dense: N(0, 1) rows; sparse: 20 random ids per row) unless a file gives them.

Example:
    >>> result = bench_model("runs/serving/debtags", requests=300)        # doctest: +SKIP
    >>> result["batch_1"]["p50_ms"]                                         # doctest: +SKIP
    1.9
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

WORDS = ("a an the for and of to in with on from by is this that it package program tool library files file "
         "data text editor server client network web browser python perl java shell command line interface "
         "graphical desktop gnome kde x11 terminal console utility utilities development documentation game "
         "games audio video sound music image images viewer converter database sql system daemon kernel "
         "module driver support plugin plugins font fonts development headers static shared runtime "
         "scientific science mathematics email mail security encryption backup archive compression").split()


def synthetic_inputs(kind: str, n: int, width: int | None, seed: int = 0) -> list[Any]:
    """`n` raw inputs of a kind (see the module docstring)."""
    rng = np.random.default_rng(seed)
    if kind == "text":
        return [" ".join(rng.choice(WORDS, size=int(rng.integers(20, 61)))) for _ in range(n)]
    if width is None:
        raise ValueError("a dense or sparse model's input width is needed (assets.extra/cdgt.json input_width)")
    if kind == "dense":
        return rng.standard_normal((n, width)).astype(np.float32).tolist()
    return [{"feature_ids": sorted(rng.choice(width, size=min(20, width), replace=False).tolist()),
             "feature_values": rng.random(min(20, width)).round(4).tolist()} for _ in range(n)]


def _timed(signature: Any, tensors: dict[str, Any], calls: int) -> np.ndarray:
    seconds = np.empty(calls)
    for i in range(calls):
        started = time.perf_counter()
        outputs = signature(**tensors)
        for value in outputs.values():
            value.numpy()
        seconds[i] = time.perf_counter() - started
    return seconds


def bench_model(model_dir: str | Path, requests: int = 300, batch: int = 64, batches: int = 40,
                inputs: list[Any] | None = None, warmup: int = 20) -> dict[str, Any]:
    """Latency at batch 1 (`requests` calls) and throughput at `batch` (`batches` calls) of `predict`."""
    import tensorflow as tf

    from cdgt.serving.export import read_metadata
    from cdgt.serving.layout import resolve_saved_model
    from cdgt.serving.requests import encode_inputs, input_kind

    path = resolve_saved_model(model_dir)
    started = time.perf_counter()
    signature = tf.saved_model.load(str(path)).signatures.get("predict")
    load_seconds = time.perf_counter() - started
    if signature is None:
        raise ValueError(f"{path} has no `predict` signature: export it with `cdgt export`")
    kind = input_kind(signature.structured_input_signature[1])
    meta = read_metadata(str(path))
    width = meta.get("input_width")
    pool = inputs or synthetic_inputs(kind, max(batch, 256), width)
    rows = [pool[i % len(pool)] for i in range(max(batch, len(pool)))]

    def tensors(items: list[Any]) -> dict[str, Any]:
        return {k: tf.constant(v) for k, v in encode_inputs(kind, items, width if kind == "dense" else None).items()}

    singles = [tensors([row]) for row in rows[:64]]
    for i in range(warmup):
        _timed(signature, singles[i % len(singles)], 1)
    one = np.concatenate([_timed(signature, singles[i % len(singles)], 1) for i in range(requests)])
    big = tensors(rows[:batch])
    _timed(signature, big, 3)
    many = _timed(signature, big, batches)
    return {"model": str(path), "feature_kind": kind, "num_labels": len(meta.get("label_names", [])),
            "input_width": width, "load_seconds": round(load_seconds, 2),
            "batch_1": {"calls": requests, "p50_ms": _ms(np.percentile(one, 50)),
                        "p99_ms": _ms(np.percentile(one, 99)), "mean_ms": _ms(one.mean())},
            f"batch_{batch}": {"calls": batches, "p50_ms": _ms(np.percentile(many, 50)),
                               "examples_per_second": round(batch * batches / float(many.sum()), 1)}}


def _ms(seconds: float) -> float:
    return round(1000.0 * float(seconds), 3)


def machine() -> dict[str, Any]:
    """CPU, cores, RAM, platform and the TensorFlow version the figures were measured with."""
    from cdgt.bench.environment import environment

    env = environment()
    return {**env["machine"], "tensorflow": env["packages"].get("tensorflow"), "python": env["python"],
            "git_commit": env["git_commit"]}


def format_result(result: dict[str, Any], batch: int = 64) -> str:
    """Two lines per model: what it is, and the figures."""
    one, many = result["batch_1"], result[f"batch_{batch}"]
    return (f"{result['model']}: {result['feature_kind']} input, {result['num_labels']} labels "
            f"(loaded in {result['load_seconds']} s)\n"
            f"  batch 1: p50 {one['p50_ms']:.2f} ms  p99 {one['p99_ms']:.2f} ms  ({one['calls']} calls)   "
            f"batch {batch}: {many['examples_per_second']:,.0f} examples/s  (p50 {many['p50_ms']:.1f} ms per batch)")
