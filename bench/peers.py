"""The peer libraries a user would pick instead, behind one call: scores in [0, 1] for validation and test.

* `omikuji`: Omikuji 0.5.2 with its defaults, which are Parabel's settings (3 trees, balanced 2-means clustering,
  leaves of at most 100 labels, linear C = 1, max depth 20) and beam size 10.
* `omikuji_bonsai`: Omikuji with Bonsai's settings (its README's: unbalanced 100-means clustering,
  `cluster_k=100, cluster_balanced=False, max_depth=3`; the rest as Parabel), beam size 10.
  Both Omikuji models score the labels the beam reaches (top `min(L, 1000)`); every other label scores 0.
  Omikuji exposes no seed: its runs differ only through its own randomness.
* `libmultilabel`: LibMultiLabel 0.10.0 linear one-vs-rest (LIBLINEAR, options of LibMultiLabel's example configs:
  "-s 2 -B 1 -e 0.0001 -q", L2-regularised L2-loss SVM). Its decision values go through a sigmoid so that
  cdgt_keras.thresholds tunes them on the same 0.01..0.99 grid as every other method.
* `libmultilabel_tree`: LibMultiLabel's tree model (`linear.train_tree`, Bonsai-like: the same LIBLINEAR options,
  label tree of degree 100 and depth at most 10 by k-means on label representations; beam width 10). Its scores
  are the tree's probability estimates (0 for labels the beam does not reach); its k-means seed is the run's.

Example:
    >>> out = fit_predict("omikuji", splits)  # doctest: +SKIP
    >>> out.test_scores.shape == (splits["test"].num_examples, splits["train"].num_labels)  # doctest: +SKIP
    True
    >>> type(out.test_scores).__name__  # the labels its beam reached, absent ones 0  # doctest: +SKIP
    'csr_matrix'
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from cdgt_keras.data import MultiLabelData

LIBLINEAR_OPTIONS = "-s 2 -B 1 -e 0.0001 -q"
OMIKUJI_BEAM = 10
BONSAI = {"cluster_k": 100, "cluster_balanced": False, "max_depth": 3}  # Omikuji's README, "Bonsai"
TREE_DEGREE, TREE_MAX_DEPTH, TREE_BEAM = 100, 10, 10  # LibMultiLabel's defaults for train_tree / predict_values


@dataclass(frozen=True)
class PeerOutput:
    """Validation and test scores [n, L] in [0, 1], with the training and test-inference wall times. The tree
    models score only the labels their beam reaches: a csr matrix (absent = 0), never a dense [n, L] array."""

    validation_scores: np.ndarray | sp.csr_matrix
    test_scores: np.ndarray | sp.csr_matrix
    train_seconds: float
    inference_seconds: float


@dataclass(frozen=True)
class Peer:
    """One peer method: the module it needs, how it trains and scores, and its settings in words."""

    package: str
    fit: Callable[[sp.csr_matrix, sp.csr_matrix, int], Any]
    predict: Callable[[Any, sp.csr_matrix, int], np.ndarray | sp.csr_matrix]
    settings: str


def available(kind: str) -> bool:
    """Whether the peer's package imports here (`pip install -e '.[bench]'` installs both)."""
    return importlib.util.find_spec(peer(kind).package.split(".")[0]) is not None


def import_peer(kind: str) -> None:
    """Import the peer's package now (the benchmark does so before it measures a run's memory)."""
    importlib.import_module(peer(kind).package)


def fit_predict(kind: str, splits: dict[str, MultiLabelData], seed: int = 0) -> PeerOutput:
    """Train `kind` on splits["train"], score validation and test; `seed` reaches peers that take one."""
    if not available(kind):
        raise RuntimeError(f"{kind} is not installed; `pip install -e '.[bench]'`")
    method = peer(kind)
    train = splits["train"]
    started = time.perf_counter()
    model = method.fit(_csr(train.features), train.labels.tocsr(), seed)
    train_seconds = time.perf_counter() - started
    validation = method.predict(model, _csr(splits["validation"].features), train.num_labels)
    started = time.perf_counter()
    test = method.predict(model, _csr(splits["test"].features), train.num_labels)
    return PeerOutput(validation, test, train_seconds, time.perf_counter() - started)


def _csr(features: np.ndarray | sp.spmatrix) -> sp.csr_matrix:
    """A float64 csr copy with sorted indices. A copy: a dtype change copies only `data`, and sorting in place
    would then permute the shared `indices` of the caller's matrix under its unsorted values."""
    m = sp.csr_matrix(features, dtype=np.float64, copy=True)
    m.sort_indices()
    return m


# ------------------------------------------------------------------------------------------------ Omikuji
def write_xmc(path: Path, x: sp.csr_matrix, y: sp.csr_matrix) -> None:
    """The Extreme Classification Repository text format Omikuji trains from: header, then "l1,l2 f:v f:v"."""
    with open(path, "w", encoding="ascii") as out:
        out.write(f"{x.shape[0]} {x.shape[1]} {y.shape[1]}\n")
        for i in range(x.shape[0]):
            labels = ",".join(str(j) for j in y.indices[y.indptr[i]:y.indptr[i + 1]])
            lo, hi = x.indptr[i], x.indptr[i + 1]
            feats = " ".join(f"{j}:{v:.6g}" for j, v in zip(x.indices[lo:hi], x.data[lo:hi]) if v != 0)
            out.write(f"{labels} {feats}".rstrip() + "\n")


