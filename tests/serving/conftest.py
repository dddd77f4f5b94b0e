"""Tiny exported models (dense, sparse, text) shared by the serving tests: built once per session, untrained
(the tests compare the export with the Keras model it came from, so learned weights add nothing but time)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

NUM_LABELS, WIDTH = 7, 12
WORDS = ("editor text vim emacs python library network server daemon game puzzle audio video player kernel "
         "module driver font web browser").split()


@dataclass
class Export:
    """An exported tiny model and what the tests compare it with."""

    path: str
    model: Any
    kind: str
    names: list[str]
    thresholds: np.ndarray
    inputs: Any            # raw request inputs (ndarray, csr or list of str)
    model_input: Any       # what the Keras model reads for the same rows
    featurizer: Any = None


def _model(width: int) -> Any:
    """A tiny model with neighbour votes in both spaces (weights 0.5 and 0.2) and label centroids (weight 0.3) over
    30 random training rows, the tail labels with input-space votes of their own (0.9, `tail_memory="own"`), so
    that every export test also holds the votes, the centroids and the tail's weights to the Keras model's."""
    from cdgt_keras.config import CDGTConfig
    from cdgt_keras.inputs import to_sparse_tensor
    from cdgt_keras.model import CDGTModel
    from cdgt_keras.neighbours import MemoryShape

    config = CDGTConfig(n_players=2, encoder_hidden=(16,), head_hidden=(8,), seed=0, neighbours=4,
                        neighbour_space="both", centroid_features=6, tail_memory="own")
    freq = np.linspace(0.5, 0.01, NUM_LABELS)
    train_x = sp.random(30, width, density=0.3, format="csr", dtype=np.float32, random_state=5)
    train_y = sp.csr_matrix((np.random.default_rng(5).random((30, NUM_LABELS)) < 0.3).astype(np.float32))
    model = CDGTModel(config, freq, MemoryShape.for_config(config, train_x, train_y))
    model.build((None, width))
    model.neighbours.remember(train_x, train_y)
    model.neighbours.weight.assign(0.5)
    model.neighbours.tail_weight.assign(0.9)
    model.encoder_neighbours.remember(np.asarray(model.shared_encoder(to_sparse_tensor(train_x))), train_y)
    model.encoder_neighbours.weight.assign(0.2)
    model.centroids.remember(train_x, train_y, config.centroid_features)
    model.centroids.weight.assign(0.3)
    return model


def _export(tmp_path_factory, kind: str, inputs: Any, model_input: Any, width: int, featurizer: Any = None) -> Export:
    import keras

    from cdgt.serving.export import export_keras_model
    from cdgt_keras.inputs import to_sparse_tensor

    keras.utils.set_random_seed(0)
    model = _model(width)
    x = to_sparse_tensor(model_input) if sp.issparse(model_input) else model_input
    probs = np.asarray(model(x))
    # about half of the labels decided per row; midpoints between rows' scores, so no score sits on a threshold
    thresholds = np.quantile(probs, 0.45, axis=0, method="midpoint").astype(np.float32)
    names = [f"tag::{i}" for i in range(NUM_LABELS)]
    path = str(tmp_path_factory.mktemp(f"export-{kind}") / "1")
    export_keras_model(model, path, names, thresholds, feature_kind=kind, input_width=width, featurizer=featurizer,
                       top_k=3)
    return Export(path, model, kind, names, thresholds, inputs, model_input, featurizer)


def texts(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(2, 9))).capitalize() + "!" for _ in range(n)]


@pytest.fixture(scope="session")
def dense_export(tmp_path_factory) -> Export:
    x = np.random.default_rng(1).standard_normal((6, WIDTH)).astype(np.float32)
    return _export(tmp_path_factory, "dense", x, x, WIDTH)


@pytest.fixture(scope="session")
def sparse_export(tmp_path_factory) -> Export:
    x = sp.random(5, WIDTH, density=0.3, format="lil", dtype=np.float32, random_state=2)
    x[4] = 0  # a row with no features at all
    x = x.tocsr()
    x.eliminate_zeros()
    return _export(tmp_path_factory, "sparse", x, x, WIDTH)


@pytest.fixture(scope="session")
def text_export(tmp_path_factory) -> Export:
    from cdgt_keras.featurizer import Featurizer
    from cdgt_keras.text import TextOptions

    featurizer = Featurizer.fit("text", texts(40), TextOptions(max_features=30))
    request = [*texts(4, seed=3), "an unknown zebra", ""]
    return _export(tmp_path_factory, "text", request, featurizer.transform(request), featurizer.width, featurizer)


@pytest.fixture(scope="session")
def embedded_text_export(tmp_path_factory) -> Export:
    """A text model whose features start with a sentence embedding (a tiny random BERT: cdgt_keras.sentence)."""
    from cdgt_keras.featurizer import Featurizer
    from cdgt_keras.sentence import _tiny_checkpoint
    from cdgt_keras.text import TextOptions

    bert = _tiny_checkpoint(str(tmp_path_factory.mktemp("bert")))
    featurizer = Featurizer.fit("text", texts(40), TextOptions(max_features=30, embedding=bert, embedding_tokens=16))
    request = [*texts(4, seed=3), "an unknown zebra", ""]
    return _export(tmp_path_factory, "text", request, featurizer.transform(request), featurizer.width, featurizer)
