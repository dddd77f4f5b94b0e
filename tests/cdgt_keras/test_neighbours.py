"""Neighbour votes (cdgt_keras/neighbours.py): against a numpy k-nearest-neighbour computation, inside the model,
tuned on validation, saved and loaded."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from cdgt_keras.config import CDGTConfig
from cdgt_keras.inputs import to_sparse_tensor
from cdgt_keras.neighbours import MemoryShape, NeighbourVotes
from cdgt_keras.settling import settle, tune_weight


def _reference_votes(train_x: np.ndarray, train_y: np.ndarray, query: np.ndarray, k: int) -> np.ndarray:
    """Plain numpy: cosine similarities, the k largest per row (ties by lower row id), votes normalised."""
    unit = train_x / np.maximum(np.linalg.norm(train_x, axis=1, keepdims=True), 1e-12)
    q = query / np.maximum(np.linalg.norm(query, axis=1, keepdims=True), 1e-12)
    sims = q @ unit.T
    out = np.zeros((query.shape[0], train_y.shape[1]))
    for i, row in enumerate(sims):
        top = np.argsort(-row, kind="stable")[:k]
        w = np.maximum(row[top], 0.0)
        out[i] = (w[:, None] * train_y[top]).sum(0) / max(w.sum(), 1e-12)
    return out


def _data(seed: int = 0, n: int = 40, d: int = 30, labels: int = 6) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    rng = np.random.default_rng(seed)
    x = sp.random(n, d, density=0.2, format="csr", random_state=seed, dtype=np.float64)
    x.data = rng.random(x.nnz) + 0.1  # no ties between similarities
    y = sp.csr_matrix((rng.random((n, labels)) < 0.3).astype(np.float32))
    return x, y


@pytest.mark.parametrize("sparse_query", [True, False])
def test_votes_equal_numpy_knn(sparse_query: bool) -> None:
    x, y = _data()
    query = sp.random(5, 30, density=0.3, format="csr", random_state=1)
    layer = NeighbourVotes(MemoryShape.of(x, y), num_labels=6, k=4)
    layer.remember(x * 3.0, y)  # rows are scaled to unit length: the scale does not matter
    got = layer(to_sparse_tensor(query) if sparse_query else query.toarray().astype(np.float32)).numpy()
    want = _reference_votes(x.toarray(), y.toarray(), query.toarray(), 4)
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_dense_features_with_negative_similarities() -> None:
    rng = np.random.default_rng(2)
    x, query = rng.normal(size=(20, 5)), rng.normal(size=(4, 5))
    y = (rng.random((20, 3)) < 0.4).astype(np.float32)
    layer = NeighbourVotes(MemoryShape.of(x, y), num_labels=3, k=20)  # every row, negative ones count 0
    layer.remember(x, y)
    np.testing.assert_allclose(layer(query.astype(np.float32)).numpy(), _reference_votes(x, y, query, 20), atol=1e-6)


def test_remember_checks_the_shape() -> None:
    x, y = _data()
    layer = NeighbourVotes(MemoryShape.of(x, y), num_labels=6, k=3)
    with pytest.raises(ValueError, match="memory holds"):
        layer.remember(x[:-1], y[:-1])


def test_tune_weight_by_hand() -> None:
    # two documents; the model ranks label 0 first on both, the votes label 1; P@1 of the blends by hand:
    # w=0: 1/2 (doc 0 right); w=0.5: doc 0 0.45 vs 0.55 -> label 1 (wrong), doc 1 0.3 vs 0.7 -> label 1 (right): 1/2;
    # w=0.9: same as 0.5. Ties go to the smaller weight.
    p, v = np.array([[0.9, 0.1], [0.6, 0.4]]), np.array([[0.0, 1.0], [0.0, 1.0]])
    truth = sp.csr_matrix([[1, 0], [0, 1]])
    best, table = tune_weight(lambda: [(p, v, truth)], (0.9, 0.5, 0.0), k=1)
    assert best == 0.0 and table == {0.0: 0.5, 0.5: 0.5, 0.9: 0.5}
    best, table = tune_weight(lambda: [(p, v, sp.csr_matrix([[0, 1], [0, 1]]))], (0.0, 0.5), k=1)
    assert best == 0.5 and table == {0.0: 0.0, 0.5: 1.0}


def test_tune_weight_ties_are_exact_whatever_chunk_the_hits_fall_in(monkeypatch) -> None:
    # Chunks of 3, 7 and 11 rows at P@5; weight 0 hits once in the last chunk, weight 0.5 once in the first: one
    # hit each, a tie (to 0). Summed as n * (hits / (n k)) the two came to 0.19999999999999998 and 0.2; the hits
    # are counted as integers.
    from cdgt_keras import settling

    hits = {3: {0.0: 0, 0.5: 1}, 7: {0.0: 0, 0.5: 0}, 11: {0.0: 1, 0.5: 0}}
    monkeypatch.setattr(settling, "blend_hits",
                        lambda scores, votes, truth, grid, k, label_weights=None: hits[truth.shape[0]])
    chunks = [(np.zeros((n, 6)), np.ones((n, 6)), sp.csr_matrix((n, 6))) for n in (3, 7, 11)]
    best, table = tune_weight(lambda: chunks, (0.0, 0.5), k=5)
    assert best == 0.0 and table[0.0] == table[0.5] == 1 / 105


def _model(x: sp.csr_matrix, y: sp.csr_matrix, neighbours: int = 5):
    from cdgt_keras.learning import build_trainable

    config = CDGTConfig(n_players=2, encoder_hidden=(8,), head_hidden=(), neighbours=neighbours,
                        neighbour_weights=(0.0, 0.5))
    model = build_trainable(config, np.asarray(y.mean(0)).ravel() + 0.01, MemoryShape.of(x, y))
    model.build((None, x.shape[1]))
    return model


def test_model_blends_votes_with_its_weight() -> None:
    x, y = _data()
    model = _model(x, y)
    plain = np.asarray(model(to_sparse_tensor(x[:8])))  # weight 0: the players' fused output alone
    model.neighbours.remember(x, y)
    np.testing.assert_allclose(np.asarray(model(to_sparse_tensor(x[:8]))), plain, atol=1e-7)
    model.neighbours.weight.assign(0.25)
    votes = model.neighbours(to_sparse_tensor(x[:8])).numpy()
    np.testing.assert_allclose(np.asarray(model(to_sparse_tensor(x[:8]))), 0.75 * plain + 0.25 * votes, atol=1e-6)
    training = np.asarray(model(to_sparse_tensor(x[:8]), training=True))  # the game never sees the votes
    assert not np.allclose(training, 0.75 * plain + 0.25 * votes)


def test_the_fused_answer_is_the_models_while_its_memories_weigh_0_and_the_monitor_ranks_it() -> None:
    """`fused_probs` (what the validation ranking reads each epoch, and settle blends the memories into) is the
    model's answer to the bit while the votes' weight is 0, and stays the players' answer when it is not; the
    ranking monitor's top 5 are the answer's."""
    from cdgt_keras.chunked_eval import _topk_pair
    from cdgt_keras.data import MultiLabelData
    from cdgt_keras.learning import RankingMonitor

    x, y = _data()
    model = _model(x, y)
    model.neighbours.remember(x, y)
    plain = np.asarray(model(to_sparse_tensor(x)))
    np.testing.assert_array_equal(np.asarray(model.fused_probs(to_sparse_tensor(x))), plain)
    monitor = RankingMonitor(MultiLabelData(x, y, []), np.asarray(y.sum(0)).ravel(), x.shape[0],
                             CDGTConfig(batch_size=16))
    monitor.set_model(model)
    ids, scores = monitor.top_k()
    want_ids, want_scores = _topk_pair(plain, 5)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_allclose(scores, want_scores, atol=1e-6)  # batches of 16 rows against one of 40
    model.neighbours.weight.assign(0.25)
    assert not np.allclose(np.asarray(model(to_sparse_tensor(x))), plain)
    np.testing.assert_array_equal(np.asarray(model.fused_probs(to_sparse_tensor(x))), plain)


def test_settle_sets_the_best_weight_and_the_model_round_trips(tmp_path) -> None:
    import keras

    x, y = _data()
    model = _model(x, y)
    # validation = training rows: each row's nearest neighbour is itself, so the votes win on P@5
    table = settle(model, x, y, x, y, (0.0, 0.5), batch_size=16, rows=24)
    assert set(table) == {0.0, 0.5} and table[0.5] > table[0.0]
    assert float(model.neighbours.weight.numpy()) == 0.5
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.neighbours.shape == model.neighbours.shape
    np.testing.assert_allclose(np.asarray(loaded(to_sparse_tensor(x[:6]))), np.asarray(model(to_sparse_tensor(x[:6]))),
                               atol=1e-6)


def test_config_off_or_without_memory_has_no_votes() -> None:
    from cdgt_keras.model import CDGTModel

    x, y = _data()
    assert _model(x, y, neighbours=0).neighbours is None
    assert CDGTModel(CDGTConfig(neighbours=5), np.full(6, 0.1)).neighbours is None
    with pytest.raises(ValueError, match="neighbour_weights"):
        CDGTConfig(neighbour_weights=(1.5,))


@pytest.mark.parametrize("dense", [False, True])
def test_a_large_batch_is_scored_in_chunks_like_row_by_row(dense: bool) -> None:
    from cdgt_keras.neighbours import CHUNK_ROWS, DENSE_CHUNK_ROWS

    x, y = _data(n=60)
    shape = MemoryShape.of(x, y).in_space(30) if dense else MemoryShape.of(x, y)
    layer = NeighbourVotes(shape, num_labels=6, k=7)
    layer.remember(x.toarray() if dense else x, y)
    query = sp.random(2 * (DENSE_CHUNK_ROWS if dense else CHUNK_ROWS) + 5, 30, density=0.3, format="csr",
                      random_state=3)
    whole = layer(to_sparse_tensor(query)).numpy()
    rows = np.concatenate([layer(to_sparse_tensor(query[i:i + 1])).numpy() for i in range(query.shape[0])])
    np.testing.assert_allclose(whole, rows, atol=1e-6)
    np.testing.assert_allclose(whole, _reference_votes(x.toarray(), y.toarray(), query.toarray(), 7), atol=1e-6)
    assert layer(np.zeros((0, 30), np.float32)).shape == (0, 6)  # an empty batch: no rows, no error


def test_encoder_space_votes_use_the_encoders_output(tmp_path) -> None:
    import keras

    from cdgt_keras.learning import build_trainable

    x, y = _data()
    config = CDGTConfig(n_players=2, encoder_hidden=(8,), head_hidden=(), neighbours=5, neighbour_weights=(0.0, 0.5),
                        neighbour_space="encoder")
    model = build_trainable(config, np.asarray(y.mean(0)).ravel() + 0.01, MemoryShape.of(x, y))
    model.build((None, x.shape[1]))
    assert model.neighbours.shape == MemoryShape.of(x, y).in_space(8)
    settle(model, x, y, x, y, (0.0, 0.5), batch_size=16, rows=24)
    model.neighbours.weight.assign(0.5)
    embedded = np.asarray(model.shared_encoder(to_sparse_tensor(x), training=False))
    query = np.asarray(model.shared_encoder(to_sparse_tensor(x[:6]), training=False))
    want = _reference_votes(embedded, y.toarray(), query, 5)
    np.testing.assert_allclose(model.neighbours(query).numpy(), want, atol=1e-5)
    model.neighbours.weight.assign(0.0)
    plain = np.asarray(model(to_sparse_tensor(x[:6])))
    model.neighbours.weight.assign(0.5)
    np.testing.assert_allclose(np.asarray(model(to_sparse_tensor(x[:6]))), 0.5 * plain + 0.5 * want, atol=1e-5)
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(np.asarray(loaded(to_sparse_tensor(x[:6]))), 0.5 * plain + 0.5 * want, atol=1e-5)
    with pytest.raises(ValueError, match="neighbour_space"):
        CDGTConfig(neighbour_space="encoder", encoder_hidden=())


@pytest.mark.parametrize("k,metric", [(5, "p_at_k"), (1, "p_at_k"), (5, "psp_at_k"), (5, "p_then_psp_at_k"),
                                      (3, "p_then_psp_at_k")])  # k = 3: P@3 ties, PSP@3 decides (unlike p_at_k)
def test_votes_in_both_spaces_blend_in_order_each_weight_tuned_with_the_ones_before(tmp_path, k: int,
                                                                                   metric: str) -> None:
    import keras

    from cdgt_keras.learning import build_trainable
    from cdgt_keras.metrics import propensities

    x, y = _data()
    grid = (0.0, 0.3, 0.6, 0.9)
    keras.utils.set_random_seed(0)  # an untrained model: its initial weights decide whether the votes earn a share
    config = CDGTConfig(n_players=2, encoder_hidden=(8,), head_hidden=(), neighbours=3, neighbour_weights=grid,
                        neighbour_space="both", memory_tuning_k=k, memory_tuning_metric=metric,
                        memory_tuning_slack=0.05)
    model = build_trainable(config, np.asarray(y.mean(0)).ravel() + 0.01, MemoryShape.of(x, y))
    model.build((None, x.shape[1]))
    assert model.neighbours.shape == MemoryShape.of(x, y)  # the input's space
    assert model.encoder_neighbours.shape == MemoryShape.of(x, y).in_space(8)
    val_x, val_y = _data(seed=3)
    table = settle(model, x, y, val_x, val_y, grid, batch_size=16, rows=24)
    w_in, w_enc = (float(layer.weight.numpy()) for layer in (model.neighbours, model.encoder_neighbours))
    assert model.neighbours.tuning == table and w_in + w_enc > 0.0  # the data give the votes a share
    # by hand: the model's own answer, the votes in each space, each weight tuned with the ones before it in
    for layer in (model.neighbours, model.encoder_neighbours):
        layer.weight.assign(0.0)
    plain = np.asarray(model(to_sparse_tensor(val_x)))
    encode = lambda rows: np.asarray(model.shared_encoder(to_sparse_tensor(rows), training=False))  # noqa: E731
    v_in = _reference_votes(x.toarray(), y.toarray(), val_x.toarray(), 3)
    v_enc = _reference_votes(encode(x), y.toarray(), encode(val_x), 3)
    truth = val_y.toarray()

    # a hit counts 1 (P@k) or its label's 1 / propensity of the training split (PSP@k's numerator), per top-k slot
    psp_gain = 1.0 / propensities(np.asarray(y.sum(axis=0)).ravel(), y.shape[0])
    table_gain = psp_gain if metric == "psp_at_k" else np.ones(truth.shape[1])

    def p_at_k(base: np.ndarray, votes: np.ndarray, gain: np.ndarray = table_gain) -> list[float]:
        """The table the config's memory_tuning_k and metric report."""
        out = []
        for w in grid:
            b = (1 - w) * base + w * votes
            top = np.lexsort((np.broadcast_to(np.arange(b.shape[1]), b.shape), -b), axis=1)[:, :k]
            hits = truth[np.arange(b.shape[0])[:, None], top] > 0
            out.append(float((hits * gain[top]).sum()) / (k * b.shape[0]))
        return out

    np.testing.assert_allclose([table[w] for w in grid], p_at_k(plain, v_in), atol=1e-9)
    with_input_votes = (1 - w_in) * plain + w_in * v_in
    np.testing.assert_allclose([model.encoder_neighbours.tuning[w] for w in grid], p_at_k(with_input_votes, v_enc),
                               atol=1e-9)
    for got, tuning, base, votes in ((w_in, table, plain, v_in),
                                     (w_enc, model.encoder_neighbours.tuning, with_input_votes, v_enc)):
        allowed = grid  # p_then_psp_at_k: the weights within the slack (0.05) of the best P@k, picked on PSP@k
        if metric == "p_then_psp_at_k":
            allowed = [w for w in grid if tuning[w] >= max(tuning.values()) - 0.05]
            tuning = dict(zip(grid, p_at_k(base, votes, psp_gain)))
        top = max(tuning[w] for w in allowed)  # the best; the smaller on a tie (within float sums' last bits)
        assert got == pytest.approx(min(w for w in allowed if tuning[w] >= top - 1e-9))
    model.neighbours.weight.assign(w_in)
    model.encoder_neighbours.weight.assign(w_enc)
    want = (1 - w_enc) * with_input_votes + w_enc * v_enc
    np.testing.assert_allclose(np.asarray(model(to_sparse_tensor(val_x))), want, atol=1e-5)
    path = str(tmp_path / "m.keras")
    model.save(path)
    np.testing.assert_allclose(np.asarray(keras.saving.load_model(path)(to_sparse_tensor(val_x))), want, atol=1e-5)


