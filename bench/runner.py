"""One benchmark run: (data set, method, seed) -> one JSON file under <output>/results/. Resumable.

A run whose file exists is skipped unless `force`; files are written atomically (*.tmp, then renamed), so an
interrupted benchmark leaves no half-written result. The file holds the config, the data's sha256 (from the
build manifest), package versions, the machine, every metric of cdgt_keras.metrics.report (overall / head /
tail), training and inference time, the peak RSS of training, scoring and evaluation (`memory`:
cdgt.bench.memory, the process's kernel high-water mark reset at the run's start, with the RSS the run started
from), and for CD-GTMLL the game's history and the players' specialisation. `run_isolated` runs one in a fresh
Python process, so that its peak RSS and time are its own: in one process, what earlier runs leave behind (the
allocator's caches, data sets loaded) is part of the next run's RSS (a deps benchmark's three seeds in one process
started at 1.5, 3.2 and 4.4 GB, and the peer after them at 5.4 GB).

Example:
    >>> spec = RunSpec("yeast", resolve("cdgt"), seed=0)  # doctest: +SKIP
    >>> run(spec, Path("bench/results"))                   # doctest: +SKIP
    'done'
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import importlib
import json
import multiprocessing
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from cdgt.bench.datasets import BenchData, load_dataset
from cdgt.bench.environment import environment
from cdgt.bench.memory import peak_rss
from cdgt.bench.methods import Method, resolve
from cdgt.bench.rows import ROWS_K, RowOutcomes, rows_path, save_rows

SCHEMA = 1
MAX_NAME_BYTES = 240  # a result file's name, leaving room for the ".tmp" of the atomic write
HISTORY_KEYS = ("loss", "payoff", "potential", "kl_head", "kl_tail", "val_payoff", "val_potential",
                "val_kl_head", "val_kl_tail", "val_p_at_1", "val_p_at_5", "val_psp_at_5")


@dataclass(frozen=True)
class RunSpec:
    """What to run; `row` is the method's name in the experiment tables (before profile overrides)."""

    dataset: str
    method: Method
    seed: int
    row: str = ""

    def path(self, results_dir: Path) -> Path:
        """OUTPUT/results/DATASET__METHOD__sSEED.json; a method name too long for a file name (most file systems
        allow 255 bytes) is shortened to its base and a digest of the name (the file holds the full name)."""
        name = f"{self.dataset}__{self.method.name}__s{self.seed}.json"
        if len(name.encode()) > MAX_NAME_BYTES:
            digest = hashlib.sha256(self.method.name.encode()).hexdigest()[:16]
            name = f"{self.dataset}__{self.method.base}[{digest}]__s{self.seed}.json"
        return Path(results_dir) / name


def run(spec: RunSpec, results_dir: Path, *, root: Path | None = None, cache_dir: Path | None = None,
        force: bool = False) -> str:
    """Run `spec` unless its result exists; returns "skipped", "done" or "unavailable" (peer not installed)."""
    path = spec.path(results_dir)
    if path.is_file() and not force:
        return "skipped"
    if spec.method.kind != "cdgt":
        from cdgt.bench.peers import available

        if not available(spec.method.kind):
            return "unavailable"
    data = load_dataset(spec.dataset, root, cache_dir, spec.method.config())
    _import_libraries(spec.method.kind)
    with peak_rss() as memory:
        body = _run_cdgt(spec, data) if spec.method.kind == "cdgt" else _run_peer(spec, data)
    body["memory"] = memory.as_dict()
    save_rows(rows_path(path), body.pop("_rows"))
    result = {"schema": SCHEMA, "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "command": " ".join(["cdgt", *sys.argv[1:]]) if sys.argv else "",
              "dataset": {"name": data.name, "sources": data.sources, **data.facts},
              "method": {"name": spec.method.name, "row": spec.row or spec.method.name, "kind": spec.method.kind,
                         "label": spec.method.label},
              "seed": spec.seed, **body, "environment": environment()}
    write_json(path, result)
    return "done"


