"""bench/tail_ceiling.py's table: which grid entry each column reports, against hand-picked answers."""

from __future__ import annotations

import json

from cdgt.bench.tail_ceiling import table


def _entry(w, p1, p5, rare, tail_sum, val_sum):
    return {"w": w, "test_p1": p1, "test_p5": p5, "test_rare_f1": rare, "test_tail_f1_sum": tail_sum,
            "val_tail_f1_sum": val_sum}


def test_the_table_reports_the_guarded_best_the_unguarded_best_and_validations_pick(tmp_path):
    picked = _entry([0.4, 0.2], 0.9, 0.5, 0.2, 10.0, 5.0)
    grid = [
        _entry([0.0, 0.0], 0.9, 0.5, 0.1, 12.0, 1.0),  # within the guard, the best tail F1 there
        _entry([0.2, 0.0], 0.9, 0.49, 0.3, 20.0, 2.0),  # P@5 below the pick's: the best without the guard
        _entry([0.6, 0.0], 0.89, 0.5, 0.25, 15.0, 9.0),  # P@1 below: what validation's tail F1 picks
    ]
    path = tmp_path / "ceiling_s3.json"
    path.write_text(json.dumps({"seed": 3, "num_labels": 100, "picked_figures": picked, "grid": grid}))
    row = table([str(path)]).splitlines()[2]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[0] == "3"
    assert cells[1] == "90.00 / 50.00 / 20.00"
    assert cells[2] == "[0, 0] +0.00 / +0.00 / -10.00 / +2.00"
    assert cells[3] == "[0.2, 0] +0.00 / -1.00 / +10.00 / +10.00"
    assert cells[4] == "[0.6, 0] -1.00 / +0.00 / +5.00 / +5.00"