def _projected_reference(train: np.ndarray, query: np.ndarray, dims: int) -> tuple[np.ndarray, np.ndarray]:
    """numpy: unit rows, the training rows' leading `dims` right singular vectors, both sides mapped onto them."""
    unit = train / np.maximum(np.linalg.norm(train, axis=1, keepdims=True), 1e-12)
    basis = np.linalg.svd(unit, full_matrices=False)[2][:dims].T
    q = query / np.maximum(np.linalg.norm(query, axis=1, keepdims=True), 1e-12)
    return unit @ basis, q @ basis


@pytest.mark.parametrize("dims", [3, 2])
def test_a_projected_dense_memory_votes_by_the_projected_cosines(dims: int) -> None:
    import tensorflow as tf

    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 3)) @ rng.normal(size=(3, 8))  # rank 3 in 8 dimensions
    _, y = _data()
    query = rng.normal(size=(5, 3)) @ rng.normal(size=(3, 8))
    shape = MemoryShape.of(sp.csr_matrix(np.ones((40, 2))), y).in_space(8, dims)
    assert (shape.num_features, shape.projected_from) == (dims, 8)
    assert MemoryShape.of(sp.csr_matrix(np.ones((40, 2))), y).in_space(8, 8).projected_from == 0  # nothing to cut
    layer = NeighbourVotes(shape, num_labels=6, k=5)
    layer.remember(x, y)
    assert layer.x_dense.shape == (40, dims) and layer.projection.shape == (8, dims)
    got = layer(tf.constant(query, tf.float32)).numpy()
    train_low, query_low = _projected_reference(x, query, dims)
    np.testing.assert_allclose(got, _reference_votes(train_low, y.toarray(), query_low, 5), atol=1e-5)
    if dims == 3:  # the rows span 3 dimensions: the projection keeps every cosine, so the exact votes
        np.testing.assert_allclose(got, _reference_votes(x, y.toarray(), query, 5), atol=1e-5)


