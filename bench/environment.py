"""Where a benchmark ran: package versions, git commit, machine (CPU model, cores, RAM). Recorded in every run.

Example:
    >>> sorted(environment())[:3]
    ['git_commit', 'machine', 'packages']
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("cdgt", "tensorflow", "keras", "numpy", "scipy", "scikit-learn", "omikuji", "libmultilabel",
            "liblinear-multicore")
REPO = Path(__file__).resolve().parents[1]


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ram_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _git_commit() -> str | None:
    try:  # read-only
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


@functools.lru_cache(maxsize=1)
def environment() -> dict[str, Any]:
    """{"packages": {name: version}, "machine": {...}, "python": ..., "git_commit": ...}."""
    return {
        "packages": {name: _version(name) for name in PACKAGES},
        "machine": {"cpu": _cpu_model(), "cores": os.cpu_count(), "ram_gib": _ram_gib(),
                    "platform": platform.platform()},
        "python": platform.python_version(),
        "git_commit": _git_commit(),
    }
