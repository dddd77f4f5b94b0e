"""Tests for the embedded synthetic data set (cdgt_keras.synthetic): determinism, long tail, learnability."""

from __future__ import annotations

import subprocess
import sys
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from cdgt_keras.synthetic import MultiLabelData, synthetic_dataset, synthetic_splits


def _counts(data: MultiLabelData) -> np.ndarray:
    return np.asarray(data.labels.sum(axis=0, dtype=np.int64)).ravel()


def _same(a: MultiLabelData, b: MultiLabelData) -> bool:
    fa, fb = (x.toarray() if sp.issparse(x) else x for x in (a.features, b.features))
    return np.array_equal(fa, fb) and (a.labels != b.labels).nnz == 0 and a.label_names == b.label_names


@pytest.mark.parametrize("sparse", [False, True])
def test_same_seed_same_data_other_seed_other_data(sparse: bool) -> None:
    kwargs = {"num_examples": 400, "num_labels": 30, "sparse": sparse, "num_features": 500 if sparse else 16}
    assert _same(synthetic_dataset(seed=5, **kwargs), synthetic_dataset(seed=5, **kwargs))
    other = synthetic_dataset(seed=6, **kwargs)
    assert not _same(synthetic_dataset(seed=5, **kwargs), other)
    assert (synthetic_dataset(seed=5, **kwargs).labels != other.labels).nnz > 0  # labels differ too


def test_dense_shapes_dtypes_and_names() -> None:
    data = synthetic_dataset(500, 32, 40, seed=1)
    assert isinstance(data.features, np.ndarray) and data.features.dtype == np.float32
    assert data.features.shape == (500, 32) and np.isfinite(data.features).all()
    assert sp.isspmatrix_csr(data.labels) and data.labels.dtype == np.uint8 and data.labels.shape == (500, 40)
    assert set(np.unique(data.labels.data)) == {1}
    assert (data.num_examples, data.num_features, data.num_labels) == (500, 32, 40)
    assert data.label_names[0] == "label_000" and data.label_names[-1] == "label_039"
    assert synthetic_dataset(50, num_labels=1000, mean_labels=2).label_names[-1] == "label_999"
    assert np.asarray(data.labels.sum(axis=1)).min() >= 1  # every example has a label
    assert np.all(np.diff(_counts(data)) <= 0)  # label id = frequency rank


def test_sparse_is_csr_tfidf_with_bag_of_words_density() -> None:
    data = synthetic_dataset(2000, sparse=True, seed=2)
    features = data.features
    assert sp.isspmatrix_csr(features) and features.dtype == np.float32 and features.shape == (2000, 2000)
    assert features.data.min() > 0
    assert 0.01 <= features.nnz / np.prod(features.shape) <= 0.05
    norms = np.sqrt(np.asarray(features.multiply(features).sum(axis=1)).ravel())
    np.testing.assert_allclose(norms, 1.0, rtol=1e-4)


def test_sparse_never_builds_a_dense_matrix() -> None:
    tracemalloc.start()
    try:
        data = synthetic_dataset(10_000, 10_000, sparse=True, seed=3)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sp.isspmatrix_csr(data.features)
    assert peak < 100e6, f"peak {peak / 1e6:.0f} MB; a dense float32 10k x 10k matrix is 400 MB"


