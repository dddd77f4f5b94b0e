"""PlayerLayout: where each player's outputs land in the label space, as static index tables.

Players emit [batch, |L_i|] blocks. Concatenated (plus one zero column for padding) they form a flat row;
every table below indexes into that row, so fusion and the peer means of the disagreement term are gathers,
never Python loops over labels.

Example:
    >>> import numpy as np
    >>> layout = PlayerLayout.from_frequencies(np.linspace(0.5, 0.05, 8), n_players=2, overlap=0.5)
    >>> [p.tolist() for p in layout.player_labels], layout.coverage.tolist()   # labels 3 and 4 are shared
    ([[0, 1, 2, 3, 4], [3, 4, 5, 6, 7]], [1, 1, 1, 2, 2, 1, 1, 1])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cdgt_keras.labels import core_labels, label_order, partition_labels


@dataclass(frozen=True)
class PlayerLayout:
    """Static structure of the game: players' label blocks and the gather tables built from them."""

    num_labels: int
    player_labels: list[np.ndarray]  # L_i: sorted label ids of player i
    core_labels: list[np.ndarray]  # player i's core block (no overlap)
    offsets: np.ndarray  # [N + 1]: player i's block starts at offsets[i] in the flat row
    slot_index: np.ndarray  # [L, K] int32: flat positions of the players covering each label (pad = flat size)
    slot_player: np.ndarray  # [L, K] int32: which player sits in each slot (-1 = padding)
    slot_mask: np.ndarray  # [L, K] float32: 1 for a real slot
    overlap_positions: list[np.ndarray]  # O_i as positions within player i's block
    overlap_labels: list[np.ndarray]  # O_i as label ids
    peer_index: list[np.ndarray]  # [|O_i|, K-1] flat positions of the other players covering each label of O_i
    peer_mask: list[np.ndarray]  # [|O_i|, K-1] float32
    upper_half: np.ndarray  # [L] bool: label in the more frequent half of the order (for kl_head / kl_tail)

    @property
    def n_players(self) -> int:
        return len(self.player_labels)

    @property
    def flat_size(self) -> int:
        """Length of the concatenated player outputs (the padding column sits at this index)."""
        return int(self.offsets[-1])

    @property
    def coverage(self) -> np.ndarray:
        """Number of players covering each label."""
        return self.slot_mask.sum(axis=1).astype(np.int64)

    @classmethod
    def from_frequencies(cls, freq: np.ndarray, n_players: int, overlap: float) -> PlayerLayout:
        """Partition the labels by frequency (SPEC §2) and build every gather table."""
        freq = np.asarray(freq, dtype=np.float64)
        blocks = partition_labels(freq, n_players, overlap)
        cores = core_labels(freq, n_players)
        return cls.from_blocks(freq.size, blocks, cores, label_order(freq))

    @classmethod
    def from_blocks(
        cls, num_labels: int, blocks: list[np.ndarray], cores: list[np.ndarray], order: np.ndarray
    ) -> PlayerLayout:
        """Build the tables from explicit blocks (each label must be covered by at least one player)."""
        offsets = np.concatenate([[0], np.cumsum([b.size for b in blocks])]).astype(np.int64)
        pad = int(offsets[-1])
        covering: list[list[tuple[int, int]]] = [[] for _ in range(num_labels)]  # (player, flat position)
        for i, block in enumerate(blocks):
            for pos, label in enumerate(block):
                covering[label].append((i, int(offsets[i]) + pos))
        missing = [label for label, cov in enumerate(covering) if not cov]
        if missing:
            raise ValueError(f"labels {missing[:10]} are covered by no player")
        width = max(len(c) for c in covering)
        slot_index = np.full((num_labels, width), pad, dtype=np.int32)
        slot_player = np.full((num_labels, width), -1, dtype=np.int32)
        for label, cov in enumerate(covering):
            for k, (player, flat) in enumerate(cov):
                slot_index[label, k], slot_player[label, k] = flat, player
        overlap_positions, overlap_labels, peer_index, peer_mask = [], [], [], []
        for i, block in enumerate(blocks):
            positions = np.array([p for p, lab in enumerate(block) if len(covering[lab]) > 1], dtype=np.int32)
            labels = block[positions].astype(np.int32) if positions.size else np.zeros(0, np.int32)
            peers = np.full((labels.size, max(width - 1, 1)), pad, dtype=np.int32)
            for row, label in enumerate(labels):
                flats = [flat for player, flat in covering[label] if player != i]
                peers[row, : len(flats)] = flats
            overlap_positions.append(positions)
            overlap_labels.append(labels)
            peer_index.append(peers)
            peer_mask.append((peers != pad).astype(np.float32))
        upper = np.zeros(num_labels, dtype=bool)
        upper[np.asarray(order)[: (num_labels + 1) // 2]] = True
        return cls(
            num_labels=num_labels,
            player_labels=[np.asarray(b, dtype=np.int64) for b in blocks],
            core_labels=[np.asarray(c, dtype=np.int64) for c in cores],
            offsets=offsets,
            slot_index=slot_index,
            slot_player=slot_player,
            slot_mask=(slot_player >= 0).astype(np.float32),
            overlap_positions=overlap_positions,
            overlap_labels=overlap_labels,
            peer_index=peer_index,
            peer_mask=peer_mask,
            upper_half=upper,
        )