def _omikuji_fit(x: sp.csr_matrix, y: sp.csr_matrix, seed: int, **settings: Any):
    """An Omikuji model trained with its defaults (Parabel's) changed by `settings` (hyper-parameter fields)."""
    import omikuji

    params = omikuji.Model.default_hyper_param()
    for name, value in settings.items():
        if not hasattr(params, name):
            raise ValueError(f"Omikuji has no hyper-parameter {name!r}")
        setattr(params, name, value)
    with tempfile.TemporaryDirectory(prefix="cdgt-omikuji-") as tmp:
        path = Path(tmp) / "train.txt"
        write_xmc(path, x, y)
        with quiet_output():  # Omikuji's Rust logs and progress bars write thousands of lines to fd 1 and 2
            return omikuji.Model.train_on_data(str(path), params)


@contextlib.contextmanager
def quiet_output():
    """Send file descriptors 1 and 2 to /dev/null for the duration (native code ignores sys.stdout/stderr), and
    Python's own prints too (LibMultiLabel's tree prints its estimated size whatever `verbose` says)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
            os.dup2(null.fileno(), 1)
            os.dup2(null.fileno(), 2)
            yield
    finally:
        for fd, copy in zip((1, 2), saved):
            os.dup2(copy, fd)
            os.close(copy)


def _omikuji_predict(model, x: sp.csr_matrix, num_labels: int) -> sp.csr_matrix:
    """The beam's top min(L, 1000) labels of each row and their scores, as a csr matrix [n, L]."""
    top_k = min(num_labels, 1000)
    indptr, indices, values = [0], [], []
    for i in range(x.shape[0]):
        lo, hi = x.indptr[i], x.indptr[i + 1]
        pairs = [(int(j), float(v)) for j, v in zip(x.indices[lo:hi], x.data[lo:hi]) if j < model.n_features]
        found = sorted(model.predict(pairs, beam_size=OMIKUJI_BEAM, top_k=top_k))
        indices += [label for label, _ in found]
        values += [score for _, score in found]
        indptr.append(len(indices))
    return sp.csr_matrix((np.asarray(values, np.float32), np.asarray(indices, np.int64), np.asarray(indptr)),
                         shape=(x.shape[0], num_labels))


# ------------------------------------------------------------------------------------------ LibMultiLabel
def _linear_fit(x: sp.csr_matrix, y: sp.csr_matrix, seed: int):
    from libmultilabel import linear

    return linear.train_1vsrest(y.astype(np.float64), x, multiclass=False, options=LIBLINEAR_OPTIONS, verbose=False)


def _linear_predict(model, x: sp.csr_matrix, num_labels: int) -> np.ndarray:
    from libmultilabel import linear

    values = np.asarray(linear.predict_values(model, x), dtype=np.float64)
    return (1.0 / (1.0 + np.exp(-values))).astype(np.float32)


def _tree_fit(x: sp.csr_matrix, y: sp.csr_matrix, seed: int):
    """LibMultiLabel's tree; its k-means draws its seeds from numpy's global generator, seeded here."""
    from libmultilabel import linear

    np.random.seed(seed)
    with quiet_output():  # it prints the estimated model size and k-means progress whatever `verbose` says
        return linear.train_tree(y.astype(np.float64), x, options=LIBLINEAR_OPTIONS, K=TREE_DEGREE,
                                 dmax=TREE_MAX_DEPTH, verbose=False)


def _tree_predict(model, x: sp.csr_matrix, num_labels: int, rows: int = 256) -> sp.csr_matrix:
    """The tree's scores, `rows` examples at a time (its predict_values returns a dense [rows, L] block, 0 for
    the labels the beam does not reach), kept as a csr matrix [n, L]."""
    blocks = [sp.csr_matrix(np.asarray(model.predict_values(x[i : i + rows], beam_width=TREE_BEAM), np.float32))
              for i in range(0, x.shape[0], rows)]
    return sp.vstack(blocks, format="csr") if blocks else sp.csr_matrix((0, num_labels), dtype=np.float32)


PEERS: dict[str, Peer] = {
    "omikuji": Peer("omikuji", _omikuji_fit, _omikuji_predict,
                    f"Omikuji defaults (Parabel settings), beam {OMIKUJI_BEAM}"),
    "omikuji_bonsai": Peer("omikuji", functools.partial(_omikuji_fit, **BONSAI), _omikuji_predict,
                           "Omikuji, Bonsai settings (" + ", ".join(f"{k}={v}" for k, v in BONSAI.items())
                           + f"), beam {OMIKUJI_BEAM}"),
    "libmultilabel": Peer("libmultilabel.linear", _linear_fit, _linear_predict, f"liblinear {LIBLINEAR_OPTIONS}"),
    "libmultilabel_tree": Peer("libmultilabel.linear", _tree_fit, _tree_predict,
                               f"LibMultiLabel train_tree K={TREE_DEGREE} dmax={TREE_MAX_DEPTH}, liblinear "
                               f"{LIBLINEAR_OPTIONS}, beam {TREE_BEAM}"),
}


def peer(kind: str) -> Peer:
    """The peer method named `kind`; a clear error naming the known ones."""
    if kind not in PEERS:
        raise ValueError(f"unknown peer {kind!r}; peers: {sorted(PEERS)}")
    return PEERS[kind]
