"""Decision thresholds (SPEC §4): hand cases, a brute-force cross-check, and the min_positives rule."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import f1_score

from cdgt_keras.thresholds import apply_thresholds, default_grid, tune_thresholds


def _three_label_case() -> tuple[np.ndarray, np.ndarray]:
    """10 examples; label 0: 5 positives at 0.455, 5 negatives at 0.255; label 1: 2 positives at 0.055,
    8 negatives at 0.012; label 2: 5 positives at 0.955, 5 negatives at 0.655 (no value on the grid)."""
    y = np.zeros((10, 3), dtype=int)
    y[:5, 0] = 1
    y[:2, 1] = 1
    y[:5, 2] = 1
    probs = np.empty((10, 3))
    probs[:, 0] = np.where(y[:, 0] == 1, 0.455, 0.255)
    probs[:, 1] = np.where(y[:, 1] == 1, 0.055, 0.012)
    probs[:, 2] = np.where(y[:, 2] == 1, 0.955, 0.655)
    return probs, y


def test_fixed_is_one_half():
    probs, y = _three_label_case()
    taus = tune_thresholds(probs, y, mode="fixed")
    assert taus.dtype == np.float32 and taus.shape == (3,)
    np.testing.assert_array_equal(taus, 0.5)


def test_global_hand_case():
    probs, y = _three_label_case()
    # 12 positives. Micro-F1 = 2·TP / (12 + #predicted) per tau band:
    #   [0.66, 0.95]: TP 5,  PP 5  → 10/17 = 0.588     [0.46, 0.65]: TP 5,  PP 10 → 10/22 = 0.455
    #   [0.26, 0.45]: TP 10, PP 15 → 20/27 = 0.741     [0.06, 0.25]: TP 10, PP 20 → 20/32 = 0.625
    #   [0.02, 0.05]: TP 12, PP 22 → 24/34 = 0.706     0.01:         TP 12, PP 30 → 24/42 = 0.571
    # best band [0.26, 0.45]; ties go to the highest tau → 0.45 for every label
    taus = tune_thresholds(probs, y, mode="global")
    np.testing.assert_allclose(taus, 0.45, rtol=1e-6)
    assert len(set(taus.tolist())) == 1


def test_ties_go_to_the_highest_tau():
    probs, y = _three_label_case()
    # 0.3 and 0.4 both lie in the best band [0.26, 0.45]
    assert tune_thresholds(probs, y, mode="global", grid=[0.4, 0.3, 0.1])[0] == pytest.approx(0.4)


def test_per_label_respects_min_positives():
    probs, y = _three_label_case()
    # label 2 (5 positives) alone: F1 = 1 on [0.66, 0.95] → 0.95; label 0 (5): F1 = 1 on [0.26, 0.45] → 0.45;
    # label 1 has 2 positives < 5 → keeps the global 0.45 (its own optimum would be 0.05)
    np.testing.assert_allclose(tune_thresholds(probs, y, mode="per_label"), [0.45, 0.45, 0.95], rtol=1e-6)
    # with min_positives = 2 label 1 gets its own: F1 = 1 on [0.02, 0.05] → 0.05
    taus = tune_thresholds(probs, sp.csr_matrix(y), mode="per_label", min_positives=2)
    np.testing.assert_allclose(taus, [0.45, 0.05, 0.95], rtol=1e-6)
    # with min_positives = 6 nobody qualifies → all global
    np.testing.assert_allclose(tune_thresholds(probs, y, min_positives=6), 0.45, rtol=1e-6)


def test_grouped_tunes_one_tau_for_the_rare_labels():
    probs, y = _three_label_case()
    # labels 0 and 2 (5 positives each) get their own taus as in per_label: 0.45 and 0.95. Label 1 (2 positives
    # < 5) is the whole rare group: its pooled F1 is 1 on [0.02, 0.05] → 0.05, where per_label gives it the
    # global 0.45 and it is never predicted.
    np.testing.assert_allclose(tune_thresholds(probs, y, mode="grouped"), [0.45, 0.05, 0.95], rtol=1e-6)
    # a group of two: labels 0 and 1 below min_positives 6, label 2 too → everyone pools → the global tau
    np.testing.assert_allclose(tune_thresholds(probs, y, mode="grouped", min_positives=6), 0.45, rtol=1e-6)
    # a rare group without validation positives keeps the global tau
    y0 = y.copy()
    y0[:, 1] = 0
    assert tune_thresholds(probs, y0, mode="grouped")[1] == tune_thresholds(probs, y0, mode="global")[1]


def test_grouped_pools_the_rare_labels():
    # 20 examples. Rare labels 0 and 1 (2 positives each; min_positives 5): label 0 positives at 0.305, negatives
    # 0.025; label 1 positives at 0.085, negatives 0.015. Frequent label 2: 8 positives at 0.905, 12 negatives
    # at 0.095. Pooled over {0, 1}: tau in [0.03, 0.08] → TP 4 = PP 4 = P 4 → F1 1; so the group's tau is 0.08.
    # Globally (P = 12): [0.10, 0.30] → TP 10, PP 10 → 20/22; 0.09 → TP 10, PP 22; [0.03, 0.08] → TP 12,
    # PP 24 → 24/36; so the global tau is 0.30 and label 1 is never predicted under per_label.
    y = np.zeros((20, 3), dtype=int)
    y[:2, 0] = y[2:4, 1] = 1
    y[:8, 2] = 1
    probs = np.zeros((20, 3))
    probs[:, 0] = np.where(y[:, 0] == 1, 0.305, 0.025)
    probs[:, 1] = np.where(y[:, 1] == 1, 0.085, 0.015)
    probs[:, 2] = np.where(y[:, 2] == 1, 0.905, 0.095)
    np.testing.assert_allclose(tune_thresholds(probs, y, mode="grouped"), [0.08, 0.08, 0.90], rtol=1e-6)
    np.testing.assert_allclose(tune_thresholds(probs, y, mode="per_label"), [0.30, 0.30, 0.90], rtol=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n, num_labels = 120, 9
    y = (rng.random((n, num_labels)) < np.linspace(0.02, 0.4, num_labels)).astype(int)
    probs = np.clip(0.35 * y + rng.random((n, num_labels)) * 0.7, 0, 1).astype(np.float32)
    grid = default_grid().astype(np.float32)

    def best(scores: np.ndarray) -> float:
        return float(grid[len(scores) - 1 - int(np.argmax(scores[::-1]))])  # highest tau among ties

    def f1(truth: np.ndarray, pred: np.ndarray) -> float:  # direct counts, as in SPEC §7
        tp, fp, fn = (truth & pred).sum(), (~truth & pred).sum(), (truth & ~pred).sum()
        return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0

    yb = y.astype(bool)
    micro = np.array([f1(yb, probs > t) for t in grid])
    assert micro.max() == pytest.approx(f1_score(y, probs > best(micro), average="micro"))
    tau_g = best(micro)
    assert tune_thresholds(probs, y, mode="global")[0] == tau_g
    expected = np.full(num_labels, tau_g, dtype=np.float32)
    for j in range(num_labels):
        if y[:, j].sum() >= 5:
            expected[j] = best(np.array([f1(yb[:, j], probs[:, j] > t) for t in grid]))
    taus = tune_thresholds(probs, sp.csr_matrix(y), mode="per_label")
    np.testing.assert_array_equal(taus, expected)
    assert (y.sum(0) < 5).any() and (taus != tau_g).any()
    for k in (0.5, 10.0, 40.0):  # shrunk: each label's F1 curve pulled toward the pooled one by k pseudo-positives
        n_pos = y.sum(0)
        shrunk = [best(np.array([(n_pos[j] * f1(yb[:, j], probs[:, j] > t) + k * m) / (n_pos[j] + k)
                                 for t, m in zip(grid, micro)])) for j in range(num_labels)]
        np.testing.assert_allclose(tune_thresholds(probs, y, mode="shrunk", prior_positives=k), shrunk, atol=1e-7)
    # shared_positives: the labels with at least that many positives take the global tau, the others their rule's
    for mode in ("per_label", "grouped", "shrunk"):
        own = tune_thresholds(probs, y, mode=mode)
        for h in (1, 10, 30, 1000):
            shared = tune_thresholds(probs, y, mode=mode, shared_positives=h)
            np.testing.assert_array_equal(shared, np.where(y.sum(0) >= h, np.float32(tau_g), own))
    assert ((y.sum(0) >= 10) & (y.sum(0) < 30)).any() and (own != tau_g).any()  # the cases above can fail


def test_shrunk_hand_case():
    probs, y = _three_label_case()
    # pooled micro-F1 per band (test_global_hand_case): [0.66, 0.95] 10/17, [0.26, 0.45] 20/27, [0.02, 0.05] 24/34.
    # score = (n_l F1_l + k F1_micro) / (n_l + k).
    # label 1 (2 positives, own F1 1 on [0.02, 0.05], 0 above 0.05), k = 10:
    #   [0.02, 0.05]: (2 + 10·24/34) / 12 = 0.755 beats [0.26, 0.45]: (10·20/27) / 12 = 0.617 → 0.05
    # label 2 (5 positives, own F1 1 on [0.66, 0.95], 10/15 below), k = 10:
    #   [0.66, 0.95]: (5 + 10·10/17) / 15 = 0.725 beats [0.26, 0.45]: (5·10/15 + 10·20/27) / 15 = 0.716 → 0.95
    np.testing.assert_allclose(tune_thresholds(probs, y, mode="shrunk"), [0.45, 0.05, 0.95], rtol=1e-6)
    # k = 20: label 2 now follows the pool ((5 + 20·10/17)/25 = 0.671 < (5·10/15 + 20·20/27)/25 = 0.726 → 0.45);
    # label 1 still its own ((2 + 20·24/34)/22 = 0.733 > (20·20/27)/22 = 0.673)
    np.testing.assert_allclose(tune_thresholds(probs, y, mode="shrunk", prior_positives=20), [0.45, 0.05, 0.45],
                               rtol=1e-6)
    # k = 100: label 1 too ((2 + 100·24/34)/102 = 0.712 < (100·20/27)/102 = 0.726) → the global tau everywhere
    np.testing.assert_allclose(tune_thresholds(probs, y, mode="shrunk", prior_positives=100), 0.45, rtol=1e-6)
    with pytest.raises(ValueError, match="prior_positives must be > 0"):
        tune_thresholds(probs, y, mode="shrunk", prior_positives=0)


def test_shared_positives_hand_case():
    probs, y = _three_label_case()
    # positives 5, 2, 5; shrunk's taus [0.45, 0.05, 0.95], the global tau 0.45 (test_shrunk_hand_case): with 5 or
    # more positives shared, labels 0 and 2 take 0.45 (label 0's own is 0.45 already), label 1 keeps its own 0.05
    np.testing.assert_allclose(tune_thresholds(probs, y, mode="shrunk", shared_positives=5), [0.45, 0.05, 0.45],
                               rtol=1e-6)
    np.testing.assert_allclose(tune_thresholds(probs, y, mode="shrunk", shared_positives=2), 0.45, rtol=1e-6)
    np.testing.assert_allclose(tune_thresholds(probs, y, mode="shrunk", shared_positives=6), [0.45, 0.05, 0.95],
                               rtol=1e-6)
    # per_label (min_positives 5): label 1 has 2 positives and takes the global tau either way
    np.testing.assert_allclose(tune_thresholds(probs, y, mode="per_label", shared_positives=5), 0.45, rtol=1e-6)


def test_apply_thresholds_is_strict():
    probs = np.array([[0.5, 0.51, 0.2], [0.49, 0.9, 0.2]], dtype=np.float32)
    out = apply_thresholds(probs, np.array([0.5, 0.5, 0.1], dtype=np.float32))
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, [[0, 1, 1], [0, 1, 1]])


def test_tuning_uses_strict_inequality_on_grid_values():
    probs = np.array([[0.3], [0.3], [0.3], [0.1]], dtype=np.float32)
    y = np.array([[1], [1], [1], [0]])
    # p > tau: tau = 0.30 predicts nothing, tau in [0.10, 0.29] predicts exactly the positives → 0.29
    tau = tune_thresholds(probs, y, mode="global")
    assert tau[0] == np.float32(0.29)
    np.testing.assert_array_equal(apply_thresholds(probs, tau), y)


def test_invalid_mode():
    with pytest.raises(ValueError, match=r"'best'.*fixed, global, per_label, grouped, shrunk"):
        tune_thresholds(np.zeros((2, 2)), np.zeros((2, 2)), mode="best")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_counts_equal_direct_counts_at_and_below_the_lowest_threshold(dtype):
    """ThresholdCounts.add counts only the values above the grid's lowest threshold (the rest count nowhere):
    the counts equal direct ones, with values exactly on grid values, just either side of the lowest, and NaN
    (which searchsorted ranks above every threshold, as before)."""
    from cdgt_keras.thresholds import ThresholdCounts

    rng = np.random.default_rng(0)
    grid = default_grid()
    low = np.float32(grid[0])
    special = np.array([0.0, low, np.nextafter(low, np.float32(0)), np.nextafter(low, np.float32(1)), 0.02, 0.5,
                        np.nan], dtype=np.float32)
    probs = rng.random((40, 7)).astype(np.float32) * 0.05
    probs[:, :] = np.where(rng.random(probs.shape) < 0.3, rng.choice(special, probs.shape), probs)
    probs = probs.astype(dtype)
    y = (rng.random(probs.shape) < 0.3).astype(int)
    counts = ThresholdCounts(7)
    counts.add(probs[:25], sp.csr_matrix(y[:25]))
    counts.add(probs[25:], sp.csr_matrix(y[25:]))
    taus = counts.grid
    with np.errstate(invalid="ignore"):
        above = (probs[:, :, None].astype(np.float64) > taus) | np.isnan(probs)[:, :, None]
    np.testing.assert_array_equal(counts.predicted, above.sum(0))
    np.testing.assert_array_equal(counts.true_pos, (above & (y[:, :, None] == 1)).sum(0))
    assert np.isnan(probs).any() and (probs == low).any() and (probs < low).any()