def test_label_frequencies_are_long_tailed() -> None:
    counts = np.sort(_counts(synthetic_dataset()))[::-1]
    assert counts[: len(counts) // 10].sum() > 0.35 * counts.sum()
    assert counts[0] > 10 * np.median(counts[-len(counts) // 5:])
    assert counts[-1] <= 30  # rarest labels: a handful of positives in 3000 examples


def test_topics_make_labels_co_occur() -> None:
    labels = synthetic_dataset(20_000, seed=4).labels.toarray().astype(np.float64)
    rng = np.random.default_rng(0)
    independent = np.stack([rng.permutation(column) for column in labels.T], axis=1)  # same marginals

    def high_lift(y: np.ndarray) -> float:  # 95th percentile of P(a, b) / (P(a) P(b)), mid-frequency pairs
        p = y.mean(axis=0)
        lift = (y.T @ y / len(y) / np.outer(p, p))[5:60, 5:60]
        return float(np.percentile(lift[~np.eye(55, dtype=bool)], 95))

    assert high_lift(labels) > high_lift(independent) + 0.6


def test_default_splits_sizes_disjoint_and_every_label_trainable() -> None:
    splits = synthetic_splits(seed=0)
    assert {k: v.num_examples for k, v in splits.items()} == {"train": 2100, "validation": 300, "test": 600}
    assert _counts(splits["train"]).min() >= 3
    full = synthetic_dataset(seed=0)
    stacked = np.concatenate([s.features for s in splits.values()])
    stacked_labels = sp.vstack([s.labels for s in splits.values()]).toarray()
    order, full_order = np.argsort(stacked[:, 0]), np.argsort(full.features[:, 0])
    np.testing.assert_array_equal(stacked[order], full.features[full_order])  # a partition of one draw
    np.testing.assert_array_equal(stacked_labels[order], full.labels.toarray()[full_order])
    assert _same(splits["test"], synthetic_splits(seed=0)["test"])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_default_splits_have_trainable_tail_for_several_seeds(seed: int) -> None:
    assert _counts(synthetic_splits(seed=seed)["train"]).min() >= 3


@pytest.mark.parametrize(("sparse", "c"), [(False, 1.0), (True, 100.0)])
def test_tail_labels_are_learnable_by_a_linear_probe(sparse: bool, c: float) -> None:
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score
    from sklearn.multiclass import OneVsRestClassifier

    splits = synthetic_splits(seed=0, sparse=sparse)
    train, test = splits["train"], splits["test"]
    y_train, y_test = train.labels.toarray(), test.labels.toarray()
    tail = np.argsort(-y_train.sum(axis=0), kind="stable")[-train.num_labels // 5:]
    probe = OneVsRestClassifier(LogisticRegression(C=c, max_iter=2000)).fit(train.features, y_train)
    predicted = probe.predict(test.features)
    tail_f1 = f1_score(y_test[:, tail], predicted[:, tail], average="micro", zero_division=0)
    prior = np.random.default_rng(0).random(y_test[:, tail].shape) < y_train[:, tail].mean(axis=0)
    prior_f1 = f1_score(y_test[:, tail], prior, average="micro", zero_division=0)
    assert tail_f1 > 0.3 and tail_f1 > prior_f1 + 0.25, (tail_f1, prior_f1)
    assert tail_f1 < 0.95  # learnable, not trivial


def test_subset_keeps_rows_in_order() -> None:
    data = synthetic_dataset(100, 8, 10, seed=7)
    part = data.subset(np.array([5, 2]))
    np.testing.assert_array_equal(part.features, data.features[[5, 2]])
    assert (part.labels != data.labels[[5, 2]]).nnz == 0
    mask = np.zeros(100, dtype=bool)
    mask[[1, 3]] = True
    assert data.subset(mask).num_examples == 2


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"num_examples": 0}, "num_examples"), ({"num_features": 0}, "num_features"),
     ({"num_labels": 0}, "num_labels"), ({"zipf_exponent": -1.0}, "zipf_exponent"),
     ({"mean_labels": 0.5}, "mean_labels"), ({"mean_labels": 200.0}, "mean_labels"),
     ({"num_topics": 0}, "num_topics"), ({"num_topics": 101}, "num_topics"), ({"noise": -0.1}, "noise"),
     ({"seed": -1}, "seed"), ({"num_examples": 10.5}, "num_examples")],
)
def test_invalid_arguments_name_the_argument(kwargs: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        synthetic_dataset(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [{"validation_fraction": 1.5},
     {"test_fraction": -0.1}, {"validation_fraction": 0.6, "test_fraction": 0.4}],
)
def test_invalid_split_fractions(kwargs: dict) -> None:
    with pytest.raises(ValueError, match="fraction"):
        synthetic_splits(100, **kwargs)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 60), num_labels=st.integers(1, 25), sparse=st.booleans(), seed=st.integers(0, 2**32))
def test_any_valid_size_gives_well_formed_data(n: int, num_labels: int, sparse: bool, seed: int) -> None:
    data = synthetic_dataset(n, 30, num_labels, sparse=sparse, mean_labels=1.0, seed=seed)
    assert data.features.shape == (n, 30) and data.labels.shape == (n, num_labels)
    assert np.asarray(data.labels.sum(axis=1)).min() >= 1 and np.all(np.diff(_counts(data)) <= 0)


def test_100k_examples_dense_and_sparse() -> None:
    dense = synthetic_dataset(100_000)
    assert dense.features.shape == (100_000, 64) and dense.features.dtype == np.float32
    sparse = synthetic_dataset(100_000, 5000, sparse=True)
    assert sp.isspmatrix_csr(sparse.features) and sparse.features.shape == (100_000, 5000)


def test_module_does_not_import_tensorflow_or_keras() -> None:
    code = "import sys, cdgt_keras.synthetic; assert not {'tensorflow', 'keras'} & set(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)
