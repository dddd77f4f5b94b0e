"""The feature contract (cdgt_keras.features): label-id lists read back as the 0/1 matrix they were written from,
and the light import that lets the ingestion and the REST client share the keys without TensorFlow."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import tensorflow as tf

from cdgt_keras.features import DENSE, LABELS, labels_csr, read_labels, stack_labels


def _write(path: str, rows: list[list[int]]) -> None:
    """Gzipped tf.Examples holding each row's label ids (and a dense feature, as a built split has)."""
    with tf.io.TFRecordWriter(path, options="GZIP") as writer:
        for labels in rows:
            feature = {LABELS: tf.train.Feature(int64_list=tf.train.Int64List(value=labels)),
                       DENSE: tf.train.Feature(float_list=tf.train.FloatList(value=[0.5]))}
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


def test_read_labels_gives_the_written_label_lists(tmp_path):
    rows = [[1, 3], [], [0], [2, 3, 1]]
    first, second = str(tmp_path / "a.tfrecord.gz"), str(tmp_path / "b.tfrecord.gz")
    _write(first, rows[:3])
    _write(second, rows[3:])
    truth = read_labels([first, second], num_labels=5, batch_size=2)  # batches cross the rows and the files
    expected = np.zeros((4, 5), np.uint8)
    for i, labels in enumerate(rows):
        expected[i, labels] = 1
    assert truth.format == "csr" and truth.dtype == np.uint8
    assert np.array_equal(truth.toarray(), expected)


def test_labels_csr_of_a_parsed_batch_and_an_empty_stack():
    ids = tf.SparseTensor([[0, 0], [1, 0], [1, 1], [2, 0]], tf.constant([2, 0, 1, 1], tf.int64), [4, 2])  # row 3: none
    assert labels_csr(ids, num_labels=3).toarray().tolist() == [[0, 0, 1], [1, 1, 0], [0, 1, 0], [0, 0, 0]]
    empty = stack_labels([], num_labels=3)
    assert empty.shape == (0, 3) and empty.dtype == np.uint8


def test_importing_the_contract_leaves_tensorflow_out():
    code = "import sys, cdgt_keras.features; assert 'tensorflow' not in sys.modules, 'TensorFlow imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
