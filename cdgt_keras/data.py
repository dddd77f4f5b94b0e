"""MultiLabelData: an in-memory split (features, multi-hot labels, label names) for the fast paths.

Example:
    >>> import numpy as np, scipy.sparse as sp
    >>> data = MultiLabelData(np.zeros((2, 3), np.float32), sp.csr_matrix(np.eye(2, dtype=np.uint8)), ["a", "b"])
    >>> data.subset([1]).num_examples
    1
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True, eq=False)
class MultiLabelData:
    """Features [n, d] (float32 ndarray or csr_matrix), 0/1 uint8 csr labels [n, L] and the label names; with text
    features, `label_features`: the labels' names in the same space ([L, d] csr, cdgt_keras.label_text), else None;
    `ids`: each example's record id, when the split was read from records that carry them."""

    features: np.ndarray | sp.csr_matrix
    labels: sp.csr_matrix
    label_names: list[str]
    label_features: sp.csr_matrix | None = None
    ids: list[str] | None = None
    # the leading feature columns that are a sentence embedding of the text (cdgt_keras.text_embedding; 0: none)
    embedding_columns: int = 0

    @property
    def num_examples(self) -> int:
        return self.labels.shape[0]

    @property
    def num_features(self) -> int:
        return self.features.shape[1]

    @property
    def num_labels(self) -> int:
        return self.labels.shape[1]

    def subset(self, rows: np.ndarray) -> MultiLabelData:
        """The examples at `rows` (integer indices or a boolean mask), in order: `data.subset(idx[:10])`."""
        rows = np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        ids = None if self.ids is None else [self.ids[i] for i in rows]
        return MultiLabelData(self.features[rows], self.labels[rows], list(self.label_names), self.label_features, ids,
                              self.embedding_columns)
