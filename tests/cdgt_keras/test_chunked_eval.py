"""The chunked evaluation path gives the dense path's figures: report, thresholds, MAP (issue 14)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from cdgt_keras import metrics as m
from cdgt_keras.chunked_eval import array_chunks, average_precisions, chunk_rows, chunked_report
from cdgt_keras.thresholds import MODES, apply_thresholds, tune_thresholds, tune_thresholds_chunks


def _case(seed: int, n: int = 83, num_labels: int = 19) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """Truth with empty labels and rows, scores with many ties (one decimal), float32 thresholds."""
    rng = np.random.default_rng(seed)
    y = (rng.random((n, num_labels)) < 0.2).astype(np.int64)
    y[:, [3, min(7, num_labels - 1)]] = 0  # labels without a positive
    y[:5] = 0  # rows without a positive
    scores = np.round(rng.random((n, num_labels)), 1)
    scores[10] = 0.5  # a constant row: every label tied
    scores[:, -2] = scores[:, -1]  # two tied columns
    thresholds = np.round(rng.uniform(0.2, 0.8, num_labels), 2).astype(np.float32)
    return sp.csr_matrix(y), scores, thresholds


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for group in a:
        assert a[group].keys() == b[group].keys(), group
        for key, value in a[group].items():
            other = b[group][key]
            assert (math.isnan(value) and math.isnan(other)) or value == pytest.approx(other, rel=1e-12, abs=1e-15), (
                group, key, value, other)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("rows", [1, 7, 40, 83, 500])
def test_chunked_report_equals_the_dense_report(seed: int, rows: int):
    y, scores, tau = _case(seed)
    head, tail = np.array([0, 1, 2, 3]), np.array([7, 11, 12, 15, 16, 17, 18])
    props = m.propensities(np.asarray(y.sum(axis=0)).ravel() + 1, y.shape[0])
    dense = m.report(y, scores, apply_thresholds(scores, tau), head_labels=head, tail_labels=tail,
                     propensities=props, ks=(1, 3, 5))
    chunked = chunked_report(y, array_chunks(scores, rows), tau, head_labels=head, tail_labels=tail,
                             propensities=props, ks=(1, 3, 5))
    _same(chunked, dense)


def test_small_groups_empty_groups_float32_and_no_propensities():
    y, scores, tau = _case(3, n=30, num_labels=6)
    scores = scores.astype(np.float32)
    for head, tail in (([0, 1], []), ([], [2]), ([5], [0, 1, 2, 3, 4])):  # groups smaller than k, or empty
        dense = m.report(y, scores, apply_thresholds(scores, tau), head_labels=head, tail_labels=tail, ks=(1, 5))
        _same(chunked_report(y, array_chunks(scores, 4), tau, head_labels=head, tail_labels=tail, ks=(1, 5)), dense)


def test_map_per_label_equals_the_dense_map():
    y, scores, _ = _case(4)
    pos = scores[y.nonzero()]  # csr order: row by row, sorted columns
    ap = average_precisions(y, array_chunks(scores, 9), pos)
    assert np.isnan(ap[3]) and np.isnan(ap[7])
    for label in np.flatnonzero(~np.isnan(ap)):
        assert ap[label] == pytest.approx(m.mean_average_precision(y[:, [label]], scores[:, [label]]), rel=1e-12)
    assert np.nanmean(ap) == pytest.approx(m.mean_average_precision(y, scores), rel=1e-12)


def test_without_map_skips_the_second_pass():
    y, scores, tau = _case(5)
    passes = []

    def chunks():
        passes.append(1)
        return array_chunks(scores, 10)()

    out = chunked_report(y, chunks, tau, head_labels=[0], tail_labels=[1], with_map=False)
    assert len(passes) == 1 and math.isnan(out["overall"]["map"])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("rows", [1, 13, 83])
def test_thresholds_tuned_on_chunks_equal_the_dense_tuning(mode: str, rows: int):
    y, scores, _ = _case(6)
    dense = tune_thresholds(scores, y, mode=mode, min_positives=3)
    chunked = tune_thresholds_chunks(array_chunks(scores, rows)(), y, mode=mode, min_positives=3)
    np.testing.assert_array_equal(chunked, dense)


def test_chunks_must_cover_the_truth():
    y, scores, tau = _case(7)
    with pytest.raises(ValueError, match="cover 80 rows, the truth has 83"):
        chunked_report(y, array_chunks(scores[:80], 16), tau, head_labels=[0], tail_labels=[1])
    with pytest.raises(ValueError, match="does not match"):
        tune_thresholds_chunks(iter([scores[:, :3]]), y, mode="global")


def test_chunk_rows_bound_the_chunk():
    assert chunk_rows(18_632, multiple=256) == 256  # one batch: about 4.8M scores
    assert chunk_rows(100, multiple=256) * 100 <= 1 << 22


def test_evaluate_model_chunked_equals_dense_on_a_model(monkeypatch: pytest.MonkeyPatch):
    """The model predicted by chunks of whole batches gives the dense evaluation, thresholds included."""
    from cdgt_keras import evaluation
    from cdgt_keras.config import CDGTConfig
    from cdgt_keras.model import CDGTModel
    from cdgt_keras.synthetic import synthetic_splits

    splits = synthetic_splits(num_examples=300, num_labels=12, seed=1)
    train, validation, test = splits["train"], splits["validation"], splits["test"]
    counts = np.asarray(train.labels.sum(axis=0)).ravel()
    config = CDGTConfig(n_players=2, encoder_hidden=(8,), head_hidden=(), batch_size=16, thresholds="shrunk")
    model = CDGTModel(config, counts / train.num_examples + 1e-3)
    dense = evaluation.evaluate_model(model, validation, test, counts, train.num_examples, config, chunked=False)
    by_chunks = evaluation.evaluate_chunks(
        evaluation.predict_chunks(model, validation, 16, rows=32), validation,
        evaluation.predict_chunks(model, test, 16, rows=48), test, counts, train.num_examples, config)
    np.testing.assert_array_equal(by_chunks.thresholds, dense.thresholds)
    _same(by_chunks.report, dense.report)
    monkeypatch.setattr(evaluation, "DENSE_LIMIT", 10)  # the default switch, for models and for arrays
    _same(evaluation.evaluate_model(model, validation, test, counts, train.num_examples, config).report,
          dense.report)
    probs = [evaluation.predict_probs(model, s, 16) for s in (validation, test)]
    _same(evaluation.evaluate_probs(probs[0], validation, probs[1], test, counts, train.num_examples, config).report,
          dense.report)


def test_several_rules_at_once_equal_one_report_each():
    """chunked_reports: one report per rule, each the dense report under its thresholds; MAP and top-k once."""
    from cdgt_keras.chunked_eval import chunked_reports

    y, scores, tau = _case(8)
    rules = {"own": tau, "low": np.full(tau.size, 0.25, np.float32), "high": np.full(tau.size, 0.85, np.float32)}
    out = chunked_reports(y, array_chunks(scores, 11), rules, head_labels=[0, 1], tail_labels=[17, 18])
    for rule, thresholds in rules.items():
        _same(out.reports[rule], m.report(y, scores, apply_thresholds(scores, thresholds), head_labels=[0, 1],
                                          tail_labels=[17, 18]))
        for ours, theirs in zip(out.counts[rule], m._f1_counts(y, apply_thresholds(scores, thresholds))):
            np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(out.top[0], m._dense_topk(scores, 5))


def test_sparse_score_matrices_give_the_dense_figures():
    """A peer's beam scores as csr (absent = 0) are evaluated chunk by chunk, with the dense array's figures."""
    import scipy.sparse as sp

    from cdgt_keras.chunked_eval import matrix_chunks

    y, scores, tau = _case(9)
    scores[scores < 0.6] = 0.0  # what a beam leaves unscored
    dense = chunked_report(y, array_chunks(scores, 83), tau, head_labels=[0], tail_labels=[5, 6])
    _same(chunked_report(y, matrix_chunks(sp.csr_matrix(scores), 10), tau, head_labels=[0], tail_labels=[5, 6]),
          dense)


def test_the_ranking_monitor_streams_the_dense_figures():
    """Validation P@k / PSP@k / nDCG@k each epoch from the streamed top 5 equal the dense matrix's figures."""
    from cdgt_keras.chunked_eval import top_k_chunks
    from cdgt_keras.config import CDGTConfig
    from cdgt_keras.data import MultiLabelData
    from cdgt_keras.learning import RankingMonitor

    y, scores, _ = _case(10)
    monitor = RankingMonitor(MultiLabelData(np.zeros((83, 2)), y, []), np.arange(19) + 1, 83, CDGTConfig())
    streamed = monitor.values(top_k_chunks(array_chunks(scores, 7), 5))
    assert streamed == monitor.values(scores)
