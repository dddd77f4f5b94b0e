"""Metrics (SPEC §7) against scikit-learn, against direct loops, and on hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import average_precision_score, f1_score
from sklearn.metrics import hamming_loss as sk_hamming

from cdgt_keras import metrics as m


def _random_case(seed: int, n: int = 80, num_labels: int = 17) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = (rng.random((n, num_labels)) < 0.2).astype(np.int64)
    y[:, 3] = 0  # no positive in truth (but predicted below)
    y[:, 5] = 0  # no positive in truth nor in prediction
    y[:4] = 0  # examples without any positive
    scores = np.round(rng.random((n, num_labels)), 1)  # one decimal: plenty of ties
    pred = (rng.random((n, num_labels)) < 0.25).astype(np.int64)
    pred[:, 5] = 0
    return y, scores, pred


def _stable_rank(scores: np.ndarray) -> np.ndarray:
    return np.argsort(-scores, axis=1, kind="stable")  # ties → lower label id first


def _topk_pair(scores: np.ndarray, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The top k as an (indices, scores) pair, columns shuffled so the metric must re-sort them."""
    ids = _stable_rank(scores)[:, :k]
    perm = np.random.default_rng(seed).permutation(k)
    ids = ids[:, perm]
    return ids, np.take_along_axis(scores, ids, axis=1)


def _loop_p(y, scores, k):
    rank = _stable_rank(scores)
    return np.mean([y[i, rank[i, :k]].sum() / k for i in range(len(y))])


def _loop_ndcg(y, scores, k):
    vals, rank = [], _stable_rank(scores)
    for i in range(len(y)):
        npos = int(y[i].sum())
        if npos == 0:
            vals.append(0.0)
            continue
        top = rank[i, :k]
        dcg = sum(y[i, j] / math.log2(r + 2) for r, j in enumerate(top))
        idcg = sum(1 / math.log2(r + 2) for r in range(min(k, npos)))
        vals.append(dcg / idcg)
    return float(np.mean(vals))


def _loop_psp(y, scores, k, p):
    num = den = 0.0
    rank = _stable_rank(scores)
    for i in range(len(y)):
        top = rank[i, :k]
        num += sum(y[i, j] / p[j] for j in top)
        den += sum(sorted((1 / p[j] for j in np.flatnonzero(y[i])), reverse=True)[:k])
    return num / den


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("sparse", [False, True])
def test_f1_and_hamming_match_sklearn(seed, sparse):
    y, _, pred = _random_case(seed)
    yt, yp = (sp.csr_matrix(y), sp.csr_matrix(pred)) if sparse else (y, pred)
    assert m.micro_f1(yt, yp) == pytest.approx(f1_score(y, pred, average="micro"))
    keep = (y.sum(0) + pred.sum(0)) > 0
    assert not keep[5] and keep[3]
    assert m.macro_f1(yt, yp) == pytest.approx(f1_score(y[:, keep], pred[:, keep], average="macro"))
    assert m.hamming_loss(yt, yp) == pytest.approx(sk_hamming(y, pred))
    tail = [0, 3, 5, 7]
    assert m.rare_f1(yt, yp, tail) == pytest.approx(f1_score(y[:, tail], pred[:, tail], average="micro"))


def test_f1_degenerate_cases():
    zeros = np.zeros((3, 4), dtype=int)
    assert m.micro_f1(zeros, zeros) == 0.0
    assert m.macro_f1(zeros, zeros) == 0.0
    assert m.hamming_loss(zeros, zeros) == 0.0


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("sparse", [False, True])
def test_map_matches_sklearn(seed, sparse):
    y, scores, _ = _random_case(seed)
    with_pos = np.flatnonzero(y.any(axis=0))
    expected = np.mean([average_precision_score(y[:, j], scores[:, j]) for j in with_pos])
    assert m.mean_average_precision(sp.csr_matrix(y) if sparse else y, scores) == pytest.approx(expected)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("k", [1, 3, 5])
def test_ranking_metrics_match_loops(seed, k):
    y, scores, _ = _random_case(seed)
    p = m.propensities(np.random.default_rng(seed).integers(0, 50, y.shape[1]), num_train=500)
    pair = _topk_pair(scores, 7, seed)
    for truth in (y, sp.csr_matrix(y), sp.csc_matrix(y)):
        for s in (scores, pair):
            assert m.precision_at_k(truth, s, k) == pytest.approx(_loop_p(y, scores, k))
            assert m.ndcg_at_k(truth, s, k) == pytest.approx(_loop_ndcg(y, scores, k))
            assert m.psp_at_k(truth, s, k, p) == pytest.approx(_loop_psp(y, scores, k, p))


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(1, 9),
    st.integers(1, 9),
    st.integers(0, 2**31 - 1),
)
def test_dense_topk_ties_property(n, num_labels, k, seed):
    """Heavily tied integer scores: the ranked hits equal those of a stable sort on -scores."""
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 3, (n, num_labels)).astype(float)
    y = (rng.random((n, num_labels)) < 0.5).astype(int)
    assert m.precision_at_k(y, scores, k) == pytest.approx(_loop_p(y, scores, k))
    assert m.ndcg_at_k(y, scores, k) == pytest.approx(_loop_ndcg(y, scores, k))