def run_isolated(spec: RunSpec, results_dir: Path, *, root: Path | None = None, cache_dir: Path | None = None,
                 force: bool = False) -> str:
    """`run` in a fresh Python process (spawned, not forked: nothing of this process is shared); its output goes to
    this process's, and an error in it is raised here."""
    if spec.path(results_dir).is_file() and not force:
        return "skipped"
    with exit_on_sigterm(), multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(run, (spec, results_dir), {"root": root, "cache_dir": cache_dir, "force": force})


@contextlib.contextmanager
def exit_on_sigterm() -> Iterator[None]:
    """SIGTERM raises SystemExit(143) in the block (in the main thread), so that what the block holds is cleaned
    up: a killed `cdgt bench quality` then ends its spawned run too, where TERM's default left it running."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


RUN_MODULES = {"cdgt": ("keras", "cdgt_keras.model", "cdgt_keras.evaluation", "cdgt.bench.measures",
                        "cdgt.pipeline.train")}


def _import_libraries(kind: str) -> None:
    """Import what a run of `kind` uses before its memory is measured: the first run of a kind would otherwise
    count the libraries' import (a few hundred MiB for TensorFlow) that every later run finds loaded."""
    from cdgt.bench.peers import peer

    modules = RUN_MODULES["cdgt"] if kind == "cdgt" else ("cdgt_keras.evaluation", peer(kind).package)
    for module in modules:
        importlib.import_module(module)
    if kind == "cdgt":  # built (once per machine) here, not inside the first run's training time
        importlib.import_module("cdgt_keras.kernels").lazy_adam_rows()


def write_json(path: Path, payload: dict[str, Any]) -> None:
    """Atomic write: a *.tmp sibling, then rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=1, sort_keys=True, default=_plain) + "\n")
    tmp.replace(path)


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _epoch_timer(label: str):
    import keras

    class EpochTimer(keras.callbacks.Callback):
        """Wall time of each epoch (training steps plus the validation pass), and a progress line per epoch
        (`  deps recommended seed 0: epoch 3/10 in 241.2 s, validation P@5 33.10`): a run on the large sets takes
        most of an hour, and the bench's own line comes when it ends."""

        def __init__(self) -> None:
            super().__init__()
            self.seconds: list[float] = []

        def on_epoch_begin(self, epoch, logs=None):
            self.started = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.seconds.append(time.perf_counter() - self.started)
            p_at_5 = (logs or {}).get("val_p_at_5")
            shown = f", validation P@5 {100 * float(p_at_5):.2f}" if p_at_5 is not None else ""
            print(f"  {label}: epoch {epoch + 1}/{self.params.get('epochs', '?')} in {self.seconds[-1]:.1f} s{shown}",
                  flush=True)

    return EpochTimer()


