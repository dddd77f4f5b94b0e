"""The label shortlist (cdgt_keras/shortlist.py): the answer against a numpy computation of its definition, the
"rows" road against the "whole" road, a row's answer whatever its batch, the exact cases, saving and export."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp
import tensorflow as tf

from cdgt_keras.config import CDGTConfig
from cdgt_keras.inputs import to_sparse_tensor
from cdgt_keras.neighbours import MemoryShape
from cdgt_keras.shortlist import candidates, combine_memories, kept

LABELS = 40


def _data(seed: int = 0, n: int = 60, d: int = 50) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    rng = np.random.default_rng(seed)
    x = sp.random(n, d, density=0.15, format="csr", random_state=seed, dtype=np.float64)
    x.data = rng.random(x.nnz) + 0.1
    y = sp.csr_matrix((rng.random((n, LABELS)) < 0.12).astype(np.float32))
    return x, y


def _model(shortlist: int, fusion: str = "mean"):
    """A small untrained model with votes in both spaces and label centroids, their weights set by hand."""
    import keras

    from cdgt_keras.learning import build_trainable

    x, y = _data()
    keras.utils.set_random_seed(0)
    config = CDGTConfig(n_players=3, overlap=0.3, encoder_hidden=(8,), head_hidden=(), neighbours=4,
                        neighbour_space="both", centroid_features=10, fusion=fusion, shortlist=shortlist)
    model = build_trainable(config, np.asarray(y.mean(0)).ravel() + 0.01, MemoryShape.of(x, y, centroid_features=10))
    model.build((None, x.shape[1]))
    model.neighbours.remember(x, y)
    model.encoder_neighbours.remember(np.asarray(model.shared_encoder(to_sparse_tensor(x), training=False)), y)
    model.centroids.remember(x, y, 10)
    for layer, weight in ((model.neighbours, 0.6), (model.encoder_neighbours, 0.3), (model.centroids, 0.2)):
        layer.weight.assign(weight)
    model.centroids.tail_weight.assign(0.4)  # the tail labels' own weight: a share that differs by label
    return model, x


def _reference(model, x: sp.csr_matrix, size: int) -> np.ndarray:
    """The definition in numpy: m (the memories' part) everywhere, plus a * p_hat at each row's `size` largest m."""
    query = to_sparse_tensor(x)
    contexts = model.contexts(query)
    fused = np.asarray(model.fusion([model.player_probs(i, c, query) for i, c in enumerate(contexts)], contexts))
    tail = np.asarray(model.tail_mask)
    a, m = np.ones(LABELS), np.zeros((x.shape[0], LABELS))
    for layer, space in model.memory_layers():
        w, tail_w = float(layer.weight.numpy()), float(layer.tail_weight.numpy())
        share = np.where(tail & (tail_w >= 0), tail_w, w)
        scores = np.asarray(layer(contexts[0] if space == "encoder" else query))
        m, a = (1 - share) * m + share * scores, (1 - share) * a
    out = m.copy()
    for row in range(x.shape[0]):
        top = np.argsort(-m[row], kind="stable")[:size]
        out[row, top] += a[top] * fused[row, top]
    return out


def test_combine_memories_is_the_blend_unrolled() -> None:
    rng = np.random.default_rng(0)
    shares = [rng.random(7).astype(np.float32) for _ in range(3)]
    scores = [rng.random((4, 7)).astype(np.float32) for _ in range(3)]
    p_hat = rng.random((4, 7)).astype(np.float32)
    answer = p_hat.copy()
    for share, score in zip(shares, scores):  # the model's blend, one layer after the other
        answer = (1 - share) * answer + share * score
    a, m = combine_memories(shares, [tf.constant(s) for s in scores])
    np.testing.assert_allclose(a.numpy() * p_hat + m.numpy(), answer, atol=1e-6)
    np.testing.assert_allclose(a.numpy(), np.prod([1 - s for s in shares], axis=0), atol=1e-7)


def test_kept_adds_the_network_at_the_shortlist_only() -> None:
    part = tf.constant([[0.5, 0.1, 0.3], [0.0, 0.2, 0.1]])
    ids = candidates(part, 2)
    assert ids.numpy().tolist() == [[0, 2], [1, 2]]
    share = tf.constant([0.5, 0.25, 0.1])
    out = kept(part, share, tf.constant([[1.0, 1.0], [0.4, 0.8]]), ids)
    np.testing.assert_allclose(out.numpy(), [[1.0, 0.1, 0.4], [0.0, 0.3, 0.18]], atol=1e-7)


@pytest.fixture
def rows_road(monkeypatch):
    """The "rows" road for a one-row batch of the small model (its shortlists hold more than a quarter of its
    output layers' few rows)."""
    from cdgt_keras import shortlist

    monkeypatch.setattr(shortlist, "ROWS_FRACTION", 0.5)


@pytest.mark.parametrize("fusion", ["mean", "core"])
def test_the_answer_is_its_definition_by_either_road_whatever_the_batch(fusion: str, rows_road) -> None:
    model, x = _model(shortlist=6, fusion=fusion)
    want = _reference(model, x[:12], 6)
    whole = np.asarray(model(to_sparse_tensor(x[:12])))
    np.testing.assert_allclose(whole, want, atol=1e-6)
    assert model.prepare_serving() is not None
    # one row: 6 labels x 2 slots read from the heads' copy (the "rows" road); 12 rows: the whole road
    rows = np.concatenate([np.asarray(model(to_sparse_tensor(x[i:i + 1]))) for i in range(12)])
    np.testing.assert_allclose(rows, want, atol=1e-6)
    np.testing.assert_allclose(np.asarray(model(to_sparse_tensor(x[:12]))), want, atol=1e-6)
    full = _reference(model, x[:12], LABELS)  # no shortlist: a * p_hat + m everywhere
    assert not np.allclose(whole, full, atol=1e-4)  # the shortlist leaves the network out somewhere


def test_the_rows_road_reads_the_heads_copy(rows_road) -> None:
    model, x = _model(shortlist=6)
    model.prepare_serving()
    one = to_sparse_tensor(x[:1])
    before = np.asarray(model(one))
    np.testing.assert_allclose(np.asarray(model(to_sparse_tensor(x[:20])))[:1], before, atol=1e-6)  # the whole road
    model.served_rows.kernel.assign(tf.zeros_like(model.served_rows.kernel))
    model.served_rows.bias.assign(tf.zeros_like(model.served_rows.bias))  # every read row now says p = 1/2
    assert not np.allclose(np.asarray(model(one)), before, atol=1e-4)
    assert np.allclose(np.asarray(model(to_sparse_tensor(x[:20])))[:1], before, atol=1e-6)  # 20 rows: the whole road


def test_exact_without_a_shortlist_or_without_memory_weights() -> None:
    model, x = _model(shortlist=LABELS)  # the shortlist holds every label: the model's blend, to the bit
    plain, _ = _model(shortlist=0)
    assert not model.shortlisted()
    query = to_sparse_tensor(x[:9])
    np.testing.assert_array_equal(np.asarray(model(query)), np.asarray(plain(query)))
    short, _ = _model(shortlist=6)
    for layer, _space in short.memory_layers():  # as in training and while settle scores the players alone
        layer.weight.assign(0.0)
        layer.tail_weight.assign(-1.0)
        plain_layer = getattr(plain, layer.name)
        plain_layer.weight.assign(0.0)
        plain_layer.tail_weight.assign(-1.0)
    np.testing.assert_allclose(np.asarray(short(to_sparse_tensor(x[:9]))), np.asarray(plain(to_sparse_tensor(x[:9]))),
                               atol=1e-7)


def test_training_and_the_players_outputs_ignore_the_shortlist() -> None:
    model, x = _model(shortlist=6)
    plain, _ = _model(shortlist=0)
    q = to_sparse_tensor(x[:5])
    np.testing.assert_array_equal(np.asarray(model(q, training=True)), np.asarray(plain(q, training=True)))
    ours, theirs = model(q, return_players=True), plain(q, return_players=True)
    np.testing.assert_array_equal(np.asarray(ours["fused"]), np.asarray(theirs["fused"]))


def test_shortlist_saves_and_loads_and_is_checked(tmp_path) -> None:
    import keras

    model, x = _model(shortlist=6)
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.cdgt_config.shortlist == 6 and loaded.served_rows is None
    np.testing.assert_allclose(np.asarray(loaded(to_sparse_tensor(x[:7]))), np.asarray(model(to_sparse_tensor(x[:7]))),
                               atol=1e-6)
    with pytest.raises(ValueError, match="shortlist"):
        CDGTConfig(shortlist=-1)
    wide = dataclasses.replace(model.cdgt_config, wide="all")
    from cdgt_keras.shortlist import rows_apply
    assert not rows_apply(wide, [object()]) and rows_apply(model.cdgt_config, model.wide)
