"""Serving at large L (issue 14): the `predict` signature of a 20,000-label model answers top k and the decided
labels without a [batch, L] string tensor, and its top k is numpy's ranking of its own scores."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

NUM_LABELS, WIDTH, TOP_K, BATCH = 20_000, 8, 5, 6


@pytest.fixture(scope="module")
def large_export(tmp_path_factory):
    """A one-layer sigmoid model with 20,000 outputs (untrained: the test compares the export with itself), its
    thresholds high enough that a row decides a handful of labels."""
    import keras

    from cdgt.serving.export import export_keras_model

    keras.utils.set_random_seed(0)
    inputs = keras.Input((WIDTH,))
    model = keras.Model(inputs, keras.layers.Dense(NUM_LABELS, activation="sigmoid")(inputs))
    x = np.random.default_rng(0).standard_normal((BATCH, WIDTH)).astype(np.float32)
    probs = np.asarray(model(x))
    thresholds = np.full(NUM_LABELS, np.quantile(probs, 0.9995), np.float32)  # about 10 labels per row
    names = [f"dep::{i}" for i in range(NUM_LABELS)]
    path = str(tmp_path_factory.mktemp("large") / "1")
    export_keras_model(model, path, names, thresholds, feature_kind="dense", input_width=WIDTH, top_k=TOP_K)
    return path, x, thresholds, np.array(names)


def _string_tensors(loaded) -> list[tuple[str, str, list[int | None] | None]]:
    """(op type, op name, static shape) of every computed string tensor of the restored `predict` function (the
    signature's own graph only calls it)."""
    (function,) = loaded.predict.concrete_functions
    return [(op.type, op.name, t.shape.as_list() if t.shape.rank is not None else None)
            for op in function.graph.get_operations() if op.type != "Const"
            for t in op.outputs if t.dtype == tf.string]


def test_predict_has_no_batch_by_labels_string_tensor(large_export):
    path, x, thresholds, _ = large_export
    loaded = tf.saved_model.load(path)
    predict = loaded.signatures["predict"]
    strings = {k: v.shape.as_list() for k, v in predict.structured_outputs.items() if v.dtype == tf.string}
    assert strings == {"labels": [None, None], "top_k_labels": [None, TOP_K]}
    tensors = _string_tensors(loaded)
    assert tensors, "the restored predict function makes no string tensor: the inspection looks in the wrong graph"
    # names are looked up for a flat list of decided labels [n] or for the top k [B, k], never per (row, label);
    # the one 2-D string tensor of unknown width pads the decided names to the batch's largest count
    gathers = [(name, shape) for kind, name, shape in tensors if "Gather" in kind]
    assert gathers and all(shape in ([None], [None, TOP_K]) for _, shape in gathers), gathers
    wide = [(kind, name, shape) for kind, name, shape in tensors if shape is None or NUM_LABELS in shape
            or (len(shape) == 2 and shape[1] is None and kind not in ("RaggedTensorToTensor", "Identity"))]
    assert not wide, f"string tensors that may be [batch, L]: {wide}"
    out = predict(features=tf.constant(x))
    decided = int((np.asarray(out["scores"]) > thresholds).sum(axis=1).max())
    assert 0 < decided < 100  # the padded width is the largest decided count, not L
    assert out["labels"].shape == (BATCH, decided) and out["label_ids"].shape == (BATCH, decided)


def test_predict_top_k_and_decided_labels_match_numpy(large_export):
    path, x, thresholds, names = large_export
    out = {k: v.numpy() for k, v in tf.saved_model.load(path).signatures["predict"](features=tf.constant(x)).items()}
    scores = out["scores"]
    order = np.argsort(-scores, axis=1, kind="stable")
    np.testing.assert_array_equal(out["top_k_ids"], order[:, :TOP_K])
    np.testing.assert_array_equal(out["top_k_scores"], np.take_along_axis(scores, order[:, :TOP_K], axis=1))
    assert out["top_k_labels"].astype(str).tolist() == names[order[:, :TOP_K]].tolist()
    for i in range(BATCH):
        want = [j for j in order[i] if scores[i, j] > thresholds[j]]
        got = [int(j) for j in out["label_ids"][i] if j >= 0]
        assert got == want  # a row may decide none: all padding
        assert [s.decode() for s in out["labels"][i] if s] == names[want].tolist()
        np.testing.assert_array_equal(out["label_scores"][i, :len(want)], scores[i, want])
        assert (out["label_ids"][i, len(want):] == -1).all() and (out["label_scores"][i, len(want):] == 0).all()