@pytest.mark.parametrize("constant_rows", [0, 5])
def test_dense_topk_wide_rows(constant_rows):
    """Wide rows take the block-maximum prefilter; rows of equal scores force the exact partition."""
    rng = np.random.default_rng(constant_rows)
    scores = np.round(rng.random((30, 3000)), 3)  # ties among the top scores
    scores[:constant_rows] = 0.25
    scores[7, 100:103] = np.nan  # NaN ranks last (as argsort of -scores puts it)
    y = (rng.random(scores.shape) < 0.01).astype(int)
    y[np.arange(30), _stable_rank(scores)[:, 2]] = 1
    for k in (1, 5, 20):
        assert m.precision_at_k(y, scores, k) == pytest.approx(_loop_p(y, scores, k))
        assert m.ndcg_at_k(y, scores, k) == pytest.approx(_loop_ndcg(y, scores, k))


def test_ties_go_to_lower_label_id():
    scores = np.array([[0.1, 0.5, 0.5, 0.5, 0.9]])
    # top 2 = label 4 (0.9), then label 1 (lowest id among the tied 0.5s)
    assert m.precision_at_k(np.array([[0, 1, 0, 0, 0]]), scores, 2) == 0.5
    assert m.precision_at_k(np.array([[0, 0, 1, 1, 0]]), scores, 2) == 0.0
    flat = np.full((1, 4), 0.3)
    assert m.precision_at_k(np.array([[1, 0, 0, 0]]), flat, 1) == 1.0
    assert m.precision_at_k(np.array([[0, 0, 0, 1]]), flat, 1) == 0.0
    # top-k pair given out of order: (3, 0.5) and (1, 0.5) tie, label 1 wins
    pair = (np.array([[3, 1]]), np.array([[0.5, 0.5]]))
    assert m.precision_at_k(np.array([[0, 1, 0, 0]]), pair, 1) == 1.0
    assert m.precision_at_k(np.array([[0, 0, 0, 1]]), pair, 1) == 0.0


def test_precision_hand_case():
    y = np.array([[1, 0, 1, 0], [0, 0, 0, 0]])
    scores = np.array([[0.9, 0.8, 0.7, 0.1], [0.9, 0.8, 0.7, 0.1]])
    # example 0: top 2 = {0, 1}, one positive → 1/2; example 1 has no positive → 0; mean 0.25
    assert m.precision_at_k(y, scores, 2) == pytest.approx(0.25)


def test_ndcg_hand_case():
    y = np.array([[0, 1, 1, 0]])
    scores = np.array([[0.9, 0.8, 0.7, 0.1]])
    # DCG@3 = 0/log2(2) + 1/log2(3) + 1/log2(4) = 0.63093 + 0.5 = 1.13093
    # IDCG@3 over min(3, 2) = 2 ranks = 1 + 1/log2(3) = 1.63093 → nDCG = 0.69342
    assert m.ndcg_at_k(y, scores, 3) == pytest.approx(0.693426, abs=1e-6)


def test_psp_hand_case_is_normalised_over_the_set():
    p = np.array([0.5, 0.25, 1.0])  # 1/p = 2, 4, 1
    y = np.array([[1, 1, 0], [0, 0, 1]])
    scores = np.array([[0.9, 0.1, 0.0], [0.0, 0.1, 0.9]])
    # example 0: top 1 = label 0 → 2, best = 4 (label 1); example 1: top 1 = label 2 → 1, best = 1
    # PSP@1 = (2 + 1) / (4 + 1) = 0.6 (a per-example mean would give (0.5 + 1) / 2 = 0.75)
    assert m.psp_at_k(y, scores, 1, p) == pytest.approx(0.6)


