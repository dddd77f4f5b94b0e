"""Label centroids (cdgt_keras/centroids.py): the matrix by hand and against numpy, the layer's scores, the blend
inside the model, the weight tuned on validation after the votes', saved and loaded."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from cdgt_keras.centroids import CHUNK_ROWS, LabelCentroids, centroid_matrix
from cdgt_keras.config import CDGTConfig
from cdgt_keras.inputs import to_sparse_tensor
from cdgt_keras.metrics import precision_at_k
from cdgt_keras.neighbours import MemoryShape
from cdgt_keras.settling import settle


def _reference(x: np.ndarray, y: np.ndarray, keep: int = 0) -> np.ndarray:
    """Plain numpy: sum of each label's unit rows, its `keep` largest entries (ties: lower column), unit length."""
    unit = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    sums = y.T @ unit
    if keep:
        for row in sums:
            order = np.lexsort((np.arange(row.size), -row))  # value descending, then column
            row[order[keep:]] = 0.0
    return sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)


def _data(seed: int = 0, n: int = 40, d: int = 30, labels: int = 6) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    rng = np.random.default_rng(seed)
    x = sp.random(n, d, density=0.2, format="csr", random_state=seed, dtype=np.float64)
    x.data = rng.random(x.nnz) + 0.1
    y = (rng.random((n, labels)) < 0.3).astype(np.float32)
    y[:, -1] = 0.0  # a label without training rows: an empty centroid, scores 0
    return x, sp.csr_matrix(y)


def test_centroids_by_hand() -> None:
    # rows [3, 4, 0] -> [0.6, 0.8, 0] and [0, 0, 2] -> [0, 0, 1]; label 0 has both: [0.6, 0.8, 1] / sqrt(2)
    x = sp.csr_matrix([[3.0, 4.0, 0.0], [0.0, 0.0, 2.0]])
    y = sp.csr_matrix([[1, 1], [1, 0]])
    got = centroid_matrix(x, y).toarray()
    np.testing.assert_allclose(got, [[0.6 / 2 ** 0.5, 0.8 / 2 ** 0.5, 1 / 2 ** 0.5], [0.6, 0.8, 0.0]], atol=1e-6)
    # kept to 2 features: label 0 keeps 1 and 0.8 -> [0, 0.8, 1] / sqrt(1.64)
    got = centroid_matrix(x, y, max_features=2).toarray()
    np.testing.assert_allclose(got[0], [0.0, 0.8 / 1.64 ** 0.5, 1 / 1.64 ** 0.5], atol=1e-6)
    with pytest.raises(ValueError, match="rows"):
        centroid_matrix(x, y[:1])


@pytest.mark.parametrize("keep", [0, 1, 4])
def test_centroids_equal_numpy(keep: int) -> None:
    x, y = _data()
    got = centroid_matrix(x, y, keep)
    np.testing.assert_allclose(got.toarray(), _reference(x.toarray(), y.toarray(), keep), atol=1e-6)
    assert (np.diff(got.indptr) <= (keep or x.shape[1])).all() and got[-1].nnz == 0


@pytest.mark.parametrize("sparse_query", [True, False])
def test_layer_scores_are_clipped_cosines_chunk_by_chunk(sparse_query: bool) -> None:
    x, y = _data()
    x = x.toarray() - 0.05  # some negative entries: negative cosines score 0
    cents = _reference(x, y.toarray(), 5)
    layer = LabelCentroids(30, 6, int((cents != 0).sum()))
    layer.remember(x, y, max_features=5)
    query = sp.random(2 * CHUNK_ROWS + 3, 30, density=0.3, format="csr", random_state=1)
    q = query.toarray()
    want = np.maximum((q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)) @ cents.T, 0.0)
    got = layer(to_sparse_tensor(query) if sparse_query else q.astype(np.float32)).numpy()
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert layer(np.zeros((0, 30), np.float32)).shape == (0, 6)
    with pytest.raises(ValueError, match=r"holds .* entries"):
        layer.remember(x, y, max_features=6)


