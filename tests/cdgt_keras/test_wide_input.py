"""`wide_input="embedding"`: the wide parts read the input's leading text-embedding columns alone, so the TF-IDF
columns after them never reach a linear part; the cut survives saving, and every training road sizes it from the
data (an input without embedding columns is a clear error)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import scipy.sparse as sp
import tensorflow as tf

from cdgt_keras.config import CDGTConfig
from cdgt_keras.data import MultiLabelData
from cdgt_keras.learning import build_trainable, wide_columns
from cdgt_keras.model import CDGTModel
from cdgt_keras.training import fit_model

FREQ = np.array([0.5, 0.3, 0.2, 0.1])
EMBEDDED = {"wide": "all", "wide_input": "embedding", "text_embedding": "all-MiniLM-L6-v2"}


def _model(columns: int) -> CDGTModel:
    keras.utils.set_random_seed(0)
    config = CDGTConfig(n_players=2, overlap=0.0, encoder_hidden=(4,), head_hidden=(), dropout=0.0, wide="all")
    model = CDGTModel(config, FREQ, wide_columns=columns)
    model.build((None, 7))
    for i, part in enumerate(model.wide):
        part.kernel.assign(np.random.default_rng(i).standard_normal(part.kernel.shape))
    return model


def _sparse(dense: np.ndarray) -> tf.SparseTensor:
    return tf.sparse.from_dense(tf.constant(dense, tf.float32))


def test_the_wide_parts_read_only_the_leading_columns():
    model = _model(3)
    assert [tuple(part.kernel.shape) for part in model.wide] == [(3, 2), (3, 2)]
    x = np.random.default_rng(1).uniform(0.1, 1.0, (4, 7)).astype(np.float32)
    changed_tail = x.copy()
    changed_tail[:, 3:] = np.random.default_rng(2).uniform(0.1, 1.0, (4, 4))
    changed_head = x.copy()
    changed_head[:, 0] += 1.0
    for i, part in enumerate(model.wide):
        expected = model.wide_scale[i] * x[:, :3] @ part.kernel.numpy()  # hand-computed: the first 3 columns only
        for form in (x, _sparse(x)):
            np.testing.assert_allclose(model._wide_logits(i, form).numpy(), expected, rtol=1e-5)
        np.testing.assert_allclose(model._wide_logits(i, _sparse(changed_tail)).numpy(), expected, rtol=1e-5)
        assert not np.allclose(model._wide_logits(i, _sparse(changed_head)).numpy(), expected)


def test_without_a_cut_the_wide_parts_read_every_column():
    model = _model(0)
    assert [tuple(part.kernel.shape) for part in model.wide] == [(7, 2), (7, 2)]
    x = np.random.default_rng(1).uniform(0.1, 1.0, (2, 7)).astype(np.float32)
    expected = model.wide_scale[0] * x @ model.wide[0].kernel.numpy()
    np.testing.assert_allclose(model._wide_logits(0, _sparse(x)).numpy(), expected, rtol=1e-5)


def test_the_cut_is_saved_with_the_model(tmp_path):
    model = _model(3)
    model.compile(optimizer="adam")
    x = np.random.default_rng(1).uniform(0.1, 1.0, (2, 7)).astype(np.float32)
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    assert loaded.wide_columns == 3
    np.testing.assert_allclose(np.asarray(loaded(x)), np.asarray(model(x)), rtol=1e-5)


def test_wide_columns_follows_the_config_and_the_data():
    config = CDGTConfig(**EMBEDDED)
    assert wide_columns(config, 384) == 384
    assert wide_columns(config.replace(wide_input="features"), 384) == 0
    assert wide_columns(config.replace(wide="none"), 0) == 0  # no wide parts: nothing to cut
    with pytest.raises(ValueError, match="no text embedding columns"):
        wide_columns(config, 0)
    with pytest.raises(ValueError, match="wide_input"):
        CDGTConfig(wide="all", wide_input="embedding")  # no embedding named
    with pytest.raises(ValueError, match="wide_input"):
        CDGTConfig(wide_input="tfidf")
    assert CDGTConfig(wide_input="embedding").wide == "none"  # inert without wide parts: accepted


def _split(rows: int, seed: int, embedded: int) -> MultiLabelData:
    rng = np.random.default_rng(seed)
    x = sp.csr_matrix(rng.uniform(0, 1, (rows, 8)) * (rng.uniform(0, 1, (rows, 8)) < 0.6), dtype=np.float32)
    y = sp.csr_matrix((rng.uniform(0, 1, (rows, 4)) < 0.4).astype(np.uint8))
    return MultiLabelData(x, y, ["a", "b", "c", "d"], embedding_columns=embedded)


def test_fit_model_sizes_the_cut_from_the_data():
    config = CDGTConfig(**EMBEDDED, n_players=2, encoder_hidden=(4,), head_hidden=(), epochs=1, batch_size=8)
    train = _split(32, 0, 5)
    assert train.subset(np.arange(4)).embedding_columns == 5  # a subset keeps it
    model, _, _ = fit_model(config, train, _split(16, 1, 5))
    assert model.wide_columns == 5
    assert all(part.kernel.shape[0] == 5 for part in model.wide)
    assert model.dense_columns == 5 and model.shared_encoder.blocks[0].dense_columns == 5  # the block, densely
    with pytest.raises(ValueError, match="no text embedding columns"):
        fit_model(config, _split(32, 0, 0), _split(16, 1, 0))


def test_the_embedding_as_a_dense_block_trains_the_model_the_sparse_road_trains():
    """`dense_columns` (fit_model sets it to the data's embedding columns) changes how the encoder's first layer
    multiplies, not what: from the same weights, the same batches train the same model, up to float32's order of
    summation, and the cut is saved with the model."""
    config = CDGTConfig(**EMBEDDED, n_players=2, encoder_hidden=(4,), head_hidden=(), dropout=0.0)
    train = _split(32, 0, 5)
    x, y = _sparse(train.features.toarray()), train.labels.toarray().astype(np.float32)
    models = []
    for dense in (5, 0):
        model = build_trainable(config, FREQ, num_train=32, wide_columns=5, dense_columns=dense)
        model.build((None, 8))
        models.append(model)
    split, whole = models
    assert split.dense_columns == 5 and split.shared_encoder.blocks[0].dense_columns == 5
    whole.set_weights(split.get_weights())
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
    for model in models:
        model.fit(data, epochs=2, verbose=0)
    for a, b in zip(split.get_weights(), whole.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(split(x).numpy(), whole(x).numpy(), rtol=1e-4, atol=1e-5)
    assert CDGTModel.from_config(split.get_config()).dense_columns == 5

