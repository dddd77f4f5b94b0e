"""Row blocks in threads (cdgt_keras.threads) give what one call on the whole array gives: the blocks themselves,
the thresholds' counts and the tail search's top k."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from cdgt_keras import tail_memory, threads
from cdgt_keras.thresholds import ThresholdCounts


def test_blocks_cover_every_row_once_in_order() -> None:
    array = np.arange(70.0).reshape(10, 7)
    for entries in (1, 7, 15, 69, 70, 10_000):
        blocks = threads.map_rows(lambda block: block, array, entries=entries)
        np.testing.assert_array_equal(np.concatenate(blocks), array)
        assert all(block.shape[0] >= 1 for block in blocks)
        assert len(blocks) == max(1, int(np.ceil(10 / max(1, entries // 7))))
    empty = threads.map_rows(lambda block: block.shape, np.zeros((0, 4)))
    assert empty == [(0, 4)]


def test_counts_and_top_k_are_the_same_in_blocks(monkeypatch) -> None:
    rng = np.random.default_rng(0)
    probs = rng.random((37, 11)).astype(np.float32)
    probs[3, :] = probs[3, 0]  # ties within a row
    truth = sp.csr_matrix(rng.random((37, 11)) < 0.2)
    results = []
    for entries in (1 << 20, 13):  # one block; blocks of one row each (a row holds 11 entries)
        monkeypatch.setattr(threads, "BLOCK_ENTRIES", entries)
        counts = ThresholdCounts(11)
        counts.add(probs, truth)
        best = np.sort(tail_memory._best_k(probs, 3), axis=1)
        results.append((counts.predicted, counts.true_pos, counts.positives, best))
    for one, blocked in zip(*results):
        np.testing.assert_array_equal(one, blocked)
    grid = ThresholdCounts(11).grid  # and the counts by hand: entries of label 0 above each threshold
    np.testing.assert_array_equal(results[0][0][0], [(probs[:, 0] > g).sum() for g in grid.astype(np.float32)])


def test_blends_and_top_k_in_blocks_are_the_same_bits(monkeypatch) -> None:
    from cdgt_keras import metrics, settling

    rng = np.random.default_rng(1)
    scores = rng.random((41, 13)).astype(np.float32)
    extra = rng.random((41, 13)).astype(np.float32)
    scores[5, :] = scores[5, 0]  # a row of ties: the lower ids first
    whole = (1.0 - 0.3) * scores + 0.3 * extra  # the formula on the whole arrays
    for entries in (1 << 20, 13, 40):  # one block; rows one at a time; blocks of three rows
        monkeypatch.setattr(threads, "BLOCK_ENTRIES", entries)
        monkeypatch.setattr(metrics, "_CHUNK_ELEMENTS", entries)
        blended = settling.blend(scores, extra, 0.3)
        assert blended.dtype == whole.dtype and blended.tobytes() == whole.tobytes()
        assert tail_memory.blend_all(scores, [extra], [0.3]).tobytes() == whole.tobytes()
        top = metrics._dense_topk(blended, 4)
        reference = np.argsort(-blended, axis=1, kind="stable")[:, :4]  # an independent top 4, ties to lower ids
        np.testing.assert_array_equal(top, reference)
    assert metrics._dense_topk(np.zeros((0, 13), np.float32), 4).shape == (0, 4)
