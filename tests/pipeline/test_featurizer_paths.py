"""One road for every input: the same raw inputs give the same feature values (text: to the bit; dense: 1e-6)
through the fast path (cdgt_keras.featurizer: `cdgt train` and the bench), the TFX Transform
(pipeline/transform_module.py under tf.Transform's Beam analyzers) and the exported model's preprocessing
(serving/preprocessing.py)."""

from __future__ import annotations

import tempfile
from dataclasses import asdict, replace

import numpy as np
import pytest
import scipy.sparse as sp
import tensorflow as tf

from cdgt.pipeline.transform_module import TEXT_VOCABULARY, preprocessing_fn
from cdgt.serving.preprocessing import RawPreprocessing
from cdgt_keras.featurizer import Featurizer
from cdgt_keras.text import TextOptions

TRAIN = [
    "A console text editor for C++ and Python3 programmers.",
    "GTK3 text editor; real-time preview (x11).",
    "Real-time audio mixer for JACK, written in C++.",
    "python3 bindings for the GTK3 toolkit",
    "Editor of C# and C++ code -- with an X11 front-end!",
    "Café à la carte: a recipe manager (GTK3)",
    "text text text editor editor",
    "",
]
TEST = ["a c++ text editor for x11", "unknown words only", "", "Python3 GTK3 real-time real-time editor.",
        "café recipe editor"]
OPTIONS = TextOptions(ngrams=2, sublinear_tf=True, min_df=2, max_features=12, identifier_parts=False)


def _tft_transform(raw_train: list[dict], raw_test: list[dict], spec: dict, config: dict) -> list[dict]:
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(spec))
    with tft_beam.Context(temp_dir=tempfile.mkdtemp(), force_tf_compat_v1=False):
        transform_fn = (raw_train, metadata) | tft_beam.AnalyzeDataset(lambda x: preprocessing_fn(x, config))
        (transformed, _) = ((raw_test, metadata), transform_fn) | tft_beam.TransformDataset()
        vocabulary = None
        if config["feature_kind"] == "text":
            import tensorflow_transform as tft

            output = tft.TFTransformOutput(_write(transform_fn))
            vocabulary = [t.decode() if isinstance(t, bytes) else t
                          for t in output.vocabulary_by_name(TEXT_VOCABULARY)]
    return transformed, vocabulary


def _write(transform_fn) -> str:
    import tensorflow_transform.beam as tft_beam

    out = tempfile.mkdtemp()
    _ = transform_fn | tft_beam.WriteTransformFn(out)
    return out


def _rows(transformed: list[dict], width: int) -> np.ndarray:
    dense = np.zeros((len(transformed), width), np.float32)
    for i, row in enumerate(transformed):
        dense[i, np.asarray(row["x_ids"], np.int64)] = row["x_weights"]
    return dense


@pytest.mark.parametrize("options", [OPTIONS, replace(OPTIONS, identifier_parts=True, max_features=20),
                                     replace(OPTIONS, identifier_parts=True, prefixes=3, max_features=30)],
                         ids=["tokens", "identifier-parts", "prefixes"])
def test_text_features_agree_on_every_path(options: TextOptions):
    fit = Featurizer.fit("text", np.array(TRAIN, dtype=object), options)
    fast = fit.transform(np.array(TEST, dtype=object))
    assert sp.issparse(fast) and fast.shape == (len(TEST), fit.width)
    assert {"c++", "gtk3", "python3", "real-time", "x11", "text editor"} <= set(fit.text.vocabulary)
    assert ({"gtk", "python", "real", "time"} <= set(fit.text.vocabulary)) == options.identifier_parts
    assert ({"edi*", "tex*"} <= set(fit.text.vocabulary)) == (options.prefixes == 3)

    transformed, vocabulary = _tft_transform(
        [{"text": t} for t in TRAIN], [{"text": t} for t in TEST], {"text": tf.io.FixedLenFeature([], tf.string)},
        {"feature_kind": "text", "text": asdict(options)})
    assert vocabulary == fit.text.vocabulary  # the same terms in the same order, so the ids agree
    np.testing.assert_array_equal(_rows(transformed, fit.width), fast.toarray())  # to the bit (round 62)

    served = RawPreprocessing("text", fit.width, fit).model_input({"text": tf.constant(TEST)})
    np.testing.assert_array_equal(tf.sparse.to_dense(served).numpy(), fast.toarray())
    assert np.allclose(np.linalg.norm(fast.toarray()[0]), 1.0) and fast[1].nnz == 0 and fast[2].nnz == 0


