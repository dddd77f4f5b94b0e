"""Mean ± std over seeds: result files grouped by (data set, table row).

std is the population standard deviation (numpy's default, ddof=0) of the per-seed values. Where one row has
results under several run names (e.g. `cdgt` and `cdgt[epochs=2]`), the name with the most seeds is used.

Example:
    >>> r = [{"dataset": {"name": "d"}, "method": {"name": "m", "row": "m"}, "seed": s,
    ...       "metrics": {"overall": {"micro_f1": v}}, "timing": {}} for s, v in enumerate([0.5, 0.7])]
    >>> s = aggregate(r)[("d", "m")]
    >>> round(s.mean["overall/micro_f1"], 3), round(s.std["overall/micro_f1"], 3), s.n
    (0.6, 0.1, 2)
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Summary:
    """One table cell group: the run name used, seeds, and mean / std of every flattened metric."""

    method: str
    seeds: tuple[int, ...]
    mean: dict[str, float]
    std: dict[str, float]

    @property
    def n(self) -> int:
        return len(self.seeds)

    def get(self, key: str) -> tuple[float, float]:
        """(mean, std) of `key`, NaNs when it was not measured."""
        return self.mean.get(key, math.nan), self.std.get(key, math.nan)


def flatten(result: dict[str, Any]) -> dict[str, float]:
    """{"overall/micro_f1": ..., "tail/p_at_1": ..., "timing/train_seconds": ..., "timing/epoch_seconds": mean,
    "memory/peak_rss_mib": ...}, plus "grouped:overall/rare_f1" etc. for the reports under each other threshold
    rule."""
    out = {f"{row}/{k}": float(v) for row, values in result.get("metrics", {}).items() for k, v in values.items()
           if v is not None}
    for mode, rows in result.get("metrics_by_thresholds", {}).items():
        out.update({f"{mode}:{row}/{k}": float(v) for row, values in rows.items() for k, v in values.items()
                    if v is not None})
    for key, value in result.get("timing", {}).items():
        if isinstance(value, list):
            # the first epoch carries tracing / graph building; the overhead table uses the later ones
            later = value[1:] or value
            out[f"timing/{key}"] = float(np.mean(later)) if later else math.nan
        elif value is not None:
            out[f"timing/{key}"] = float(value)
    out.update({f"memory/{k}": float(v) for k, v in result.get("memory", {}).items() if isinstance(v, (int, float))})
    return out


def aggregate(results: list[dict[str, Any]]) -> dict[tuple[str, str], Summary]:
    """{(data set, row): Summary} over every result."""
    groups: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        groups[(r["dataset"]["name"], r["method"].get("row", r["method"]["name"]))][r["method"]["name"]].append(r)
    out = {}
    for key, by_name in groups.items():
        name, runs = max(by_name.items(), key=lambda item: (len(item[1]), item[0]))
        runs = sorted(runs, key=lambda r: r["seed"])
        flat = [flatten(r) for r in runs]
        keys = sorted({k for f in flat for k in f})
        values = {k: np.array([f.get(k, math.nan) for f in flat], dtype=np.float64) for k in keys}
        out[key] = Summary(name, tuple(r["seed"] for r in runs),
                           {k: float(np.mean(v)) for k, v in values.items()},
                           {k: float(np.std(v)) for k, v in values.items()})
    return out


def runs_of(results: list[dict[str, Any]], dataset: str, row: str) -> list[dict[str, Any]]:
    """The result dicts of one (data set, row), by seed, for the run name `aggregate` picked."""
    summary = aggregate([r for r in results if r["dataset"]["name"] == dataset
                         and r["method"].get("row", r["method"]["name"]) == row]).get((dataset, row))
    if summary is None:
        return []
    chosen = [r for r in results if r["dataset"]["name"] == dataset and r["method"]["name"] == summary.method]
    return sorted(chosen, key=lambda r: r["seed"])
