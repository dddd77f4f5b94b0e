"""cdgt_keras.payoff_grad: the payoff and rarity parts through cdgt's kernel give the values of TensorFlow's ops and
the gradient bits of their formulas (TensorFlow's gradient within its reciprocals' ulp), a hand-computed gradient,
and a whole training run TensorFlow's road trains within float32's rounding; the kernel names what is wrong with its
inputs; other objectives keep TensorFlow's gradient. The focal payoff takes the kernels too, within float32
rounding of TensorFlow's ops (its powers and logs are Eigen's packets), and by hand."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import built_kernel

from cdgt_keras import kernels
from cdgt_keras import objectives as obj
from cdgt_keras import payoff_grad as pg
from cdgt_keras.config import CDGTConfig
from cdgt_keras.payoff_grad import PayoffTables, fused_road, payoff_and_rarity


@pytest.fixture(scope="module")
def op():
    return built_kernel(kernels.payoff_grad)


def _case(rng: np.random.Generator, rows: int = 9, labels: int = 50):
    """Probabilities with exact 0, 1 and the clip's bounds among them; 0/1 labels; three overlapping blocks."""
    f = rng.random((rows, labels)).astype(np.float32) ** 3
    f[0, :5], f[1, :5] = 0.0, 1.0
    f[2, :3], f[3, :3] = np.float32(obj.EPS), np.float32(1.0 - obj.EPS)
    y = (rng.random((rows, labels)) < 0.2).astype(np.float32)
    y[0, :2] = y[1, :2] = 1.0
    masks = np.zeros((3, labels), np.float32)
    for i, (a, b) in enumerate([(0, 22), (18, 38), (34, labels)]):
        masks[i, a:b] = 1.0
    w = rng.uniform(0.2, 10.0, labels).astype(np.float32)
    return tf.constant(f), tf.constant(y), PayoffTables(w, masks)


def _reference(y, f, tables, players):
    """The same values by the objectives' functions, differentiated by TensorFlow."""
    weighted = obj.correctness(y, f, "log_positives") * tf.constant(tables.rarity_w)
    parts = [obj.masked_rarity_part(weighted, tf.constant(tables.masks[i]), tables.num_labels) for i in players]
    return obj.payoff(y, f, "bce"), parts


def _value_and_gradient(road, y, f, tables, players, coefs):
    @tf.function
    def run(fv):
        with tf.GradientTape() as tape:
            tape.watch(fv)
            payoff, parts = road(y, fv, tables, players)
            total = coefs[0] * payoff
            for c, part in zip(coefs[1:], parts):
                total += c * part
        return [payoff, *parts], tape.gradient(total, fv)

    values, grad = run(f)
    return [v.numpy() for v in values], grad.numpy()


def _kernel_by_numpy(y, f, tables, players, coefs) -> np.ndarray:
    """The kernel's formula element by element in NumPy's float32 (IEEE, no fused multiply-add, as the kernel is
    compiled): TensorFlow's gradient ops in their order, the reciprocals as divisions."""
    f, y, one = f.numpy(), y.numpy(), np.float32(1.0)
    rows, labels = f.shape
    ga = -((-np.float32(coefs[0])) / np.float32(rows * labels))
    c, first = np.zeros(labels, np.float32), True
    for i, d in zip(players, coefs[1:]):
        term = ((np.float32(d) / np.float32(labels)) / np.float32(rows)) * tables.masks[i]
        c, first = (term if first else c + term), False
    c = c * tables.rarity_w
    keep = (f >= np.float32(obj.EPS)) & (f <= np.float32(1.0 - obj.EPS))
    with np.errstate(divide="ignore", invalid="ignore"):
        ip, iq = one / f, one / (one - f)
        s1 = np.where(keep, (ga * y) * ip + -((ga * (one - y)) * iq), np.float32(0))
        s2 = np.where(keep, (c * y) * ip, np.float32(0))
    return s1 if first else s1 + s2


@pytest.mark.parametrize("players,coefs", [((0, 1, 2), (-0.5, -1.0, -1.0, -1.0)), ((1,), (-0.5, -2.0)),
                                           ((), (-1.0,)), ((2, 0), (0.25, 3.0, -1.5))])