def _run_cdgt(spec: RunSpec, data: BenchData) -> dict[str, Any]:
    import keras

    from cdgt.bench.measures import player_probs, specialisation
    from cdgt_keras.evaluation import answer_chunks, answer_scorer
    from cdgt_keras.kernels import kernel_status
    from cdgt_keras.training import fit_model

    config = spec.method.config(spec.seed)
    train, validation, test = (data.splits[s] for s in ("train", "validation", "test"))
    timer = _epoch_timer(f"{spec.dataset} {spec.method.name} seed {spec.seed}")
    model, history, train_seconds = fit_model(config, train, validation, callbacks=[timer])
    # the scores the decisions are read from, when the tail decides apart (tail_decisions="own"), come from the
    # ranking's pass (`answer_chunks`); None when they are the ranking's
    score = answer_scorer(model)  # traced once, for test and validation
    ranking, test_deciding = answer_chunks(model, test, config.batch_size, score=score)
    test_chunks, predict_seconds = timed_chunks(ranking)
    decide_seconds = [0.0]
    if test_deciding is not None:
        test_deciding, decide_seconds = timed_chunks(test_deciding)
    val_chunks, val_deciding = answer_chunks(model, validation, config.batch_size, score=score)
    body = _evaluate(config, data, val_chunks, test_chunks, val_deciding, test_deciding)
    players = player_probs(model, test.features, config.batch_size)
    body["specialisation"] = specialisation(players, model.layout.player_labels, test.labels,
                                            np.asarray(body.pop("_thresholds")), *body.pop("_head_tail"))
    body["history"] = {k: [float(v) for v in vs] for k, vs in history.history.items() if k in HISTORY_KEYS}
    # each memory layer's weight tuned on validation, and validation P@k under each weight (k: memory_tuning_k, in
    # the key); the tail's own weight (-1: the shared one) and what validation said of it (tail_memory="own")
    # (memory_tuning_metric="psp_at_k": PSP@k's numerator per top-k slot, what that tuning ranks the weights by;
    # "p_then_psp_at_k": P@k, the table its slack is measured on)
    k = config.memory_tuning_k
    tuned_on = f"validation_psp_gain_at_{k}" if config.memory_tuning_metric == "psp_at_k" else f"validation_p_at_{k}"
    for layer, _ in model.memory_layers():
        body[layer.name] = {"weight": float(layer.weight.numpy()), "tail_weight": float(layer.tail_weight.numpy()),
                            tuned_on: {str(w): p for w, p in layer.tuning.items()}}
        if layer.decision_weight is not None:  # the tail's weight in the decisions alone (-1: the ranking's)
            body[layer.name]["decision_weight"] = float(layer.decision_weight.numpy())
    if getattr(model, "tail_choice", None) is not None:
        body["tail_memory"] = dataclasses.asdict(model.tail_choice)
    if getattr(model, "decision_choice", None) is not None:
        body["tail_decisions"] = dataclasses.asdict(model.decision_choice)
    if getattr(model, "rerank_exponent", None) is not None:  # config rerank_slack: the exponent and its table
        body["reranking"] = {"exponent": float(model.rerank_exponent.numpy()), f"validation_p_and_psp_gain_at_{k}": {
            str(a): list(row) for a, row in getattr(model, "rerank_tuning", {}).items()}}
    # the test split's prediction: the ranking's pass (with the decisions' own, when they are apart, from it)
    body["timing"] = {"train_seconds": train_seconds, "inference_seconds": predict_seconds[0] + decide_seconds[0],
                      "epoch_seconds": timer.seconds, "epochs_run": len(timer.seconds)}
    body["encoder_update"] = kernel_status()  # what the encoder's rows were updated by: "fused", or TF's ops and why
    del model
    keras.backend.clear_session()
    return {"config": config.to_dict(), **body}


def timed_chunks(chunks: Any) -> tuple[Any, list[float]]:
    """`chunks` (re-iterable score chunks) and a list that gets, after each complete pass, the seconds spent
    producing that pass's chunks (a model's predictions) without the time spent on them by whoever reads them."""
    spent: list[float] = []

    def again():
        seconds, items = 0.0, iter(chunks())
        while True:
            started = time.perf_counter()
            try:
                chunk = next(items)
            except StopIteration:
                break
            seconds += time.perf_counter() - started
            yield chunk
        spent.append(seconds)

    return again, spent


def _run_peer(spec: RunSpec, data: BenchData) -> dict[str, Any]:
    from cdgt.bench.peers import fit_predict, peer
    from cdgt_keras.chunked_eval import matrix_chunks

    config = spec.method.config(spec.seed)
    out = fit_predict(spec.method.kind, data.splits, spec.seed)
    body = _evaluate(config, data, matrix_chunks(out.validation_scores), matrix_chunks(out.test_scores))
    body.pop("_thresholds"), body.pop("_head_tail")
    body["timing"] = {"train_seconds": out.train_seconds, "inference_seconds": out.inference_seconds}
    settings = peer(spec.method.kind).settings
    return {"config": {"peer": spec.method.kind, "settings": settings, "thresholds": config.thresholds,
                       "min_threshold_positives": config.min_threshold_positives,
                       "threshold_prior": config.threshold_prior,
                       "threshold_shared_positives": config.threshold_shared_positives}, **body}


# Decision rules every run is also scored under, from the same probabilities (no retraining): a threshold rule
# is compared like with like, the bar and every candidate under each. Each mode with the run's own options; and
# "shipped": the shipped preset's whole rule (its mode and options), the one ours and the peers are compared under.
SHIPPED_RULE = "shipped"
THRESHOLD_MODES = ("global", "per_label", "grouped", "shrunk", SHIPPED_RULE)


