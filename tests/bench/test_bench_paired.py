"""`cdgt.bench.paired`: resampled metrics against cdgt_keras.metrics and against explicitly repeated rows; the
paired interval; the rows' file and the checks made before anything is reported."""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp

from cdgt.bench.paired import METRICS, bias_corrected_interval, paired_difference, resampled_metrics, row_weights
from cdgt.bench.rows import RowOutcomes, load_rows, rows_path, save_rows
from cdgt_keras.metrics import macro_f1, micro_f1, precision_at_k, psp_at_k, rare_f1


def _case(seed: int, n: int = 40, num_labels: int = 12):
    rng = np.random.default_rng(seed)
    truth = sp.csr_matrix(rng.random((n, num_labels)) < 0.2, dtype=np.int8)
    scores = rng.random((n, num_labels))  # distinct: no ties in the top k
    decided = sp.csr_matrix(scores > 0.7, dtype=np.int8)
    rows = RowOutcomes(np.argsort(-scores, axis=1)[:, :5], decided)
    props = rng.uniform(0.2, 0.9, num_labels)
    return truth, scores, rows, props, np.array([3, 7, 8, 11])


def _library(truth, scores, decided, props, tail) -> dict[str, float]:
    return {"p_at_1": precision_at_k(truth, scores, 1), "p_at_5": precision_at_k(truth, scores, 5),
            "psp_at_5": psp_at_k(truth, scores, 5, props), "micro_f1": micro_f1(truth, decided),
            "macro_f1": macro_f1(truth, decided), "rare_f1": rare_f1(truth, decided, tail)}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_row_once_gives_the_librarys_metrics(seed):
    truth, scores, rows, props, tail = _case(seed)
    got = resampled_metrics(truth, rows, 1.0 / props, tail, np.ones((1, truth.shape[0])))
    want = _library(truth, scores, rows.decided, props, tail)
    for _, key in METRICS:
        assert got[key][0] == pytest.approx(want[key], abs=1e-12), key


@pytest.mark.parametrize("seed", [0, 3])
def test_a_weighting_is_the_metrics_of_the_rows_repeated(seed):
    """A draw that takes row i w_i times scores as the split built by repeating row i w_i times."""
    truth, scores, rows, props, tail = _case(seed)
    weights = row_weights(truth.shape[0], 4, seed)[1:]
    got = resampled_metrics(truth, rows, 1.0 / props, tail, weights)
    for b, w in enumerate(weights.astype(int)):
        take = np.repeat(np.arange(truth.shape[0]), w)
        want = _library(truth[take], scores[take], rows.decided[take], props, tail)
        for _, key in METRICS:
            assert got[key][b] == pytest.approx(want[key], abs=1e-12), (key, b)


def test_row_weights_draw_n_rows_and_start_with_the_split_itself():
    w = row_weights(30, 5, 0)
    assert w.shape == (6, 30) and (w[0] == 1).all() and (w.sum(axis=1) == 30).all()
    assert not (w[1:] == 1).all()


def test_a_run_against_itself_differs_by_nothing_on_every_draw():
    truth, _, rows, props, tail = _case(4)
    out = paired_difference(truth, 1.0 / props, tail, [rows], [rows], resamples=100, seed=1)
    assert all(out[key]["difference"] == out[key]["low"] == out[key]["high"] == 0.0 for _, key in METRICS)


def test_the_difference_is_of_the_seeds_means_and_its_interval_holds_it():
    truth, _, rows, props, tail = _case(5)
    _, _, other, _, _ = _case(6)
    out = paired_difference(truth, 1.0 / props, tail, [rows, other], [other], resamples=200, seed=0)
    one = resampled_metrics(truth, rows, 1.0 / props, tail, np.ones((1, truth.shape[0])))
    two = resampled_metrics(truth, other, 1.0 / props, tail, np.ones((1, truth.shape[0])))
    for _, key in METRICS:
        assert out[key]["ours"] == pytest.approx((one[key][0] + two[key][0]) / 2)
        assert out[key]["difference"] == pytest.approx((one[key][0] - two[key][0]) / 2)
        assert out[key]["low"] <= out[key]["high"]


