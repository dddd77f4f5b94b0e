"""Label statistics, the overlapping partition and PlayerLayout (SPEC §1-2), on hand cases and properties."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from cdgt_keras.labels import head_tail_split, label_frequencies, label_order, partition_bounds, partition_labels
from cdgt_keras.layout import PlayerLayout

# 4 examples over 5 labels; counts [3, 1, 0, 2, 1] → freq = counts / 4
DENSE = np.array([[1, 0, 0, 1, 0], [1, 1, 0, 0, 0], [1, 0, 0, 1, 0], [0, 0, 0, 0, 1]])
LISTS = [[0, 3], [1, 0], [3, 0, 0], [4]]  # the same sets; a repeated id counts once


@pytest.mark.parametrize("labels", [DENSE, sp.csr_matrix(DENSE), sp.csc_matrix(DENSE), LISTS, iter(LISTS)])
def test_label_frequencies_same_for_every_input(labels):
    counts, freq = label_frequencies(labels, num_labels=5)
    assert counts.tolist() == [3, 1, 0, 2, 1]
    np.testing.assert_allclose(freq, [0.75, 0.25, 0.0, 0.5, 0.25])


def test_label_frequencies_errors():
    with pytest.raises(ValueError, match="out of range"):
        label_frequencies([[0], [5]], num_labels=5)
    with pytest.raises(ValueError, match="out of range"):
        label_frequencies([[-1]], num_labels=5)
    with pytest.raises(ValueError, match="shape"):
        label_frequencies(DENSE, num_labels=4)
    with pytest.raises(ValueError, match="num_labels"):
        label_frequencies([[0]], num_labels=0)


def test_label_order_ties_go_to_lower_id():
    # freq 0.5 at ids 1 and 3, 0.3 at ids 0 and 4, 0.1 at id 2
    assert label_order(np.array([0.3, 0.5, 0.1, 0.5, 0.3])).tolist() == [1, 3, 0, 4, 2]


def _positions(freq, n_players, overlap):
    """Each player's labels as sorted positions in the frequency order."""
    rank = np.argsort(label_order(freq))
    return [sorted(rank[block].tolist()) for block in partition_labels(freq, n_players, overlap)]


DESC = np.linspace(1.0, 0.05, 10)  # ids already in frequency order: position = id


@pytest.mark.parametrize(
    ("n_labels", "n_players", "overlap", "expected"),
    [
        # S = floor(10/3) = 3, O = floor(3*0.2/2) = floor(0.3) = 0; the remainder (position 9) goes to player 3
        (10, 3, 0.2, [range(0, 3), range(3, 6), range(6, 10)]),
        # O = floor(3*0.7/2) = floor(1.05) = 1: cores [0,2],[3,5],[6,9] widened by one position each side
        (10, 3, 0.7, [range(0, 4), range(2, 7), range(5, 10)]),
        # S = 10, O = floor(10*0.5/2) = 2: [0, 9+2], [10-2, 19]
        (20, 2, 0.5, [range(0, 12), range(8, 20)]),
        (10, 1, 0.5, [range(0, 10)]),  # N = 1: one predictor over all labels
        (10, 3, 0.0, [range(0, 3), range(3, 6), range(6, 10)]),
        (12, 4, 0.0, [range(0, 3), range(3, 6), range(6, 9), range(9, 12)]),
    ],
)
def test_partition_hand_cases(n_labels, n_players, overlap, expected):
    freq = np.linspace(1.0, 0.05, n_labels)
    assert _positions(freq, n_players, overlap) == [list(r) for r in expected]


def test_partition_follows_frequency_not_id():
    # order: 1, 3 (0.5 tie → lower id first), 2 (0.3), 0 (0.1); S = 2, O = 0
    blocks = partition_labels(np.array([0.1, 0.5, 0.3, 0.5]), n_players=2, overlap=0.0)
    assert [b.tolist() for b in blocks] == [[1, 3], [0, 2]]


def test_partition_overlap_count_is_exact():
    # L = 200, N = 2: S = 100, O = floor(100 * 0.58 / 2) = 29 → the two players share 2 * 29 = 58 labels
    blocks = partition_labels(np.linspace(1.0, 0.01, 200), n_players=2, overlap=0.58)
    assert np.intersect1d(blocks[0], blocks[1]).size == 58


@settings(max_examples=200, deadline=None)
@given(n_labels=st.integers(1, 99), n_players=st.integers(1, 8), percent=st.integers(0, 99), seed=st.integers(0, 99))
def test_partition_properties(n_labels, n_players, percent, seed):
    if n_labels < n_players:
        with pytest.raises(ValueError, match="n_players"):
            partition_bounds(n_labels, n_players, percent / 100)
        return
    freq = np.random.default_rng(seed).integers(0, 5, n_labels) / 5  # many ties
    blocks = partition_labels(freq, n_players, percent / 100)
    assert len(blocks) == n_players
    assert sorted(set(np.concatenate(blocks).tolist())) == list(range(n_labels))  # every label covered
    size = n_labels // n_players
    extra = size * percent // 200  # O = floor(S * rho / 2), exact in integers (rho = percent / 100)
    for i in range(n_players - 1):
        assert np.intersect1d(blocks[i], blocks[i + 1]).size == 2 * extra
        for j in range(i + 2, n_players):
            assert np.intersect1d(blocks[i], blocks[j]).size == 0
    cores = partition_labels(freq, n_players, 0.0)
    assert sum(c.size for c in cores) == n_labels and cores[-1].size == n_labels - (n_players - 1) * size