def _evaluate(config: Any, data: BenchData, val_chunks: Any, test_chunks: Any, val_deciding: Any = None,
              test_deciding: Any = None) -> dict[str, Any]:
    """Thresholds tuned on validation (the config's rule and each of THRESHOLD_MODES, from one pass), the SPEC §7
    report on test under each, and the curves, from score chunks (cdgt_keras.chunked_eval: one pass over
    validation, two over test; never an [n, L] matrix beside one chunk). `val_deciding` / `test_deciding`: the
    chunks the decisions are read from when they are not the ranking's (the thresholds, F1, the tail's PR curve
    and the kept decisions read them)."""
    from cdgt.bench.measures import TAIL_PR_GRID, frequency_buckets, long_tail_curve, tail_pr_curve
    from cdgt_keras.chunked_eval import chunked_reports
    from cdgt_keras.config import CDGTConfig
    from cdgt_keras.evaluation import label_groups
    from cdgt_keras.labels import label_frequencies
    from cdgt_keras.presets import DEFAULT_PRESET
    from cdgt_keras.thresholds import ThresholdCounts, config_rule, sparse_decisions, threshold_counts

    train, validation, test = (data.splits[s] for s in ("train", "validation", "test"))
    counts, _ = label_frequencies(train.labels, train.num_labels)
    head, tail, props = label_groups(counts, train.num_examples, config)
    tuned = threshold_counts((val_deciding or val_chunks)(), validation.labels)
    own = config_rule(config)
    rules = {mode: tuned.thresholds(**{**own, "mode": mode})
             for mode in dict.fromkeys([config.thresholds, *THRESHOLD_MODES]) if mode != SHIPPED_RULE}
    rules[SHIPPED_RULE] = tuned.thresholds(**config_rule(CDGTConfig.preset(DEFAULT_PRESET)))
    tail_counts, tail_truth = ThresholdCounts(tail.size, grid=TAIL_PR_GRID), test.labels.tocsc()[:, tail].tocsr()

    shipped_decisions: list[sp.csr_matrix] = []

    def observe_tail(start: int, chunk: np.ndarray) -> None:
        tail_counts.add(chunk[:, tail], tail_truth[start : start + chunk.shape[0]])

    def observe_decisions(start: int, chunk: np.ndarray) -> None:
        shipped_decisions.append(sparse_decisions(chunk, rules[SHIPPED_RULE]))

    out = chunked_reports(test.labels, test_chunks, rules, head_labels=head, tail_labels=tail, propensities=props,
                          observers=[observe_decisions, *([observe_tail] if tail.size else [])],
                          decision_chunks=test_deciding)
    decided = out.counts[config.thresholds]
    return {
        "metrics": out.reports[config.thresholds],
        "metrics_by_thresholds": {mode: out.reports[mode] for mode in THRESHOLD_MODES},
        "labels": {"num_head": int(head.size), "num_tail": int(tail.size)},
        "curves": {"tail_pr": tail_pr_curve(tail_counts), "long_tail": long_tail_curve(decided, counts),
                   "buckets": frequency_buckets(test.labels, out.top, decided, counts)},
        "_thresholds": rules[config.thresholds], "_head_tail": (head, tail),
        "_rows": RowOutcomes(out.top[0][:, :ROWS_K], sp.vstack(shipped_decisions, format="csr")
                             if shipped_decisions else sp.csr_matrix(test.labels.shape, dtype=np.int8)),
    }


def load_results(results_dir: Path) -> list[dict[str, Any]]:
    """Every result file under `results_dir` (unreadable ones are reported on stderr and left out)."""
    out = []
    for path in sorted(Path(results_dir).glob("*.json")):
        try:
            out.append(_canonical(json.loads(path.read_text())))
        except (OSError, json.JSONDecodeError) as err:
            print(f"bench: skipping unreadable {path}: {err}", file=sys.stderr)
    return out


def _canonical(result: dict[str, Any]) -> dict[str, Any]:
    """Re-resolve a result's method name and row, so runs made under an older name (before an alias) group with
    the runs of their canonical name; the name it ran under stays in `method.ran_as`."""
    method = result.get("method", {})
    if method.get("kind") != "cdgt":
        return result
    try:
        name = resolve(method["name"]).name
        row = resolve(method.get("row") or method["name"]).name
    except (KeyError, ValueError):
        return result
    if (name, row) != (method["name"], method.get("row")):
        result["method"] = {**method, "name": name, "row": row, "ran_as": method["name"]}
    return result