def test_propensities_hand_case():
    # M = 100, A = 0.55, B = 1.5: C = (ln 100 - 1) * 2.5^0.55 = 3.605170 * 1.655263 = 5.967505
    # N = 0:  p = 1 / (1 + C * 1.5^-0.55)  = 1 / (1 + 5.967505 * 0.800110) = 0.173170
    # N = 10: p = 1 / (1 + C * 11.5^-0.55) = 1 / (1 + 5.967505 * 0.260985) = 0.391017
    p = m.propensities(np.array([0, 10]), num_train=100)
    np.testing.assert_allclose(p, [0.173170, 0.391017], atol=2e-6)
    q = m.propensities(np.array([10]), num_train=100, a=0.5, b=0.4)
    assert q[0] == pytest.approx(1 / (1 + (math.log(100) - 1) * 1.4**0.5 * 10.4**-0.5))


def test_map_hand_case():
    y = np.array([[1], [0], [1], [0]])
    scores = np.array([[0.9], [0.8], [0.7], [0.6]])
    # positives at ranks 1 and 3: AP = (1/1 + 2/3) / 2 = 0.83333
    assert m.mean_average_precision(y, scores) == pytest.approx(5 / 6)
    # tied scores form one threshold: ranks 1 and {2,3} tied → AP = (1/1 + 2/3) / 2 again
    tied = np.array([[0.9], [0.7], [0.7], [0.6]])
    assert m.mean_average_precision(y, tied) == pytest.approx(5 / 6)


def test_rare_f1_hand_case():
    y = np.array([[1, 1, 0, 1], [0, 1, 1, 0]])
    pred = np.array([[1, 0, 1, 1], [1, 1, 1, 1]])
    # tail = {2, 3}: label 2 TP 1 FP 1; label 3 TP 1 FP 1 → TP 2, FP 2, FN 0 → F1 = 4 / (4 + 2) = 2/3
    assert m.rare_f1(y, pred, [2, 3]) == pytest.approx(2 / 3)
    # tail = {1}: TP 1, FN 1 → F1 = 2 / 3 as well; tail = {0}: TP 1, FP 1 → 2/3; tail = {} → 0
    assert m.rare_f1(y, pred, [1]) == pytest.approx(2 / 3)
    assert m.rare_f1(y, pred, []) == 0.0


def test_report_keys_and_subsets():
    y = np.array([[1, 0, 0, 1], [0, 1, 1, 0]])
    scores = np.array([[0.1, 0.9, 0.2, 0.8], [0.3, 0.4, 0.9, 0.1]])
    pred = np.array([[0, 1, 0, 1], [0, 0, 1, 0]])
    props = np.array([0.9, 0.8, 0.3, 0.2])
    r = m.report(y, scores, pred, head_labels=[0, 1], tail_labels=[2, 3], propensities=props, ks=(1, 3, 5))
    assert set(r) == {"overall", "head", "tail"}
    base = {"micro_f1", "macro_f1", "hamming_loss", "map"} | {
        f"{name}_at_{k}" for name in ("p", "ndcg", "psp") for k in (1, 3, 5)
    }
    assert set(r["overall"]) == base | {"rare_f1"}
    assert set(r["head"]) == set(r["tail"]) == base
    # tail columns {2, 3}: y = [[0, 1], [0... ]] → y = [[0,1],[1,0]], scores [[0.2,0.8],[0.9,0.1]]:
    # top 1 within the tail hits in both rows → P@1 = 1; overall row 0 top 1 is label 1 (miss) → P@1 = 0.5
    assert r["tail"]["p_at_1"] == 1.0
    assert r["overall"]["p_at_1"] == 0.5
    # head columns {0, 1}: y = [[1,0],[0,1]], scores [[0.1,0.9],[0.3,0.4]]: row 0 misses, row 1 hits → 0.5
    assert r["head"]["p_at_1"] == 0.5
    # head predictions [[0,1],[0,0]]: TP 0, FP 1, FN 2 → micro-F1 0; tail [[0,1],[1,0]] = truth → 1
    assert r["head"]["micro_f1"] == 0.0
    assert r["tail"]["micro_f1"] == 1.0
    assert r["overall"]["rare_f1"] == 1.0
    assert r["tail"]["hamming_loss"] == 0.0 and r["head"]["hamming_loss"] == pytest.approx(3 / 4)
    # a top-k pair ranks within the subset from the entries it holds; map needs full scores → NaN
    pair = _topk_pair(scores, 4)
    r2 = m.report(y, pair, pred, head_labels=[0, 1], tail_labels=[2, 3], propensities=props)
    assert math.isnan(r2["overall"]["map"])
    for row in ("overall", "head", "tail"):
        for key in r[row]:
            if key != "map":
                assert r2[row][key] == pytest.approx(r[row][key]), (row, key)
    table = m.format_report(r)
    assert "overall" in table and "tail" in table and "100.00" in table and "0.7500" in table


def test_topk_pair_needs_enough_columns():
    pair = _topk_pair(np.random.default_rng(0).random((3, 6)), 2)
    with pytest.raises(ValueError, match="k=3"):
        m.precision_at_k(np.zeros((3, 6)), pair, 3)


