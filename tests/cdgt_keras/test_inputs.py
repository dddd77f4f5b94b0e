"""tf.data inputs, TFRecord reading and text TF-IDF: shapes, sparsity and values against direct numpy."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
import tensorflow as tf

from cdgt_keras.inputs import batch_scorer, make_dataset, to_sparse_tensor
from cdgt_keras.records import read_manifest, read_splits
from cdgt_keras.text import TextFeaturizer, TextOptions, tokens


def test_to_sparse_tensor_round_trip():
    m = sp.random(7, 30, density=0.2, format="csr", dtype=np.float32, random_state=0)
    assert np.array_equal(tf.sparse.to_dense(to_sparse_tensor(m)).numpy(), m.toarray())


@pytest.mark.parametrize("form", ["csr", "unsorted csr", "coo with duplicates"])
def test_to_sparse_tensor_is_in_canonical_order_with_duplicates_summed(form):
    """Row-major, columns ascending, whatever order the matrix holds its entries in: what TensorFlow's sparse ops
    expect (tf.sparse.reorder leaves it as it is)."""
    rows, cols, vals = [2, 0, 0, 1, 2, 0], [1, 3, 0, 2, 0, 3], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    m = sp.coo_matrix((vals, (rows, cols)), shape=(3, 4))
    if form == "csr":
        m = m.tocsr()
    elif form == "unsorted csr":
        m = m.tocsr()
        m.indices[:2], m.data[:2] = m.indices[:2][::-1].copy(), m.data[:2][::-1].copy()
        m.has_sorted_indices = False
    tensor = to_sparse_tensor(m)
    assert tensor.indices.numpy().tolist() == [[0, 0], [0, 3], [1, 2], [2, 0], [2, 1]]
    assert tensor.values.numpy().tolist() == [3.0, 8.0, 4.0, 5.0, 1.0]
    assert tf.sparse.reorder(tensor).indices.numpy().tolist() == tensor.indices.numpy().tolist()


@pytest.mark.parametrize("sparse_features", [False, True])
def test_make_dataset_batches_features_and_sparse_labels(sparse_features):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(10, 6)).astype(np.float32)
    features = sp.csr_matrix(x) if sparse_features else x
    y = sp.csr_matrix((rng.random((10, 5)) > 0.6).astype(np.uint8))
    batches = list(make_dataset(features, y, batch_size=4))
    assert [int(b[1].dense_shape[0]) for b in batches] == [4, 4, 2]
    first_x, first_y = batches[0]
    assert isinstance(first_x, tf.SparseTensor) == sparse_features
    dense_x = tf.sparse.to_dense(first_x) if sparse_features else first_x
    np.testing.assert_allclose(dense_x.numpy(), x[:4])
    assert np.array_equal(tf.sparse.to_dense(first_y).numpy(), y[:4].toarray())


@pytest.mark.parametrize("sparse_features", [False, True])
def test_batch_scorer_traces_once_and_concatenates_the_batches(sparse_features):
    """Batches of 2, 2 and 1 rows: one trace (the last, shorter batch does not trace again), and the rows' answers
    in order, as one call on all the rows gives them."""
    x = np.arange(15.0, dtype=np.float32).reshape(5, 3)
    traces = []

    def fn(batch):
        traces.append(1)  # runs while tracing only
        dense = tf.sparse.to_dense(batch) if isinstance(batch, tf.SparseTensor) else batch
        return tf.matmul(dense, tf.constant([[1.0], [10.0], [100.0]]))

    score = batch_scorer(fn)
    out = score(sp.csr_matrix(x) if sparse_features else x, 2)
    np.testing.assert_array_equal(out, x @ np.array([[1.0], [10.0], [100.0]], np.float32))
    assert len(traces) == 1
    score(x[:3] if not sparse_features else sp.csr_matrix(x[:3]), 3)
    assert len(traces) == 1
    assert score(sp.csr_matrix(x[:0]) if sparse_features else x[:0], 2).shape == (0, 1)  # no rows: none answered


def _write_split(path, rows):
    path.mkdir(parents=True)
    with tf.io.TFRecordWriter(str(path / "data-00000-of-00001.tfrecord.gz"), options="GZIP") as writer:
        for row in rows:
            writer.write(tf.train.Example(features=tf.train.Features(feature=row)).SerializeToString())


def _int(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def _float(values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def _bytes(value: str) -> tf.train.Feature:
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))


def test_read_splits_dense_and_sparse(tmp_path):
    dense = tmp_path / "dense"
    for split, rows in {"train": [([0, 2], [1.0, 2.0]), ([], [3.0, 4.0])], "validation": [([1], [5.0, 6.0])],
                        "test": [([2, 1], [7.0, 8.0])]}.items():
        _write_split(dense / split, [{"labels": _int(lab), "features": _float(f)} for lab, f in rows])
    (dense / "manifest.json").write_text(json.dumps(
        {"feature_kind": "dense", "num_features": 2, "num_labels": 3, "label_names": ["a", "b", "c"]}))
    splits = read_splits(dense)
    assert splits["train"].labels.toarray().tolist() == [[1, 0, 1], [0, 0, 0]]  # an empty label set is kept
    np.testing.assert_allclose(splits["test"].features, [[7.0, 8.0]])
    assert splits["validation"].label_names == ["a", "b", "c"]
    assert splits["train"].ids is None  # records without ids

    named = tmp_path / "named"
    for split, ids in {"train": ["libc6", "gtk"], "validation": ["qt"], "test": ["x11"]}.items():
        _write_split(named / split, [{"labels": _int([0]), "features": _float([1.0, 2.0]), "id": _bytes(i)}
                                     for i in ids])
    (named / "manifest.json").write_text(json.dumps({"feature_kind": "dense", "num_features": 2, "num_labels": 1}))
    named_splits = read_splits(named)
    assert named_splits["train"].ids == ["libc6", "gtk"] and named_splits["test"].ids == ["x11"]
    assert named_splits["train"].subset([1]).ids == ["gtk"]

    sparse = tmp_path / "sparse"
    for split in ("train", "validation", "test"):
        _write_split(sparse / split, [{"labels": _int([1]), "feature_ids": _int([0, 4]),
                                       "feature_values": _float([0.5, 2.0])}])
    (sparse / "manifest.json").write_text(json.dumps({"feature_kind": "sparse", "num_features": 5, "num_labels": 2}))
    train = read_splits(sparse)["train"]
    assert sp.issparse(train.features) and train.features.toarray().tolist() == [[0.5, 0, 0, 0, 2.0]]


def test_missing_manifest_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="cdgt data build"):
        read_manifest(tmp_path)


def test_tfidf_matches_a_hand_computation():
    """Unigrams, min_df 1, sublinear tf, smoothed idf ln((1 + n) / (1 + df)) + 1, L2 rows."""
    texts = ["the cat sat", "the dog sat down", "a cat and a dog"]
    fit = TextFeaturizer.fit(texts, TextOptions(ngrams=1, min_df=1))
    x = fit.transform(["cat cat dog"]).toarray()[0]
    idf = np.log(4 / 3) + 1  # n = 3 documents: df(cat) = df(dog) = 2
    raw = np.zeros(fit.width)
    raw[fit.vocabulary.index("cat")] = (1 + np.log(2)) * idf
    raw[fit.vocabulary.index("dog")] = 1 * idf
    np.testing.assert_allclose(x, raw / np.linalg.norm(raw), rtol=1e-6)


def test_tokens_keep_identifiers_and_bigrams():
    terms = tokens(tf.constant(["Use C++, C# & GTK3 (x11) in real-time -- e.g. python3."]), ngrams=2)
    words = [t.decode() for t in terms.flat_values.numpy()]
    assert words[:9] == ["use", "c++", "c#", "gtk3", "x11", "in", "real-time", "e.g", "python3"]
    assert "c++ c#" in words and "real-time e.g" in words and len(words) == 9 + 8


def test_identifier_parts_follow_the_terms_and_leave_them_unchanged():
    text = tf.constant(["libfoo-dev: python3 bindings for x11 (1.81.0)", "plain words", ""])
    plain = tokens(text, ngrams=2).to_list()
    parted = [[t.decode() for t in row] for row in tokens(text, ngrams=2, identifier_parts=True).to_list()]
    assert [row[:len(p)] for row, p in zip(parted, plain)] == [[t.decode() for t in p] for p in plain]
    assert parted[0][len(plain[0]):] == ["libfoo", "dev", "python", "3", "x", "11", "1", "81", "0"]
    assert parted[1:] == [["plain", "words", "plain words"], []]


def test_prefixes_follow_the_other_terms_marked_and_counted_in_characters():
    text = tf.constant(["libfoo-dev: Café library x11", "ab abc", ""])
    plain = [[t.decode() for t in row] for row in tokens(text, ngrams=2, identifier_parts=True).to_list()]
    both = [[t.decode() for t in row]
            for row in tokens(text, ngrams=2, identifier_parts=True, prefixes=3).to_list()]
    assert [row[:len(p)] for row, p in zip(both, plain)] == plain
    # tokens longer than 3 characters (UTF-8 characters, not bytes: "café" is 4), in their order; "x11" is not
    assert [row[len(p):] for row, p in zip(both, plain)] == [["lib*", "caf*", "lib*"], [], []]
    assert tokens(text, ngrams=1, prefixes=0).to_list() == tokens(text, ngrams=1).to_list()


def test_tfidf_does_not_pad_texts_to_the_longest():
    """One 100k-character text among 2,000 short ones: a fixed-width str array would take 0.8 GB; the object array stays
    small, and the long text's counts are all there."""
    from cdgt_keras.text import _strings

    texts = ["cat dog"] * 2000 + ["cat " * 25_000]
    assert _strings(texts).dtype == object
    fit = TextFeaturizer.fit(texts, TextOptions(ngrams=1, max_features=10))
    counts = fit.transform(texts[-1:])
    assert counts.nnz == 1 and counts.shape[0] == 1


def test_a_texts_tfidf_row_is_the_same_to_the_bit_whatever_batch_it_comes_in():
    """`cdgt train`, the Transform and serving cut the texts into different batches: a row must not depend on its
    batch. (float32 tf.math.log gives another last bit at the tail of an array than inside it on AVX-512 machines;
    round 62 found the roads' TF-IDF columns 6e-8 apart, enough to part the roads' training by epoch 5.)"""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(1, 60)))) for _ in range(97)]
    fit = TextFeaturizer.fit(texts, TextOptions(ngrams=1, min_df=1))
    whole = fit.transform(texts).toarray()
    for batch_size in (1, 3, 7, 16, 33):
        np.testing.assert_array_equal(fit.transform(texts, batch_size=batch_size).toarray(), whole)
