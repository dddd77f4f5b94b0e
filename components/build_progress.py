"""What `cdgt data build` shows while its Beam job runs, and each stage's counts when the job ends.

A build reads for minutes on large sources, so each counting step of the job (a read stage's records and
rejects, the writers' examples per split) adds to a Beam counter and to this process's tally. The tally prints
one line every EVERY_SECONDS while records flow (a Beam worker process prints its own share), e.g.

    [cdgt data] 20 s: Read 120,000 records, 3 rejected; Write train 90,000, validation 10,000, test 19,997

and the driver prints the counters of the whole job, summed over workers, once it is done (`job_line`).
Lines are dropped under `cdgt -q` (CDGT_QUIET=1 reaches worker processes).

Example:
    >>> tally = Tally(every_seconds=0.0, show=print)
    >>> tally.add("Read", "records", 2)
    [cdgt data] 0 s: Read 2 records
    >>> stage_line({("Read", "records"): 5, ("Read", "rejected"): 1, ("Write", "train"): 4})
    'Read 5 records, 1 rejected; Write train 4'
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

NAMESPACE = "cdgt.build"
EVERY_SECONDS = 10.0
QUIET_ENV = "CDGT_QUIET"  # pipeline/cli/console.py sets it for `cdgt -q`; worker processes inherit it
_SEP = "/"

Key = tuple[str, str]  # (stage, what): ("Read", "records"), ("Read", "rejected"), ("Write", "train"), ...


def show(message: str) -> None:
    """Print a progress line on stderr unless quiet."""
    if os.environ.get(QUIET_ENV) != "1":
        print(message, file=sys.stderr, flush=True)


class Tally:
    """This process's counts by (stage, what), shown as one line at most every `every_seconds`."""

    def __init__(self, every_seconds: float | None = None, clock: Callable[[], float] = time.monotonic,
                 show: Callable[[str], None] = show) -> None:
        self.every = EVERY_SECONDS if every_seconds is None else every_seconds
        self.clock, self.show = clock, show
        self.counts: dict[Key, int] = {}
        self.start = self.last = clock()

    def add(self, stage: str, what: str, n: int = 1) -> None:
        """Count `n` more of `what` in `stage`; show the line when `every_seconds` have passed since the last."""
        self.counts[(stage, what)] = self.counts.get((stage, what), 0) + n
        now = self.clock()
        if now - self.last >= self.every:
            self.last = now
            self.show(f"[cdgt data] {now - self.start:.0f} s: {stage_line(self.counts)}")


def stage_line(counts: Mapping[Key, int]) -> str:
    """'Read 5 records, 1 rejected; Write train 4': stages in the order first counted, splits as counted."""
    stages: dict[str, list[str]] = {}
    for (stage, what), n in counts.items():
        stages.setdefault(stage, []).append(f"{n:,} {what}" if what in ("records", "rejected") else f"{what} {n:,}")
    return "; ".join(f"{stage} {', '.join(parts)}" for stage, parts in stages.items())


_TALLY: dict[str, Tally] = {}  # this process's tally, made on first use (a worker's clock starts with its work)
_COUNTERS: dict[Key, Any] = {}


def count(stage: str, what: str, n: int = 1) -> None:
    """Add to the job's Beam counter `stage/what` and to this process's progress line."""
    from apache_beam.metrics import Metrics

    key = (stage, what)
    if key not in _COUNTERS:
        _COUNTERS[key] = Metrics.counter(NAMESPACE, f"{stage}{_SEP}{what}")
    _COUNTERS[key].inc(n)
    if "tally" not in _TALLY:
        _TALLY["tally"] = Tally()
    _TALLY["tally"].add(stage, what, n)


def reset() -> None:
    """Forget this process's tally (a new build in the same process starts its clock and counts at zero)."""
    _TALLY.clear()


def job_counts(result: Any) -> dict[Key, int]:
    """The job's counters summed over steps and workers ({} when the runner cannot report metrics)."""
    from apache_beam.metrics.metric import MetricsFilter

    try:
        found = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]
    except (NotImplementedError, AttributeError, KeyError):
        return {}
    counts: dict[Key, int] = {}
    for counter in found:
        stage, _, what = counter.key.metric.name.partition(_SEP)
        value = counter.committed if counter.committed is not None else counter.attempted
        counts[(stage, what)] = counts.get((stage, what), 0) + int(value or 0)
    return counts


def job_line(counts: Mapping[Key, int]) -> str | None:
    """The line the driver prints after the job ('stages: Read ...'), or None without counts."""
    ordered = {k: counts[k] for k in sorted(counts, key=_order)}
    return f"stages: {stage_line(ordered)}" if ordered else None


def _order(key: Key) -> tuple[int, str, int, str]:
    """Vocabulary pass, then the read stages, then the writers; splits in train, validation, test order."""
    stage, what = key
    stages, whats = ("Vocab", "Read", "Write"), ("records", "rejected", "train", "validation", "test")
    first = stage.split()[0]
    return (stages.index(first) if first in stages else len(stages), stage,
            whats.index(what) if what in whats else len(whats), what)
