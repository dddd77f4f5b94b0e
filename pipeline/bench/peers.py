"""The peer libraries a user would pick instead, behind one call: scores in [0, 1] for validation and test.

* Omikuji 0.5.2 with its defaults, which are Parabel's settings (3 trees, balanced 2-means clustering,
  leaves of at most 100 labels, linear C = 1, max depth 20) and beam size 10. Its scores are the tree's
  probabilities for the labels the beam reaches (top `min(L, 1000)`); every other label scores 0.
  Omikuji exposes no seed: its runs differ only through its own randomness.
* LibMultiLabel 0.10.0 linear one-vs-rest (LIBLINEAR, options of LibMultiLabel's example configs:
  "-s 2 -B 1 -e 0.0001 -q", L2-regularised L2-loss SVM). Its decision values go through a sigmoid so that
  cdgt_keras.thresholds tunes them on the same 0.01..0.99 grid as every other method.

Example:
    >>> out = fit_predict("omikuji", splits)  # doctest: +SKIP
    >>> out.test_scores.shape == (splits["test"].num_examples, splits["train"].num_labels)  # doctest: +SKIP
    True
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from cdgt_keras.data import MultiLabelData

LIBLINEAR_OPTIONS = "-s 2 -B 1 -e 0.0001 -q"
OMIKUJI_BEAM = 10


@dataclass(frozen=True)
class PeerOutput:
    """Validation and test scores [n, L] in [0, 1], with the training and test-inference wall times."""

    validation_scores: np.ndarray
    test_scores: np.ndarray
    train_seconds: float
    inference_seconds: float


def available(kind: str) -> bool:
    """Whether the peer's package imports here (`pip install -e '.[bench]'` installs both)."""
    module = {"omikuji": "omikuji", "libmultilabel": "libmultilabel"}[kind]
    return importlib.util.find_spec(module) is not None


def fit_predict(kind: str, splits: dict[str, MultiLabelData]) -> PeerOutput:
    """Train `kind` on splits["train"], score validation and test."""
    if not available(kind):
        raise RuntimeError(f"{kind} is not installed; `pip install -e '.[bench]'`")
    fit, predict = {"omikuji": (_omikuji_fit, _omikuji_predict), "libmultilabel": (_linear_fit, _linear_predict)}[kind]
    train = splits["train"]
    started = time.perf_counter()
    model = fit(_csr(train.features), train.labels.tocsr())
    train_seconds = time.perf_counter() - started
    validation = predict(model, _csr(splits["validation"].features), train.num_labels)
    started = time.perf_counter()
    test = predict(model, _csr(splits["test"].features), train.num_labels)
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


def _omikuji_fit(x: sp.csr_matrix, y: sp.csr_matrix):
    import omikuji

    with tempfile.TemporaryDirectory(prefix="cdgt-omikuji-") as tmp:
        path = Path(tmp) / "train.txt"
        write_xmc(path, x, y)
        with quiet_output():  # Omikuji's Rust logs and progress bars write thousands of lines to fd 1 and 2
            return omikuji.Model.train_on_data(str(path), omikuji.Model.default_hyper_param())


@contextlib.contextmanager
def quiet_output():
    """Send file descriptors 1 and 2 to /dev/null for the duration (native code ignores sys.stdout/stderr)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            os.dup2(null.fileno(), 2)
            yield
    finally:
        for fd, copy in zip((1, 2), saved):
            os.dup2(copy, fd)
            os.close(copy)


def _omikuji_predict(model, x: sp.csr_matrix, num_labels: int) -> np.ndarray:
    scores = np.zeros((x.shape[0], num_labels), dtype=np.float32)
    top_k = min(num_labels, 1000)
    for i in range(x.shape[0]):
        lo, hi = x.indptr[i], x.indptr[i + 1]
        pairs = [(int(j), float(v)) for j, v in zip(x.indices[lo:hi], x.data[lo:hi]) if j < model.n_features]
        for label, score in model.predict(pairs, beam_size=OMIKUJI_BEAM, top_k=top_k):
            scores[i, label] = score
    return scores


# ------------------------------------------------------------------------------------------ LibMultiLabel
def _linear_fit(x: sp.csr_matrix, y: sp.csr_matrix):
    from libmultilabel import linear

    return linear.train_1vsrest(y.astype(np.float64), x, multiclass=False, options=LIBLINEAR_OPTIONS, verbose=False)


def _linear_predict(model, x: sp.csr_matrix, num_labels: int) -> np.ndarray:
    from libmultilabel import linear

    values = np.asarray(linear.predict_values(model, x), dtype=np.float64)
    return (1.0 / (1.0 + np.exp(-values))).astype(np.float32)