@pytest.mark.parametrize("lead", [0, 5])
def test_text_features_with_a_sentence_embedding_agree_on_every_path(tmp_path, monkeypatch, lead):
    """With `text_embedding` (a tiny random BERT here; tests/cdgt_keras/test_sentence.py holds the real one to
    torch): the embedding's columns (with `lead`, a second block: the first 5 word pieces apart), then the TF-IDF,
    the same on every road."""
    from cdgt_keras.sentence import _tiny_checkpoint

    monkeypatch.setenv("CDGT_CACHE_DIR", str(tmp_path / "cache"))
    options = replace(OPTIONS, embedding=_tiny_checkpoint(str(tmp_path / "bert")), embedding_tokens=16,
                      embedding_scale=1.5, embedding_lead_tokens=lead)
    fit = Featurizer.fit("text", np.array(TRAIN, dtype=object), options)
    fast = fit.transform(np.array(TEST, dtype=object)).toarray()
    blocks = 2 if lead else 1
    assert fit.width == 8 * blocks + len(fit.text.vocabulary)
    for block in range(blocks):  # every text, "" included
        np.testing.assert_allclose(np.linalg.norm(fast[:, 8 * block:8 * block + 8], axis=1), 1.5, atol=1e-5)

    transformed, vocabulary = _tft_transform(
        [{"text": t} for t in TRAIN], [{"text": t} for t in TEST], {"text": tf.io.FixedLenFeature([], tf.string)},
        {"feature_kind": "text", "text": asdict(options)})
    assert vocabulary == fit.text.vocabulary
    preprocessing = RawPreprocessing("text", fit.width, fit)
    serve = tf.function(lambda text: tf.sparse.to_dense(preprocessing.model_input({"text": text})),
                        input_signature=[tf.TensorSpec([None], tf.string)])  # traced, as in the SavedModel
    for other in (_rows(transformed, fit.width), serve(tf.constant(TEST)).numpy()):
        # to the bit: the embedding's columns (cdgt_keras.sentence pads so that a batch changes no text's numbers)
        # and the TF-IDF's (cdgt_keras.text.tfidf takes its logarithms in float64)
        np.testing.assert_array_equal(other, fast)


def test_dense_features_agree_on_every_path():
    rng = np.random.default_rng(0)
    train = (rng.standard_normal((50, 4)) * [1.0, 100.0, 0.01, 0.0] + [0.0, 5e3, -2.0, 7.0]).astype(np.float32)
    test = (rng.standard_normal((6, 4)) * [1.0, 100.0, 0.01, 1.0] + [0.0, 5e3, -2.0, 7.0]).astype(np.float32)
    fit = Featurizer.fit("dense", train)
    fast = fit.transform(test)
    expected = (test - train.astype(np.float64).mean(0)) / np.where(train.std(0) > 0, train.std(0), 1.0)
    np.testing.assert_allclose(fast, expected, rtol=1e-5, atol=1e-5)

    transformed, _ = _tft_transform([{"features": r} for r in train], [{"features": r} for r in test],
                                    {"features": tf.io.FixedLenFeature([4], tf.float32)}, {"feature_kind": "dense"})
    np.testing.assert_allclose(np.stack([r["x"] for r in transformed]), fast, rtol=1e-6, atol=1e-6)
    served = RawPreprocessing("dense", 4, fit).model_input({"features": tf.constant(test)})
    np.testing.assert_allclose(served.numpy(), fast, atol=1e-6)


def test_featurizer_round_trips_through_json():
    fit = Featurizer.fit("text", TRAIN, OPTIONS)
    again = Featurizer.from_dict(fit.to_dict())
    assert (again.transform(TEST) != fit.transform(TEST)).nnz == 0


def test_a_featurizer_saved_before_identifier_parts_keeps_making_none():
    fit = Featurizer.fit("text", TRAIN, replace(OPTIONS, identifier_parts=False))
    payload = fit.to_dict()
    # what a featurizer saved before the options holds: neither key
    del payload["text"]["options"]["identifier_parts"], payload["text"]["options"]["prefixes"]
    again = Featurizer.from_dict(payload)
    assert again.text.options.identifier_parts is False and again.text.options.prefixes == 0
    assert (again.transform(TEST) != fit.transform(TEST)).nnz == 0


def test_text_with_no_frequent_term_is_a_clear_error():
    with pytest.raises(ValueError, match="text_min_df"):
        Featurizer.fit("text", ["alpha", "beta"], TextOptions(min_df=2))