def test_rows_that_do_not_fit_the_labels_are_an_error():
    truth, _, rows, props, tail = _case(0)
    with pytest.raises(ValueError, match="do not fit the test labels"):
        resampled_metrics(truth[:-1], rows, 1.0 / props, tail, np.ones((1, truth.shape[0] - 1)))


def test_rows_round_trip_and_a_missing_file_names_itself(tmp_path):
    _, _, rows, _, _ = _case(0)
    path = rows_path(tmp_path / "results" / "debtags__recommended__s0.json")
    assert path == tmp_path / "rows" / "debtags__recommended__s0.npz"
    save_rows(path, rows)
    back = load_rows(path)
    assert (back.top == rows.top).all() and (back.decided != rows.decided).nnz == 0
    with pytest.raises(FileNotFoundError, match=r"bibtex__omikuji__s1\.npz: no test rows"):
        load_rows(tmp_path / "rows" / "bibtex__omikuji__s1.npz")


def test_a_point_beyond_every_draw_still_gets_a_finite_interval_from_the_draws():
    draws = np.linspace(0.0, 1.0, 101)
    low, high = bias_corrected_interval(2.0, draws)
    assert 0.0 <= low <= high <= 1.0 and np.isfinite([low, high]).all()
    assert bias_corrected_interval(0.3, np.array([])) == (0.3, 0.3)


def test_the_paired_file_is_named_like_the_result_files(tmp_path):
    from cdgt.bench.paired import paired_path

    assert paired_path(tmp_path, "debtags", "recommended") == tmp_path / "paired" / "debtags__recommended.json"
    # the canonical name (keys sorted), as the result files take it
    name = paired_path(tmp_path, "bibtex", "recommended[epochs=1,n_players=1,encoder_hidden=1]").name
    assert name == "bibtex__recommended[encoder_hidden=1,epochs=1,n_players=1].json"
    keys = ("alpha", "beta", "overlap", "dropout", "input_dropout", "logit_adjustment", "label_epoch_growth",
            "warmup_fraction", "encoder_learning_rate", "wide_learning_rate", "focal_gamma", "asl_clip")
    name = paired_path(tmp_path, "bibtex", "recommended[" + ",".join(f"{k}=0.123457" for k in keys) + "]").name
    assert re.fullmatch(r"bibtex__recommended\[[0-9a-f]{16}\]\.json", name), name  # too long: the digest


def test_the_report_holds_each_set_to_its_own_criteria(tmp_path):
    import json

    from cdgt.bench.paired import section_paired

    def figures(d: float, low: float, high: float) -> dict:
        return {"peer_name": "omikuji", "ours": 0.5 + d, "peer": 0.5, "difference": d, "low": low, "high": high,
                "bootstrap_mean": d}

    best = {key: figures(0.01, 0.001, 0.03) for _, key in METRICS}
    (tmp_path / "paired").mkdir()
    for name in ("yeast", "bibtex", "corel5k"):
        (tmp_path / "paired" / f"{name}__recommended.json").write_text(json.dumps(
            {"dataset": name, "best_peer": best, "test_rows": 10, "seeds": [0], "resamples": 5}))
    (tmp_path / "paired" / "bibtex__recommended[n_players=5].json").write_text(json.dumps(
        {"dataset": "bibtex", "ours": "recommended[n_players=5]", "best_peer": best, "test_rows": 10, "seeds": [0],
         "resamples": 5}))
    rows = {tuple(c.strip() for c in line.split("|")[1:3]): line for line in section_paired(tmp_path)
            if line.startswith("| ")}
    assert rows[("bibtex", "PSP@5")].endswith("| +2 | straddles |")  # +1.0 in [+0.1, +3.0] against +2
    assert rows[("bibtex", "P@1")].endswith("| +0 | above |")
    assert rows[("yeast", "Macro-F1")].endswith("| +0 | above |")
    assert rows[("yeast", "P@1")].endswith("| - | - |")  # not one of yeast's criteria
    assert rows[("corel5k", "Micro-F1")].endswith("| - | - |")
    assert rows[("bibtex, `recommended[n_players=5]`", "P@1")].endswith("| +0 | above |")  # another `ours`: named