def test_large_sparse_case_runs():
    rng = np.random.default_rng(0)
    n, num_labels, k = 2000, 40_000, 5
    def sparse_01(nnz: int) -> sp.csr_matrix:
        rows, cols = rng.integers(0, n, nnz), rng.integers(0, num_labels, nnz)
        mat = sp.csr_matrix((np.ones(nnz), (rows, cols)), shape=(n, num_labels))
        mat.data[:] = 1.0  # duplicates were summed
        return mat

    y, pred = sparse_01(40_000), sparse_01(40_000)
    ids = rng.integers(0, num_labels, (n, k))
    has = np.diff(y.indptr) > 0
    ids[has, 0] = y.indices[y.indptr[:-1][has]]  # plant a hit at rank 1 where the example has a positive
    pair = (ids, rng.random((n, k)))
    counts = np.asarray(y.sum(0)).ravel()
    props = m.propensities(counts, num_train=n)
    labels = np.argsort(-counts, kind="stable")
    r = m.report(y, pair, pred, head_labels=labels[:8000], tail_labels=labels[-8000:], propensities=props)
    assert 0.0 < r["overall"]["p_at_1"] <= 1.0
    assert 0.0 <= r["tail"]["psp_at_5"] <= 1.0
    assert 0.0 <= r["overall"]["micro_f1"] <= 1.0
    dense_scores = np.zeros((200, num_labels), dtype=np.float32)
    dense_scores[np.arange(200), ids[:200, 0]] = 1.0
    assert m.precision_at_k(y[:200], dense_scores, 5) > 0.0


def test_player_subset_f1_counts_only_the_players_labels_in_the_subset():
    truth = sp.csr_matrix(np.array([[1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]))
    probs = np.array([[0.9, 0.1, 0.2], [0.6, 0.7, 0.1], [0.2, 0.9, 0.3]])  # a player owning labels 1, 2 and 3
    labels, thresholds = np.array([1, 2, 3]), np.array([0.5, 0.5, 0.5, 0.5])
    n_labels, positives, f1 = m.player_subset_f1(probs, labels, truth, thresholds, subset=np.array([0, 1, 2]))
    assert (n_labels, positives) == (2, 4)
    assert f1 == pytest.approx(f1_score(truth.toarray()[:, [1, 2]], probs[:, :2] > 0.5, average="micro"))
    assert m.player_subset_f1(probs, labels, truth, thresholds, subset=np.array([0])) == (0, 0, None)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("name", ["p_at_1", "p_at_3", "p_at_5", "psp_at_1", "psp_at_5", "ndcg_at_5"])
def test_ranking_rows_average_to_the_metric_on_dense_and_top_k_scores(seed: int, name: str) -> None:
    y, scores, _ = _random_case(seed)
    props = m.propensities(y.sum(0) + 1, y.shape[0])
    k = int(name[-1])
    whole = {"p": lambda s: m.precision_at_k(y, s, k), "psp": lambda s: m.psp_at_k(y, s, k, props),
             "ndcg": lambda s: m.ndcg_at_k(y, s, k)}[name.split("_")[0]]
    order = np.argsort(-scores, axis=1, kind="stable")[:, :5]
    for given_scores in (scores, (order, np.take_along_axis(scores, order, axis=1))):
        rows = m.ranking_rows(y, given_scores, name, props)
        assert rows.shape == (y.shape[0],)
        assert rows.mean() == pytest.approx(whole(given_scores), abs=1e-12)


def test_ranking_rows_hand_values() -> None:
    y = np.array([[0, 1, 1], [1, 0, 0]])
    scores = np.array([[0.9, 0.8, 0.1], [0.1, 0.2, 0.3]])
    np.testing.assert_allclose(m.ranking_rows(y, scores, "p_at_2"), [0.5, 0.0])
    # nDCG@2: row 0 hits at rank 2 (1 / log2 3) over the ideal 1 + 1 / log2 3; row 1 no hit
    np.testing.assert_allclose(m.ranking_rows(y, scores, "ndcg_at_2"),
                               [(1 / math.log2(3)) / (1 + 1 / math.log2(3)), 0.0])
    # PSP@2 with 1/p = (2, 4, 8): row 0 gains 4 of its best 12, row 1 0 of its best 2; the set's 4 / 14, spread
    # over 2 rows
    np.testing.assert_allclose(m.ranking_rows(y, scores, "psp_at_2", np.array([0.5, 0.25, 0.125])),
                               [4 * 2 / 14, 0.0])
    with pytest.raises(ValueError, match="needs propensities"):
        m.ranking_rows(y, scores, "psp_at_2")
