"""pipeline.trainer_module: the pieces run_fn is made of that the pipeline tests do not single out."""

from __future__ import annotations

import warnings

import keras
import numpy as np
import tensorflow as tf

from cdgt.pipeline.trainer_module import quiet_exhausted_input


def _unknown_cardinality(n: int) -> tf.data.Dataset:
    """n batches of a dataset whose length tf.data cannot know (as a TFRecordDataset's)."""
    data = tf.data.Dataset.range(n * 4).filter(lambda i: i >= 0).map(lambda i: tf.fill([3], tf.cast(i, tf.float32)))
    return data.batch(4)


def test_the_false_exhausted_input_warning_is_dropped_and_only_it():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    data = _unknown_cardinality(3)
    assert data.cardinality() == tf.data.UNKNOWN_CARDINALITY
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        model.predict(data, verbose=0)  # reads the split to its end, as run_fn does
    assert any("ran out of data" in str(w.message) for w in seen)  # what Keras says without the filter
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with quiet_exhausted_input():
            out = model.predict(_unknown_cardinality(3), verbose=0)
            warnings.warn("another warning", UserWarning, stacklevel=1)
    assert out.shape == (12, 1) and np.isfinite(out).all()
    assert [str(w.message) for w in seen] == ["another warning"]


def test_an_epoch_of_a_small_split_spans_several_shuffled_passes(tmp_path):
    """min_steps_per_epoch on the TFX path: each epoch is exactly `steps` batches made of whole shuffled passes,
    and a resumed run (start epoch 1) sees the batches an uninterrupted run sees from epoch 1 on."""
    from cdgt.pipeline.trainer_module import train_dataset

    path = str(tmp_path / "train.tfrecord.gz")
    with tf.io.TFRecordWriter(path, options="GZIP") as writer:
        for i in range(10):
            writer.write(tf.constant(str(i)).numpy())
    batches = [b.numpy().tolist() for b in train_dataset([path], lambda b: b, 4, 10, seed=0, start_epoch=0,
                                                         epochs=2, steps_per_epoch=7)]
    assert len(batches) == 14 and [len(b) for b in batches[:7]] == [4, 4, 2, 4, 4, 2, 4]
    first, second = [x for b in batches[:3] for x in b], [x for b in batches[3:6] for x in b]
    assert sorted(first) == sorted(second) and first != second  # two passes: the same examples, reshuffled
    resumed = [b.numpy().tolist() for b in train_dataset([path], lambda b: b, 4, 10, seed=0, start_epoch=1,
                                                         epochs=2, steps_per_epoch=7)]
    assert resumed == batches[7:]


def _write_examples(path, ids: list[str | None]) -> list[str]:
    """A gzipped TFRecord of tf.Examples with these ids (None: no id) and labels [i]; returns [path]."""
    with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
        for i, record_id in enumerate(ids):
            feature = {"labels": tf.train.Feature(int64_list=tf.train.Int64List(value=[i]))}
            if record_id is not None:
                feature["id"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[record_id.encode()]))
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return [str(path)]


def _labels(records) -> list[int]:
    return [int(tf.train.Example.FromString(r).features.feature["labels"].int64_list.value[0])
            for r in records.as_numpy_iterator()]


def test_a_split_is_read_in_id_order_the_order_cdgt_train_reads_the_built_split_in(tmp_path):
    """ImportExampleGen moves records about; the Trainer puts them back in id order (numbers by value), and the
    labels read from the same records stay aligned with them."""
    from cdgt.pipeline.trainer_module import split_records
    from cdgt_keras.features import read_labels

    files = _write_examples(tmp_path / "t.gz", ["f.arff:10", "f.arff:9", "b", "f.arff:100", "a"])
    records = split_records(files)
    assert _labels(records) == [4, 2, 1, 0, 3]  # a, b, f.arff:9, f.arff:10, f.arff:100
    assert read_labels(records, 5).toarray().argmax(axis=1).tolist() == [4, 2, 1, 0, 3]


def test_a_split_without_ids_or_too_large_to_hold_keeps_its_files_order(tmp_path):
    from cdgt.pipeline.trainer_module import split_records

    no_ids = _write_examples(tmp_path / "n.gz", ["b", None, "a"])
    assert split_records(no_ids) == no_ids
    many = _write_examples(tmp_path / "m.gz", ["b", "a", "c"])
    assert split_records(many, limit=2) == many
    assert _labels(split_records(many, limit=3)) == [1, 0, 2]
