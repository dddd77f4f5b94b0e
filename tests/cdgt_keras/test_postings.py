"""Posting lists (cdgt_keras/postings.py): the product that reads the query's features' entries equals a dense
product by numpy and the plain sparse-dense one, whichever road `product` takes; the memories that use it answer
the same one row at a time as in a batch."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import tensorflow as tf

from cdgt_keras import postings
from cdgt_keras.centroids import LabelCentroids, centroid_nnz
from cdgt_keras.inputs import to_sparse_tensor
from cdgt_keras.neighbours import MemoryShape, NeighbourVotes


def _matrix(features: int = 40, columns: int = 25, density: float = 0.15, seed: int = 0):
    """A random M [features, columns] as the layers keep it: entries in feature order, splits, values; features
    30 to 39 have no entry."""
    m = sp.random(features, columns, density=density, format="lil", random_state=seed, dtype=np.float32)
    m[30:] = 0.0
    m = sp.csr_matrix(m)  # [features, columns], rows in feature order
    m.sort_indices()
    feature = np.repeat(np.arange(features, dtype=np.int64), np.diff(m.indptr))
    entries = np.stack([feature, m.indices.astype(np.int64)], axis=1)
    return m, tf.constant(m.indptr.astype(np.int64)), tf.constant(entries), tf.constant(m.data)


def _query(rows: int, features: int = 40, density: float = 0.1, seed: int = 1) -> sp.csr_matrix:
    q = sp.random(rows, features, density=density, format="lil", random_state=seed, dtype=np.float32)
    q[0] = 0.0  # a row without features
    q[min(1, rows - 1), 35] = 2.0  # a feature M has no entry for
    q = sp.csr_matrix(q)
    q.eliminate_zeros()
    return q


def test_unit_rows_scales_each_row_to_length_one_and_leaves_empty_rows():
    q = _query(6)
    got = tf.sparse.to_dense(postings.unit_rows(to_sparse_tensor(q))).numpy()
    norms = np.linalg.norm(q.toarray(), axis=1, keepdims=True)
    want = np.divide(q.toarray(), norms, out=np.zeros_like(q.toarray()), where=norms > 0)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("rows", [1, 5, 32])
def test_both_roads_equal_the_dense_product(rows):
    m, splits, entries, values = _matrix()
    q = _query(rows)
    want = q.toarray() @ m.toarray()
    query = to_sparse_tensor(q)
    posting = postings.posting_product(query, splits, entries, values, m.shape[1]).numpy()
    plain = postings.plain_product(query, entries, values, m.shape[0], m.shape[1]).numpy()
    chosen = postings.product(query, splits, entries, values, m.shape[0], m.shape[1]).numpy()
    for got in (posting, plain, chosen):
        assert got.shape == (rows, m.shape[1])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(posting, plain)  # one kernel, the same entries in the same order: to the bit


def test_the_roads_agree_to_the_bit_on_a_memory_of_real_sizes():
    """Long lists, 700 features and 3,000 columns, queries of one to 64 rows sharing features in any order."""
    rng = np.random.default_rng(3)
    m = sp.random(700, 3000, density=0.02, format="csr", random_state=3, dtype=np.float32)
    m.data = rng.random(m.nnz).astype(np.float32)
    m.sort_indices()
    feature = np.repeat(np.arange(700, dtype=np.int64), np.diff(m.indptr))
    splits, values = tf.constant(m.indptr.astype(np.int64)), tf.constant(m.data)
    entries = tf.constant(np.stack([feature, m.indices.astype(np.int64)], axis=1))
    for rows in (1, 7, 64):
        q = sp.random(rows, 700, density=0.05, format="csr", random_state=rows, dtype=np.float32)
        query = postings.unit_rows(to_sparse_tensor(q))
        posting = postings.posting_product(query, splits, entries, values, 3000).numpy()
        plain = postings.plain_product(query, entries, values, 700, 3000).numpy()
        np.testing.assert_array_equal(posting, plain)
        np.testing.assert_allclose(posting, tf.sparse.to_dense(query).numpy() @ m.toarray(), rtol=1e-5, atol=1e-6)


def test_product_reads_the_posting_lists_only_when_they_hold_few_of_the_entries(monkeypatch):
    m, splits, entries, values = _matrix()
    taken = []
    real_posting, real_plain = postings.posting_product, postings.plain_product
    monkeypatch.setattr(postings, "posting_product", lambda *a: (taken.append("postings"), real_posting(*a))[1])
    monkeypatch.setattr(postings, "plain_product", lambda *a: (taken.append("plain"), real_plain(*a))[1])
    one = sp.csr_matrix(([1.0], ([0], [3])), shape=(1, 40), dtype=np.float32)  # one feature: its list alone
    every = sp.csr_matrix(np.ones((4, 40), np.float32))  # every feature: all of M's entries to read
    assert m.indptr[4] - m.indptr[3] < m.nnz / postings.READ_RATIO
    postings.product(to_sparse_tensor(one), splits, entries, values, 40, 25)
    postings.product(to_sparse_tensor(every), splits, entries, values, 40, 25)
    assert taken == ["postings", "plain"]


def _memory(n: int = 60, features: int = 50, labels: int = 12, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = sp.random(n, features, density=0.08, format="csr", random_state=seed, dtype=np.float32)
    x.data = rng.random(x.nnz).astype(np.float32) + 0.1
    y = sp.csr_matrix((rng.random((n, labels)) < 0.2).astype(np.float32))
    return x, y


def test_the_memories_answer_a_row_alone_as_in_a_batch():
    """A lone row takes the posting lists, a batch of 32 the plain product: the answers agree."""
    x, y = _memory()
    votes = NeighbourVotes(MemoryShape.of(x, y), num_labels=y.shape[1], k=5)
    votes.remember(x, y)
    cents = LabelCentroids(num_features=x.shape[1], num_labels=y.shape[1], nnz=centroid_nnz(x, y, 0))
    cents.remember(x, y)
    q = x[:32].copy()
    q.data = q.data * 3.0  # not unit length: the layers scale it
    for layer in (votes, cents):
        batch = layer(to_sparse_tensor(q)).numpy()
        alone = np.concatenate([layer(to_sparse_tensor(q[i:i + 1])).numpy() for i in range(q.shape[0])])
        np.testing.assert_allclose(alone, batch, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(0, 40), (3, 40)])
def test_an_empty_batch_and_rows_without_entries_give_zeros(shape):
    _, splits, entries, values = _matrix()
    empty = to_sparse_tensor(sp.csr_matrix(shape, dtype=np.float32))
    no_entries = to_sparse_tensor(sp.csr_matrix(([1.0, 2.0], ([0, 0], [31, 35])), shape=(1, 40), dtype=np.float32))
    for query, rows in ((empty, shape[0]), (no_entries, 1)):
        for got in (postings.posting_product(query, splits, entries, values, 25),
                    postings.product(query, splits, entries, values, 40, 25)):
            assert got.numpy().tolist() == [[0.0] * 25] * rows


def test_cap_lists_keeps_each_features_largest_entries_and_counts_them():
    m = sp.csr_matrix(np.array([[0.5, 0.0, 1.0], [0.9, 2.0, 0.0], [0.9, 0.0, 0.0], [0.1, 3.0, 0.0]], np.float32))
    # by hand: feature 0 keeps 0.9 (row 1) and 0.9 (row 2; the tie with row 1 goes to the lower row, both kept);
    # feature 1 keeps both; feature 2 its one entry
    want = [[0.0, 0.0, 1.0], [0.9, 2.0, 0.0], [0.9, 0.0, 0.0], [0.0, 3.0, 0.0]]
    np.testing.assert_array_equal(postings.cap_lists(m, 2).toarray(), np.array(want, np.float32))
    assert postings.capped_nnz(m, 2) == postings.cap_lists(m, 2).nnz == 5
    assert postings.cap_lists(m, 1).toarray()[:, 0].tolist() == [0.0, np.float32(0.9), 0.0, 0.0]  # lower row
    assert postings.cap_lists(m, 0) is m and postings.cap_lists(m, 4) is m  # nothing dropped: the same matrix
    assert postings.capped_nnz(m, 0) == m.nnz


def test_column_counts_and_capped_columns_read_a_matrix_as_its_column_major_copy(monkeypatch):
    """Counted off the row-major indices (in chunks), entries as a csc copy has them: duplicates summed, zeros
    (given, or summed to) not counted; `capped_columns` is `cap_lists` in column-major order."""
    rng = np.random.default_rng(5)
    dense = rng.choice([0.0, 0.0, -0.5, 0.25, 1.0], size=(40, 9)).astype(np.float32)
    m = sp.csr_matrix(dense)
    m.data[::7] = 0.0  # explicit zeros
    coo = m.tocoo()
    dup = sp.csr_matrix((np.r_[coo.data, [2.0, -2.0, 1.5]], (np.r_[coo.row, [0, 0, 1]], np.r_[coo.col, [8, 8, 8]])),
                        shape=m.shape)  # two that sum to zero: one more entry only where row 1 gets 1.5
    monkeypatch.setattr(postings, "COUNT_CHUNK", 16)
    for matrix in (m, dup, sp.csc_matrix(dup)):
        want = sp.csc_matrix(matrix, copy=True)
        want.sum_duplicates()
        want.eliminate_zeros()
        assert postings.column_counts(matrix).tolist() == np.diff(want.indptr).tolist()
        for cap in (0, 1, 3, 40):
            got = postings.capped_columns(matrix, cap)
            assert got.format == "csc" and got.has_sorted_indices
            np.testing.assert_array_equal(got.toarray(), sp.csr_matrix(postings.cap_lists(matrix, cap)).toarray())
            assert got.nnz == postings.capped_nnz(matrix, cap)


@pytest.mark.parametrize("keep", [0, 1, 3, 7])
def test_largest_per_row_keeps_each_rows_largest_entries_ties_to_the_lower_column(keep):
    """Against each row's entries sorted by value descending, then column, in plain Python; values drawn from a
    few levels, so that rows tie often at the cut; rows shorter than `keep` kept whole, empty rows too."""
    rng = np.random.default_rng(keep)
    dense = rng.choice([0.0, 0.0, 0.0, 0.25, 0.5, 1.0], size=(30, 12)).astype(np.float32)
    dense[3] = 0.0
    m = sp.csr_matrix(dense)
    want = np.zeros_like(dense)
    for r, row in enumerate(dense):
        for c in sorted(np.flatnonzero(row), key=lambda c: (-row[c], c))[:keep]:
            want[r, c] = row[c]
    got = postings.largest_per_row(sp.csr_matrix(m), keep)
    np.testing.assert_array_equal(got.toarray(), want)
    assert got.nnz == np.count_nonzero(want)


def test_capped_votes_are_partial_sums_of_the_exact_cosines_and_the_shape_counts_them():
    x = sp.csr_matrix(sp.random(30, 12, density=0.5, random_state=3, dtype=np.float32))
    y = sp.csr_matrix((np.random.default_rng(0).random((30, 5)) < 0.3).astype(np.float32))
    shape = MemoryShape.of(x, y, list_cap=4)
    unit = sp.csr_matrix(x.multiply(1.0 / np.sqrt(np.asarray(x.multiply(x).sum(1))))).astype(np.float64)
    kept = postings.cap_lists(unit, 4)
    assert shape.features_nnz == kept.nnz and shape.list_cap == 4 and np.diff(sp.csc_matrix(kept).indptr).max() == 4
    layer = NeighbourVotes(shape, num_labels=5, k=30)
    layer.remember(x, y)
    q = sp.csr_matrix(sp.random(3, 12, density=0.4, random_state=4, dtype=np.float32))
    nearest, ids = (t.numpy() for t in layer.nearest(to_sparse_tensor(q)))
    dense_q = q.toarray() / np.maximum(np.linalg.norm(q.toarray(), axis=1, keepdims=True), 1e-12)
    want = dense_q @ kept.toarray().T  # the exact cosines' terms on the kept entries only
    assert not np.allclose(want, dense_q @ unit.toarray().T)  # the cap dropped terms these queries have
    for row in range(3):  # k = 30: every training row, in order of similarity
        np.testing.assert_allclose(nearest[row], want[row][ids[row]], atol=1e-6)
        np.testing.assert_allclose(nearest[row], np.sort(want[row])[::-1], atol=1e-6)
    with pytest.raises(ValueError, match="memory holds"):  # a layer shaped without the cap refuses capped data
        NeighbourVotes(MemoryShape.of(x, y), num_labels=5, k=3).remember(postings.cap_lists(x, 1), y)


@pytest.mark.parametrize("cap", [0, 4])
def test_a_dense_block_of_leading_columns_votes_as_its_lists_did(cap: int) -> None:
    """The leading columns (a text embedding's) kept as a dense block, capped as their lists were: the same
    similarities (1e-6) and votes, with the lists holding the other columns only and the shape counting those."""
    from cdgt_keras.neighbours import BLOCK_CHUNK_ROWS

    rng = np.random.default_rng(7)
    lead = rng.normal(size=(30, 5)).astype(np.float32)  # every row fills the block, negative values too
    x = sp.hstack([sp.csr_matrix(lead), sp.random(30, 12, density=0.3, random_state=8, dtype=np.float32)]).tocsr()
    y = sp.csr_matrix((rng.random((30, 4)) < 0.3).astype(np.float32))
    lists, block = (NeighbourVotes(MemoryShape.of(x, y, list_cap=cap, dense_columns=n), num_labels=4, k=6)
                    for n in (0, 5))
    for layer in (lists, block):
        layer.remember(x, y)
    capped = 4 * 5 if cap else 30 * 5  # the block's columns: all 30 rows each, or the 4 largest
    assert block.shape.features_nnz == lists.shape.features_nnz - capped and block.shape.dense_columns == 5
    assert int(block.x_splits.numpy()[5]) == 0 and np.count_nonzero(block.x_block.numpy()) == capped
    q = sp.hstack([sp.csr_matrix(rng.normal(size=(BLOCK_CHUNK_ROWS + 3, 5)).astype(np.float32)),
                   sp.random(BLOCK_CHUNK_ROWS + 3, 12, density=0.4, random_state=9, dtype=np.float32)]).tocsr()
    (want, want_ids), (got, got_ids) = ([t.numpy() for t in layer.nearest(to_sparse_tensor(q))]
                                        for layer in (lists, block))
    np.testing.assert_allclose(got, want, atol=1e-6)
    np.testing.assert_array_equal(got_ids, want_ids)
    np.testing.assert_allclose(block(to_sparse_tensor(q)).numpy(), lists(to_sparse_tensor(q)).numpy(), atol=1e-6)
    with pytest.raises(ValueError, match="dense_columns"):
        MemoryShape.of(x, y, dense_columns=18)


def test_settle_stores_capped_tables_and_an_uncapped_model_is_unchanged():
    import keras

    from cdgt_keras.centroids import centroid_matrix
    from cdgt_keras.config import CDGTConfig
    from cdgt_keras.learning import build_trainable
    from cdgt_keras.settling import settle

    x = sp.csr_matrix(sp.random(40, 15, density=0.5, random_state=5, dtype=np.float32))
    y = sp.csr_matrix((np.random.default_rng(1).random((40, 6)) < 0.4).astype(np.float32))
    answers = {}
    for cap in (0, 3, 100):
        config = CDGTConfig(n_players=2, encoder_hidden=(8,), head_hidden=(), centroid_features=10,
                            centroid_weights=(0.5,), neighbours=3, neighbour_weights=(0.3,), memory_list_cap=cap)
        keras.utils.set_random_seed(0)
        model = build_trainable(config, np.asarray(y.mean(0)).ravel() + 0.01, MemoryShape.for_config(config, x, y))
        model.build((None, x.shape[1]))
        settle(model, x, y, x, y, (0.3,), batch_size=16, rows=24)
        lists = np.diff(model.centroids.splits.numpy())
        assert model.centroids.nnz == postings.capped_nnz(centroid_matrix(x, y, 10), cap) and \
            (cap == 0 or lists.max() <= cap)
        assert cap == 0 or np.diff(model.neighbours.x_splits.numpy()).max() <= cap
        answers[cap] = np.asarray(model(to_sparse_tensor(x[:6])))
    np.testing.assert_array_equal(answers[100], answers[0])  # a cap above every list's length changes no bit
    assert not np.array_equal(answers[3], answers[0])