def test_the_kernel_gives_tensorflows_values_and_its_formulas_gradient_bit_for_bit(op, players, coefs,
                                                                                   monkeypatch) -> None:
    f, y, tables = _case(np.random.default_rng(len(players)))
    values, grad = _value_and_gradient(payoff_and_rarity, y, f, tables, players, coefs)
    ref_values, ref_grad = _value_and_gradient(_reference, y, f, tables, players, coefs)
    # the values kernel's float64 sums: within float32 rounding of TensorFlow's float32 ones
    np.testing.assert_allclose(values, ref_values, rtol=2e-6, atol=0)
    monkeypatch.setattr(pg, "payoff_values", lambda: None)  # without it, the values are the functions' own bits
    by_ops, grad_by_ops = _value_and_gradient(payoff_and_rarity, y, f, tables, players, coefs)
    assert [v.tobytes() for v in by_ops] == [v.tobytes() for v in ref_values]
    assert grad_by_ops.tobytes() == grad.tobytes()  # the values' road leaves the gradient as it was
    by_hand = _kernel_by_numpy(y, f, tables, players, coefs)
    np.testing.assert_array_equal(grad.view(np.int32), by_hand.view(np.int32))  # every bit, the zeros' signs too
    # TensorFlow's own gradient differs only by its vectorised Reciprocal's approximation (a float32 ulp or so)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-6, atol=0)
    assert grad[0, 2:5].tolist() == [0.0] * 3 and grad[1, 2:5].tolist() == [0.0] * 3  # clipped: no gradient


def test_by_hand(op) -> None:
    """y = [1, 0], f = [0.5, 0.25], w = [2, 1], one player over both labels. R = -mean(BCE) has gradient
    -(1/2) * [-1/0.5, 1/0.75] = [1, -2/3]; r = (2 * log 0.5) / 2 has [w y / (f L)] = [2, 0]."""
    tables = PayoffTables(np.array([2.0, 1.0], np.float32), np.ones((1, 2), np.float32))
    y, f = tf.constant([[1.0, 0.0]]), tf.constant([[0.5, 0.25]])
    values, grad = _value_and_gradient(payoff_and_rarity, y, f, tables, (0,), (1.0, 1.0))
    np.testing.assert_allclose(values, [(np.log(0.5) + np.log(0.75)) / 2, np.log(0.5)], rtol=1e-6)
    np.testing.assert_allclose(grad, [[3.0, -2.0 / 3.0]], rtol=1e-6)


def test_the_kernel_names_what_is_wrong(op) -> None:
    f, y, tables = _case(np.random.default_rng(0))
    f, y = f[:2], y[:2]
    good = {"fused": f, "labels": y, "rarity": tables.rarity_w, "masks": tables.masks,
            "scale": 1.0, "player_scale": [1.0, 1.0, 1.0], "players": [True, False, True], "lo": 1e-7, "hi": 0.5}
    assert op(**good).shape == (2, 50)
    cases = [({"labels": tf.zeros([2, 49])}, "labels must have the fused probabilities' shape"),
             ({"rarity": tf.ones([49])}, "rarity must be a vector of 50 weights"),
             ({"masks": tf.ones([3, 49])}, r"masks must be \[players, 50\]"),
             ({"players": [True]}, "one value per player"),
             ({"scale": [1.0, 2.0]}, "scale must be a scalar")]
    for change, message in cases:
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            op(**{**good, **change})


def test_only_the_shipped_objective_takes_the_kernel(op, monkeypatch) -> None:
    two = np.array([1, 2, 2, 1])
    assert fused_road("bce", "log_positives", 0.0, two)
    assert fused_road("focal", "log_positives", 0.0, two)
    assert not fused_road("asl", "log_positives", 0.0, two)
    assert not fused_road("bce", "all", 0.0, two)
    assert not fused_road("bce", "log_positives", 0.5, two)
    assert not fused_road("bce", "log_positives", 0.0, np.array([1, 3, 2]))  # three addends: the order would matter
    monkeypatch.setattr(pg, "payoff_grad", lambda: None)
    assert not fused_road("bce", "log_positives", 0.0, two)


@pytest.mark.parametrize("beta,payoff", [(0.0, {}), (0.2, {}), (0.0, dict(payoff="focal", focal_gamma=0.5))])
def test_a_model_trains_on_either_road_to_the_same_model(op, monkeypatch, beta, payoff) -> None:
    """The kernel's reciprocals are exact where TensorFlow's approximate within an ulp, so the two roads part at
    float32's rounding, not more: two epochs of a small model end within 1e-5 of each other."""
    from cdgt_keras.learning import build_trainable

    rng = np.random.default_rng(0)
    x = tf.sparse.from_dense((rng.random((64, 40)) < 0.1).astype(np.float32))
    y = (rng.random((64, 12)) < 0.3).astype(np.float32)
    config = CDGTConfig(encoder_hidden=(8,), head_hidden=(), batch_size=16, epochs=2, seed=3, n_players=3,
                        overlap=0.3, alpha=2.0, beta=beta, correctness="log_positives", rarity="inverse_sqrt",
                        **{"payoff": "bce", **payoff})
    weights, logs = [], []
    for fused in (True, False):
        monkeypatch.setattr(pg, "payoff_grad", lambda f=fused: op if f else None)
        keras.utils.set_random_seed(3)
        model = build_trainable(config, y.mean(axis=0))
        assert model.rules.fused_payoff == fused
        history = model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(16), epochs=2, verbose=0,
                            shuffle=False)
        weights.append(model.get_weights())
        logs.append(history.history)
    moved = 0
    for a, b in zip(*weights):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
        moved += int(np.any(a != 0))
    assert moved > 3
    assert logs[0].keys() == logs[1].keys()
    for name in logs[0]:
        np.testing.assert_allclose(logs[0][name], logs[1][name], rtol=1e-5, atol=1e-8, err_msg=name)