def _model(x: sp.csr_matrix, y: sp.csr_matrix, **overrides):
    from cdgt_keras.learning import build_trainable

    config = CDGTConfig(n_players=2, encoder_hidden=(8,), head_hidden=(), centroid_features=10,
                        centroid_weights=(0.0, 0.5), **overrides)
    model = build_trainable(config, np.asarray(y.mean(0)).ravel() + 0.01,
                            MemoryShape.for_config(config, x, y))
    model.build((None, x.shape[1]))
    return model


def test_settle_tunes_the_centroids_after_the_votes_and_the_model_round_trips(tmp_path) -> None:
    import keras

    x, y = _data()
    model = _model(x, y, neighbours=3, neighbour_weights=(0.0, 0.3))
    assert model.memory.centroid_nnz == centroid_matrix(x, y, 10).nnz
    plain = np.asarray(model(to_sparse_tensor(x[:8])))  # both weights 0: the players' fused output alone
    settle(model, x, y, x, y, (0.0, 0.3), batch_size=16, rows=24)
    w, mu = float(model.neighbours.weight.numpy()), float(model.centroids.weight.numpy())
    assert w == pytest.approx(max(model.neighbours.tuning, key=lambda m: (model.neighbours.tuning[m], -m)))
    assert set(model.centroids.tuning) == {0.0, 0.5} and mu == max(model.centroids.tuning,
                                                                   key=lambda m: (model.centroids.tuning[m], -m))
    # the centroids' table: validation P@5 of the served answer (the votes in at w) blended with the centroids
    model.centroids.weight.assign(0.0)
    served = np.asarray(model(to_sparse_tensor(x)))
    cents = model.centroids(to_sparse_tensor(x)).numpy()
    for m, p5 in model.centroids.tuning.items():
        assert p5 == pytest.approx(precision_at_k(y, (1.0 - m) * served + m * cents, 5), abs=1e-9)
    model.centroids.weight.assign(mu)
    model.neighbours.weight.assign(0.3)
    model.centroids.weight.assign(0.5)  # set both, whatever validation chose, to check the blend's order
    votes = model.neighbours(to_sparse_tensor(x[:8])).numpy()
    cents = model.centroids(to_sparse_tensor(x[:8])).numpy()
    want = 0.5 * (0.7 * plain + 0.3 * votes) + 0.5 * cents
    np.testing.assert_allclose(np.asarray(model(to_sparse_tensor(x[:8]))), want, atol=1e-6)
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(np.asarray(loaded(to_sparse_tensor(x[:8]))), want, atol=1e-6)


def test_centroids_alone_and_beside_encoder_space_votes(tmp_path) -> None:
    import keras

    x, y = _data()
    alone = _model(x, y)
    assert alone.neighbours is None and alone.centroids is not None
    settle(alone, x, y, x, y, (0.0,), batch_size=16, rows=24)
    assert set(alone.centroids.tuning) == {0.0, 0.5}
    both = _model(x, y, neighbours=3, neighbour_space="encoder")
    assert both.centroids.num_features == 30 and both.neighbours.shape.num_features == 8
    settle(both, x, y, x, y, (0.0, 0.5), batch_size=16, rows=24)
    path = str(tmp_path / "e.keras")
    both.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(np.asarray(loaded(to_sparse_tensor(x[:6]))), np.asarray(both(to_sparse_tensor(x[:6]))),
                               atol=1e-6)


def test_config_checks_and_off_by_default() -> None:
    x, y = _data()
    assert MemoryShape.for_config(CDGTConfig(), x, y) is None
    assert MemoryShape.for_config(CDGTConfig(neighbours=3), x, y).centroid_nnz == 0
    assert CDGTConfig.preset("paper").centroid_features == 0
    with pytest.raises(ValueError, match="centroid_weights"):
        CDGTConfig(centroid_weights=(1.5,))
    with pytest.raises(ValueError, match="centroid_features"):
        CDGTConfig(centroid_features=-1)
