"""REPORT.md's learner parts: the learner grid's columns, the text-features grid (`cdgt bench features`) and the
hand-written reading of both (OUTPUT/learner_notes.md).

Example:
    >>> [name for name, _ in LEARNER_COLUMNS][:3]
    ['P@1', 'P@5', 'PSP@5']
"""

from __future__ import annotations

import json
from pathlib import Path

from cdgt.bench.features import format_rows
from cdgt_keras.metrics import HEADLINE_METRICS

# The learner grid's columns (display name, key in a run's JSON): the library's headline figures, then cost.
LEARNER_COLUMNS = [*((label, f"overall/{key}") for key, label in HEADLINE_METRICS.items()),
                   ("train s", "timing/train_seconds"), ("peak RSS MiB", "memory/peak_rss_mib"),
                   ("epochs", "timing/epochs_run")]


def section_features(output: Path) -> list[str]:
    """The text-features grid, one table per data set and peer, if it was run."""
    runs = [json.loads(p.read_text()) for p in sorted((output / "features").glob("*.json"))]
    lines = []
    for dataset, peer in sorted({(r["dataset"], r["peer"]) for r in runs}):
        rows = [r for r in runs if (r["dataset"], r["peer"]) == (dataset, peer)]
        lines += [f"### Text features: {dataset}, {peer} (one run each)", "",
                  f"Reproduce: `cdgt bench features --dataset {dataset} --peer {peer}`", "", *format_rows(rows), ""]
    return lines


def section_learner(output: Path) -> list[str]:
    """The text-features tables and the notes that read the learner grid (after the grid's own tables)."""
    notes = output / "learner_notes.md"
    return section_features(output) + ([notes.read_text().strip(), ""] if notes.is_file() else [])