@pytest.mark.parametrize(
    ("args", "match"),
    [((10, 0, 0.2), "n_players"), ((10, 3, 1.0), "overlap"), ((10, 3, -0.1), "overlap"), ((2, 3, 0.2), "n_players")],
)
def test_partition_errors(args, match):
    with pytest.raises(ValueError, match=match):
        partition_bounds(*args)


def test_head_tail_counts_are_ceil():
    freq = np.arange(15, 0, -1) / 20  # ids in frequency order
    head, tail = head_tail_split(freq, 0.2, 0.2)
    # ceil(0.2 * 15) = 3 (0.2 * 15 is 3.0000000000000004 in floats; a naive ceil would give 4)
    assert head.tolist() == [0, 1, 2] and tail.tolist() == [12, 13, 14]
    head, tail = head_tail_split(freq, 0.1, 0.3)  # ceil(1.5) = 2, ceil(4.5) = 5
    assert head.tolist() == [0, 1] and tail.tolist() == [10, 11, 12, 13, 14]


def test_zero_frequency_labels_are_tail_and_never_head():
    freq = np.array([0.0, 0.0, 0.5, 0.1])  # order 2, 3, 0, 1
    head, tail = head_tail_split(freq, 0.75, 0.25)  # head count 3 → {2, 3, 0}; tail count 1 → {1} ∪ zeros
    assert tail.tolist() == [0, 1] and head.tolist() == [2, 3]
    head, tail = head_tail_split(np.zeros(5), 0.2, 0.2)
    assert head.size == 0 and tail.tolist() == [0, 1, 2, 3, 4]


@settings(max_examples=100, deadline=None)
@given(freq=st.lists(st.sampled_from([0.0, 0.1, 0.2, 0.5, 0.9]), min_size=1, max_size=40),
       head=st.integers(0, 10), tail=st.integers(0, 10))
def test_head_tail_disjoint(freq, head, tail):
    freq = np.array(freq)
    h, t = head_tail_split(freq, head / 10, tail / 10)
    assert np.intersect1d(h, t).size == 0
    assert set(np.flatnonzero(freq == 0)) <= set(t.tolist())
    assert t.size >= -(-tail * freq.size // 10)  # at least ceil(tail_fraction * L)


def test_player_layout_hand_case():
    # freq descending by id; S = 3, O = floor(3 * 0.7 / 2) = 1 → players {0,1,2,3} and {2,3,4,5}
    layout = PlayerLayout.from_frequencies(np.array([0.6, 0.5, 0.4, 0.3, 0.2, 0.1]), n_players=2, overlap=0.7)
    assert [p.tolist() for p in layout.player_labels] == [[0, 1, 2, 3], [2, 3, 4, 5]]
    assert [c.tolist() for c in layout.core_labels] == [[0, 1, 2], [3, 4, 5]]
    assert layout.coverage.tolist() == [1, 1, 2, 2, 1, 1]
    assert layout.offsets.tolist() == [0, 4, 8] and layout.flat_size == 8
    # flat row: player 1 at 0..3, player 2 at 4..7, padding column at 8
    assert layout.slot_index.tolist() == [[0, 8], [1, 8], [2, 4], [3, 5], [6, 8], [7, 8]]
    assert layout.slot_player.tolist() == [[0, -1], [0, -1], [0, 1], [0, 1], [1, -1], [1, -1]]
    assert layout.slot_mask.tolist() == [[1, 0], [1, 0], [1, 1], [1, 1], [1, 0], [1, 0]]
    assert [o.tolist() for o in layout.overlap_labels] == [[2, 3], [2, 3]]
    assert [o.tolist() for o in layout.overlap_positions] == [[2, 3], [0, 1]]
    # the peer of player 1 on label 2 is player 2's position 0 → flat 4; on label 3 flat 5; and back
    assert [p.tolist() for p in layout.peer_index] == [[[4], [5]], [[2], [3]]]
    assert [m.tolist() for m in layout.peer_mask] == [[[1], [1]], [[1], [1]]]
    assert layout.upper_half.tolist() == [True, True, True, False, False, False]


def test_player_layout_three_players_peers():
    # L = 9, N = 3, rho = 0.7: S = 3, O = 1 → {0..3}, {2..6}, {5..8}; labels 2,3 shared by 1-2, 5,6 by 2-3
    layout = PlayerLayout.from_frequencies(np.linspace(0.9, 0.1, 9), n_players=3, overlap=0.7)
    assert layout.coverage.tolist() == [1, 1, 2, 2, 1, 2, 2, 1, 1]
    assert [o.tolist() for o in layout.overlap_labels] == [[2, 3], [2, 3, 5, 6], [5, 6]]
    # player 2's block starts at flat 4, player 3's at 9: player 2's peers are player 1 (flat 2, 3) and 3 (9, 10)
    assert layout.offsets.tolist() == [0, 4, 9, 13]
    assert layout.peer_index[1].ravel().tolist() == [2, 3, 9, 10]
    # upper half: the first ceil(9/2) = 5 labels of the order
    assert np.flatnonzero(layout.upper_half).tolist() == [0, 1, 2, 3, 4]
