"""An exported model with a label shortlist (cdgt_keras/shortlist.py): its `predict` answers one request by the
"rows" road, from the copy of the heads the export holds, with the Keras model's scores."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import tensorflow as tf
from one_row import predict_scores

from cdgt_keras.config import CDGTConfig
from cdgt_keras.inputs import to_sparse_tensor
from cdgt_keras.neighbours import MemoryShape

LABELS = 30


def _model():
    """A small untrained model with input-space votes (weight 0.7) and a shortlist of 5 of its 30 labels."""
    import keras

    from cdgt_keras.learning import build_trainable

    rng = np.random.default_rng(1)
    x = sp.random(50, 40, density=0.2, format="csr", random_state=1, dtype=np.float64)
    y = sp.csr_matrix((rng.random((50, LABELS)) < 0.15).astype(np.float32))
    keras.utils.set_random_seed(1)
    config = CDGTConfig(n_players=2, overlap=0.4, encoder_hidden=(8,), head_hidden=(), neighbours=3, shortlist=5)
    model = build_trainable(config, np.asarray(y.mean(0)).ravel() + 0.01, MemoryShape.of(x, y))
    model.build((None, x.shape[1]))
    model.neighbours.remember(x, y)
    model.neighbours.weight.assign(0.7)
    return model, x


@pytest.fixture
def rows_road(monkeypatch):
    """The "rows" road for a one-row request to the small model (see tests/cdgt_keras/test_shortlist.py)."""
    from cdgt_keras import shortlist

    monkeypatch.setattr(shortlist, "ROWS_FRACTION", 0.5)


def test_an_export_serves_the_shortlist_by_the_rows_road(tmp_path, rows_road) -> None:
    from cdgt.serving.export import export_keras_model

    model, x = _model()
    want = np.asarray(model(to_sparse_tensor(x[:3])))
    path = export_keras_model(model, str(tmp_path / "export"), [f"l{i}" for i in range(LABELS)],
                              np.full(LABELS, 0.5, np.float32), feature_kind="sparse", input_width=x.shape[1])
    assert model.served_rows is not None
    served = tf.saved_model.load(path)
    assert served.served_rows.kernel.shape == model.served_rows.kernel.shape

    def scores(i: int) -> np.ndarray:
        return predict_scores(served, x[i])

    for i in range(3):
        np.testing.assert_allclose(scores(i), want[i], atol=1e-6)
    served.served_rows.kernel.assign(tf.zeros_like(served.served_rows.kernel))  # what a one-row call reads
    assert not np.allclose(scores(0), want[0], atol=1e-4)