def test_the_encoders_memory_projected_in_the_model_saves_and_loads(tmp_path) -> None:
    import keras

    from cdgt_keras.learning import build_trainable

    x, y = _data()
    config = CDGTConfig(n_players=2, encoder_hidden=(8,), head_hidden=(), neighbours=5, neighbour_weights=(0.0, 0.5),
                        neighbour_space="encoder", encoder_memory_dims=4)
    model = build_trainable(config, np.asarray(y.mean(0)).ravel() + 0.01, MemoryShape.of(x, y))
    model.build((None, x.shape[1]))
    assert model.neighbours.shape == MemoryShape.of(x, y).in_space(8, 4)
    settle(model, x, y, x, y, (0.0, 0.5), batch_size=16, rows=24)
    model.neighbours.weight.assign(0.5)
    embedded = np.asarray(model.shared_encoder(to_sparse_tensor(x), training=False))
    query = embedded[:6]
    train_low, query_low = _projected_reference(embedded, query, 4)
    want = _reference_votes(train_low, y.toarray(), query_low, 5)
    np.testing.assert_allclose(model.neighbours(query).numpy(), want, atol=1e-5)
    answer = np.asarray(model(to_sparse_tensor(x[:6])))
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(np.asarray(loaded(to_sparse_tensor(x[:6]))), answer, atol=1e-6)
    with pytest.raises(ValueError, match="encoder_memory_dims"):
        CDGTConfig(encoder_memory_dims=-1)


