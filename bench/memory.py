"""Peak resident memory (RSS) of one benchmark run, measured in the benchmark's own process.

`resource.getrusage(RUSAGE_SELF).ru_maxrss` is the process's peak since it started, so after a first large run
every later run would report that run's figure. On Linux the kernel's high-water mark (VmHWM in
/proc/self/status) can be reset to the current RSS by writing "5" to /proc/self/clear_refs: `peak_rss` resets it
when the run starts and reads it when the run ends, which is the exact peak of the process during the run (every
thread: TensorFlow's, Omikuji's). Where that file cannot be written, a thread samples the RSS every 20 ms and the
largest sample is reported (a spike shorter than that can be missed; `how` says which).

The peak is the whole process's RSS: it includes what the process held when the run began (the interpreter,
TensorFlow, the data sets already loaded, allocator caches of earlier runs), recorded as `start_rss_mib`, so
`peak_rss_mib - start_rss_mib` is what the run itself added.

Example:
    >>> with peak_rss() as memory:
    ...     block = b"x" * (64 << 20)
    >>> memory.peak_rss_mib >= memory.start_rss_mib > 0, memory.how in (KERNEL, SAMPLED)
    (True, True)
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from cdgt.pipeline.periodic import every

STATUS, CLEAR_REFS = Path("/proc/self/status"), Path("/proc/self/clear_refs")
SAMPLE_SECONDS = 0.02
KERNEL = "kernel high-water mark (VmHWM), reset at the run's start"
SAMPLED = f"largest RSS sampled every {int(SAMPLE_SECONDS * 1000)} ms"


@dataclass
class RssPeak:
    """The process's RSS when the run started and its peak during the run (MiB), and how the peak was measured."""

    start_rss_mib: float = 0.0
    peak_rss_mib: float = 0.0
    how: str = ""

    def as_dict(self) -> dict[str, float | str]:
        return {k: round(v, 1) if isinstance(v, float) else v for k, v in asdict(self).items()}


def _status_mib(field: str) -> float | None:
    """A kB field of /proc/self/status (VmRSS, VmHWM) in MiB; None where there is no /proc."""
    try:
        found = re.search(rf"^{field}:\s+(\d+) kB", STATUS.read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(found.group(1)) / 1024 if found else None


def rss_mib() -> float:
    """The process's resident set size now, in MiB."""
    now = _status_mib("VmRSS")
    if now is not None:
        return now
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def _reset_high_water_mark() -> bool:
    """Reset the kernel's peak RSS of this process to its current RSS (Linux >= 4.0); False where not allowed."""
    try:
        CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return _status_mib("VmHWM") is not None


@contextlib.contextmanager
def _sampled(peak: RssPeak) -> Iterator[None]:
    """Sample the RSS in a daemon thread until the block ends; the largest sample becomes `peak.peak_rss_mib`."""
    samples = [peak.start_rss_mib]
    try:
        with every(SAMPLE_SECONDS, lambda: samples.append(rss_mib()), "rss-sampler"):
            yield
    finally:
        peak.peak_rss_mib = max([*samples, rss_mib()])


@contextlib.contextmanager
def peak_rss() -> Iterator[RssPeak]:
    """Measure the peak RSS of the process while the block runs (see the module docstring); the RssPeak is
    filled in when the block ends, also when it raises."""
    peak = RssPeak(start_rss_mib=rss_mib())
    if _reset_high_water_mark():
        peak.how = KERNEL
        try:
            yield peak
        finally:
            peak.peak_rss_mib = max(_status_mib("VmHWM") or 0.0, rss_mib())
        return
    peak.how = SAMPLED
    with _sampled(peak):
        yield peak