def test_label_texts_agree_through_the_transform_graph():
    """The label texts' rows (cdgt_keras.label_text) of the Trainer (the Transform graph) and of `cdgt train`."""
    import tensorflow_transform as tft
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, metadata_io, schema_utils

    from cdgt.pipeline.trainer_module import transformed_label_features
    from cdgt_keras.label_text import label_features

    fit = Featurizer.fit("text", np.array(TRAIN, dtype=object), OPTIONS)
    spec = {"text": tf.io.FixedLenFeature([], tf.string)}
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(spec))
    config = {"feature_kind": "text", "text": asdict(OPTIONS)}
    with tft_beam.Context(temp_dir=tempfile.mkdtemp(), force_tf_compat_v1=False):
        transform_fn = ([{"text": t} for t in TRAIN], metadata) | tft_beam.AnalyzeDataset(
            lambda x: preprocessing_fn(x, config))
        out = _write(transform_fn)
    metadata_io.write_metadata(metadata, f"{out}/{tft.TFTransformOutput.RAW_METADATA_DIR}")  # the raw spec
    output = tft.TFTransformOutput(out)
    names = ["uitoolkit::gtk3", "devel::editor", "works-with::text", "made-up::nothing", "python3-gtk3"]
    fast = label_features(fit, names)
    through = transformed_label_features(output, "text", fit.width, names)
    assert fast[0].nnz and fast[3].nnz == 0  # a known word, and none
    np.testing.assert_allclose(through.toarray(), fast.toarray(), atol=1e-6)
    assert transformed_label_features(output, "dense", fit.width, names) is None


def test_the_trainers_label_features_of_a_bag_of_words_are_the_in_memory_ones() -> None:
    from cdgt.pipeline.trainer_module import transformed_label_features
    from cdgt_keras.label_text import named_features

    names, labels = ["data", "mining", "svm"], ["TAG_data-mining", "TAG_svm"]
    got = transformed_label_features(None, "sparse", 3, labels, names)
    np.testing.assert_array_equal(got.toarray(), named_features(names, labels).toarray())
    assert transformed_label_features(None, "sparse", 3, labels, None) is None


def _example(row: dict) -> bytes:
    """A transformed record (as TransformDataset hands it) as a serialized tf.Example."""
    feature = {}
    for key, value in row.items():
        values = np.atleast_1d(np.asarray(value))
        if values.dtype.kind in "SUO":
            feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[v if isinstance(v, bytes) else str(v).encode() for v in values]))
        elif values.dtype.kind == "f":
            feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=values.tolist()))
        else:
            feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=values.tolist()))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def test_label_documents_agree_on_the_trainers_road(tmp_path):
    """The label texts joined with the labels' own training records (config.label_documents): the Trainer's rows
    (the transformed training split, read back in id order, its ids, the Transform graph's names) equal the ones
    `cdgt train` makes in memory."""
    import tensorflow_transform as tft
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, metadata_io, schema_utils

    from cdgt.pipeline import trainer_module as tm
    from cdgt_keras.config import CDGTConfig
    from cdgt_keras.label_text import label_features, label_table

    ids = [f"pkg-{i}" for i in range(len(TRAIN))]
    spec = {"text": tf.io.FixedLenFeature([], tf.string), "id": tf.io.FixedLenFeature([], tf.string),
            "labels": tf.io.VarLenFeature(tf.int64)}
    raw = [{"text": t, "id": i, "labels": [0]} for t, i in zip(TRAIN, ids)]
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(spec))
    options = {"feature_kind": "text", "text": asdict(OPTIONS)}
    with tft_beam.Context(temp_dir=tempfile.mkdtemp(), force_tf_compat_v1=False):
        transform_fn = (raw, metadata) | tft_beam.AnalyzeDataset(lambda x: preprocessing_fn(x, options))
        (transformed, _) = ((raw, metadata), transform_fn) | tft_beam.TransformDataset()
        out = _write(transform_fn)
    metadata_io.write_metadata(metadata, f"{out}/{tft.TFTransformOutput.RAW_METADATA_DIR}")
    output = tft.TFTransformOutput(out)
    path = str(tmp_path / "train.gz")
    with tf.io.TFRecordWriter(path, options="GZIP") as writer:
        for row in reversed(transformed):  # out of id order, as ImportExampleGen may leave a split
            writer.write(_example(row))

    fit = Featurizer.fit("text", np.array(TRAIN, dtype=object), OPTIONS)
    names = ["pkg-1", "uitoolkit::gtk3", "pkg-7", "pkg-3", "nobody"]  # pkg-7's text is empty
    config = CDGTConfig(label_text=True, label_documents=True)
    fast = label_table(config, label_features(fit, names), fit.transform(np.array(TRAIN, dtype=object)), ids, names)
    records = tm.split_records([path])
    features = tm.collect_features(records, tm._parser(output, "text", fit.width, 1, with_labels=False))
    through = label_table(config, tm.transformed_label_features(output, "text", fit.width, names), features,
                          tm.read_ids(records), names)
    assert fast[0].nnz and fast[3].nnz and fast[2].nnz == 0 and fast[4].nnz == 0
    assert tm.read_ids(records) == sorted(ids, key=lambda i: int(i.split("-")[1]))
    np.testing.assert_allclose(through.toarray(), fast.toarray(), atol=1e-6)