def _reranked_reference(train: np.ndarray, train_y: np.ndarray, query: np.ndarray, dims: int, rerank: int,
                        k: int) -> np.ndarray:
    """numpy: the `rerank` rows nearest by projected cosine, re-scored by full cosine, the k nearest of them vote."""
    train_low, query_low = _projected_reference(train, query, dims)
    low = (query_low / np.linalg.norm(query_low, axis=1, keepdims=True)) @ \
        (train_low / np.linalg.norm(train_low, axis=1, keepdims=True)).T
    unit = train / np.linalg.norm(train, axis=1, keepdims=True)
    q = query / np.linalg.norm(query, axis=1, keepdims=True)
    out = np.zeros((query.shape[0], train_y.shape[1]))
    for i in range(query.shape[0]):
        candidates = np.argsort(-low[i], kind="stable")[:rerank]
        full = unit[candidates] @ q[i]
        top = candidates[np.argsort(-full, kind="stable")[:k]]
        w = np.maximum(unit[top] @ q[i], 0.0)
        out[i] = (w[:, None] * train_y[top]).sum(0) / max(w.sum(), 1e-12)
    return out


@pytest.mark.parametrize("rerank", [6, 12, 40])
def test_a_reranked_projected_memory_votes_by_full_cosines_among_its_candidates(rerank: int) -> None:
    import tensorflow as tf

    rng = np.random.default_rng(3)
    x = rng.normal(size=(40, 8))  # full rank: a 2-d projection loses most cosines
    _, y = _data()
    query = rng.normal(size=(5, 8))
    shape = MemoryShape.of(sp.csr_matrix(np.ones((40, 2))), y).in_space(8, 2, rerank)
    assert (shape.num_features, shape.projected_from, shape.rerank) == (2, 8, rerank)
    assert MemoryShape.of(sp.csr_matrix(np.ones((40, 2))), y).in_space(8, 0, rerank).rerank == 0  # exact already
    layer = NeighbourVotes(shape, num_labels=6, k=5)
    layer.remember(x, y)
    assert layer.x_full.shape == (40, 8) and layer.x_dense.shape == (40, 2)
    got = layer(tf.constant(query, tf.float32)).numpy()
    np.testing.assert_allclose(got, _reranked_reference(x, y.toarray(), query, 2, rerank, 5), atol=1e-5)
    exact = _reference_votes(x, y.toarray(), query, 5)
    if rerank == 40:  # every row a candidate: the exact votes
        np.testing.assert_allclose(got, exact, atol=1e-5)
    else:  # too few candidates to find the exact neighbours of every query here
        assert not np.allclose(got, exact, atol=1e-3)