def _values_by_numpy(f: np.ndarray, y: np.ndarray, w: np.ndarray, masks: np.ndarray) -> tuple[float, np.ndarray]:
    """The BCE's sum and each mask's rarity sum in float64 from float32's clipped p and 1 - p, term by term."""
    clipped = np.clip(f, np.float32(obj.EPS), np.float32(1.0 - obj.EPS))
    p, q = clipped.astype(np.float64), (np.float32(1.0) - clipped).astype(np.float64)
    bce = -(y * np.log(p) + (1.0 - y) * np.log(q)).sum()
    return float(bce), np.array([(y * np.log(p) * w * m).sum() for m in masks])


@pytest.mark.parametrize("rows,width", [(2, 7), (9, 50), (3, 1000), (4, 2053)])
def test_the_values_kernel_sums_every_term(rows, width) -> None:
    """Widths below one lane group (7), between groups (50, 2053) and over many renormalisations: runs of f = 1,
    each unlabelled entry's 1 - p about 2^-23, whose product underflows float64 within 45 factors unless it is
    brought back; a soft label (0.3) takes both logs; the values agree with float64 logs to float32's rounding."""
    values = built_kernel(kernels.payoff_values)
    rng = np.random.default_rng(width)
    f = (rng.random((rows, width)) ** 3).astype(np.float32)
    f[0, : min(width, 600)] = 1.0
    f[1, :3] = 0.0
    y = (rng.random((rows, width)) < 0.05).astype(np.float32)
    y[1, 0], y[0, 1] = 0.3, 1.0
    w = rng.uniform(0.2, 10.0, width).astype(np.float32)
    masks = np.zeros((3, width), np.float32)
    masks[0, : width // 2], masks[1, width // 3:], masks[2] = 1.0, 1.0, 1.0
    bce, parts = values(fused=f, labels=y, rarity=w, masks=masks, lo=obj.EPS, hi=1.0 - obj.EPS)
    ref_bce, ref_parts = _values_by_numpy(f, y, w, masks)
    assert np.isfinite(float(bce)) and float(bce) > 0
    np.testing.assert_allclose(float(bce), ref_bce, rtol=1e-7)
    np.testing.assert_allclose(parts.numpy(), ref_parts, rtol=1e-6)
    assert bce.dtype == tf.float64 and parts.shape == (3,)


def test_the_values_kernel_keeps_a_nan_and_names_what_is_wrong() -> None:
    values = built_kernel(kernels.payoff_values)
    f = np.full((2, 20), 0.5, np.float32)
    f[1, 13] = np.nan  # a diverged model's NaN reaches the logged loss, where training stops on it
    good = {"fused": f, "labels": np.zeros((2, 20), np.float32), "rarity": np.ones(20, np.float32),
            "masks": np.ones((2, 20), np.float32), "lo": 1e-7, "hi": 1.0 - 1e-7}
    assert np.isnan(float(values(**good).bce))
    cases = [({"labels": tf.zeros([2, 19])}, "labels must have the fused probabilities' shape"),
             ({"rarity": tf.ones([19])}, "rarity must be a vector of 20 weights"),
             ({"masks": tf.ones([2, 19])}, r"masks must be \[players, 20\]")]
    for change, message in cases:
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            values(**{**good, **change})


def _focal_reference(y, f, tables, players):
    """The focal payoff and the rarity parts by the objectives' functions, differentiated by TensorFlow."""
    weighted = obj.correctness(y, f, "log_positives") * tf.constant(tables.rarity_w)
    parts = [obj.masked_rarity_part(weighted, tf.constant(tables.masks[i]), tables.num_labels) for i in players]
    return obj.payoff(y, f, "focal", focal_gamma=tables.focal_gamma), parts


@pytest.mark.parametrize("gamma", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("players,coefs", [((0, 1, 2), (-0.5, -1.0, -1.0, -1.0)), ((), (-1.0,))])
def test_the_focal_payoff_through_the_kernel_is_tensorflows_within_rounding(op, gamma, players, coefs,
                                                                            monkeypatch) -> None:
    """Its values and gradient against the objectives' focal loss through TensorFlow's ops (a soft label among
    them): within float32 rounding; no gradient where the clip holds f; the values' road leaves the gradient."""
    f, y, tables = _case(np.random.default_rng(7))
    y = tf.tensor_scatter_nd_update(y, [[4, 7]], [0.3])
    tables = PayoffTables(tables.rarity_w, tables.masks, gamma)
    values, grad = _value_and_gradient(payoff_and_rarity, y, f, tables, players, coefs)
    ref_values, ref_grad = _value_and_gradient(_focal_reference, y, f, tables, players, coefs)
    np.testing.assert_allclose(values, ref_values, rtol=2e-6, atol=0)
    np.testing.assert_allclose(grad, ref_grad, rtol=2e-6, atol=0)
    assert np.array_equal(grad == 0, ref_grad == 0) and np.all(grad[:2, 2:5] == 0)
    monkeypatch.setattr(pg, "payoff_values", lambda: None)
    by_ops, grad_by_ops = _value_and_gradient(payoff_and_rarity, y, f, tables, players, coefs)
    assert [v.tobytes() for v in by_ops] == [v.tobytes() for v in ref_values]
    assert grad_by_ops.tobytes() == grad.tobytes()


def test_the_focal_payoff_by_hand(op) -> None:
    """gamma = 1, y = [1, 0], f = [0.5, 0.25], w = [2, 1], one player over both labels. The loss is
    [0.5 (-log 0.5), 0.25 (-log 0.75)]; R = -mean has gradient (1/2) [(1-p)/p - log p, log(1-p) - p/(1-p)] =
    (1/2) [1 + log 2, log 0.75 - 1/3]; the rarity part adds [w y / (f L)] = [2, 0]."""
    tables = PayoffTables(np.array([2.0, 1.0], np.float32), np.ones((1, 2), np.float32), 1.0)
    y, f = tf.constant([[1.0, 0.0]]), tf.constant([[0.5, 0.25]])
    values, grad = _value_and_gradient(payoff_and_rarity, y, f, tables, (0,), (1.0, 1.0))
    np.testing.assert_allclose(values, [-(0.5 * np.log(2) - 0.25 * np.log(0.75)) / 2, np.log(0.5)], rtol=1e-6)
    np.testing.assert_allclose(grad, [[0.5 * (1 + np.log(2)) + 2.0, 0.5 * (np.log(0.75) - 1 / 3)]], rtol=1e-6)


def test_the_kernels_refuse_a_negative_gamma(op) -> None:
    f, y, tables = _case(np.random.default_rng(0))
    with pytest.raises(tf.errors.InvalidArgumentError, match="gamma must be at least 0"):
        op(fused=f, labels=y, rarity=tables.rarity_w, masks=tables.masks, scale=1.0, player_scale=[1.0] * 3,
           players=[True] * 3, lo=1e-7, hi=1.0 - 1e-7, gamma=-1.0)
    values = built_kernel(kernels.payoff_values)
    with pytest.raises(tf.errors.InvalidArgumentError, match="gamma must be at least 0"):
        values(fused=f, labels=y, rarity=tables.rarity_w, masks=tables.masks, lo=1e-7, hi=1.0 - 1e-7, gamma=-0.5)


@pytest.mark.parametrize("rows,width", [(2, 7), (9, 50), (4, 2053)])
def test_the_focal_values_kernel_sums_every_term(rows, width) -> None:
    """The focal loss's sum over widths off and on the 16-lane padding, f = 0 and 1 among the entries, a soft
    label: float64 NumPy's sum of the same terms within float32 rounding; the rarity sums as under BCE."""
    values = built_kernel(kernels.payoff_values)
    rng = np.random.default_rng(width)
    f = (rng.random((rows, width)) ** 3).astype(np.float32)
    f[0, :3], f[1, :3] = 1.0, 0.0
    y = (rng.random((rows, width)) < 0.05).astype(np.float32)
    y[1, 0], y[0, 1] = 0.3, 1.0
    w = rng.uniform(0.2, 10.0, width).astype(np.float32)
    masks = np.ones((2, width), np.float32)
    masks[1, : width // 2] = 0.0
    gamma = 0.5
    loss, parts = values(fused=f, labels=y, rarity=w, masks=masks, lo=obj.EPS, hi=1.0 - obj.EPS, gamma=gamma)
    p = np.clip(f, np.float32(obj.EPS), np.float32(1.0 - obj.EPS)).astype(np.float64)
    q = (np.float32(1.0) - np.clip(f, np.float32(obj.EPS), np.float32(1.0 - obj.EPS))).astype(np.float64)
    ref = -(y * q**gamma * np.log(p) + (1 - y) * p**gamma * np.log(q)).sum()
    np.testing.assert_allclose(float(loss), ref, rtol=2e-6)
    np.testing.assert_allclose(parts.numpy(), [(y * np.log(p) * w * m).sum() for m in masks], rtol=2e-6)