def test_a_reranked_memory_in_the_model_saves_loads_and_checks_its_config(tmp_path) -> None:
    import keras

    from cdgt_keras.learning import build_trainable

    x, y = _data()
    config = CDGTConfig(n_players=2, encoder_hidden=(8,), head_hidden=(), neighbours=5, neighbour_weights=(0.0, 0.5),
                        neighbour_space="encoder", encoder_memory_dims=2, encoder_memory_rerank=10)
    model = build_trainable(config, np.asarray(y.mean(0)).ravel() + 0.01, MemoryShape.of(x, y))
    model.build((None, x.shape[1]))
    assert model.neighbours.shape == MemoryShape.of(x, y).in_space(8, 2, 10)
    settle(model, x, y, x, y, (0.0, 0.5), batch_size=16, rows=24)
    model.neighbours.weight.assign(0.5)
    embedded = np.asarray(model.shared_encoder(to_sparse_tensor(x), training=False))
    want = _reranked_reference(embedded, y.toarray(), embedded[:6], 2, 10, 5)
    np.testing.assert_allclose(model.neighbours(embedded[:6]).numpy(), want, atol=1e-5)
    answer = np.asarray(model(to_sparse_tensor(x[:6])))
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.neighbours.shape.rerank == 10
    np.testing.assert_allclose(np.asarray(loaded(to_sparse_tensor(x[:6]))), answer, atol=1e-6)
    with pytest.raises(ValueError, match="encoder_memory_rerank"):
        CDGTConfig(encoder_memory_rerank=-1)
