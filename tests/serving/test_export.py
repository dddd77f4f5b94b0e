"""The exported SavedModel: every signature, loaded with tf.saved_model.load, gives what the Keras model gives."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import tensorflow as tf

from cdgt.serving.export import BLESSING_LABELS, BLESSING_SCORES, CLASSIFY_METHOD, LABELS_MULTI_HOT, read_metadata

KINDS = ("dense", "sparse", "text", "embedded_text")  # fixtures of tests/serving/conftest.py


def keras_scores(export) -> np.ndarray:
    from cdgt_keras.inputs import to_sparse_tensor

    x = export.model_input
    return np.asarray(export.model(to_sparse_tensor(x) if sp.issparse(x) else x))


def predict_inputs(export) -> dict[str, tf.Tensor]:
    """The `predict` signature's raw inputs (sparse rows padded with id -1)."""
    if export.kind == "dense":
        return {"features": tf.constant(export.inputs)}
    if export.kind == "text":
        return {"text": tf.constant(export.inputs)}
    rows = [export.inputs[i] for i in range(export.inputs.shape[0])]
    width = max(1, max(r.nnz for r in rows))
    ids = np.full((len(rows), width), -1, np.int64)
    values = np.zeros((len(rows), width), np.float32)
    for i, row in enumerate(rows):
        ids[i, :row.nnz], values[i, :row.nnz] = row.indices, row.data
    return {"feature_ids": tf.constant(ids), "feature_values": tf.constant(values)}


def examples(export, with_labels: bool = False) -> tf.Tensor:
    """The request rows as serialized tf.Examples (the keys of a built data directory)."""
    out = []
    for i in range(len(export.inputs) if export.kind == "text" else export.inputs.shape[0]):
        feature = {}
        if export.kind == "dense":
            feature["features"] = tf.train.Feature(float_list=tf.train.FloatList(value=export.inputs[i]))
        elif export.kind == "text":
            feature["text"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[export.inputs[i].encode()]))
        else:
            row = export.inputs[i]
            feature["feature_ids"] = tf.train.Feature(int64_list=tf.train.Int64List(value=row.indices))
            feature["feature_values"] = tf.train.Feature(float_list=tf.train.FloatList(value=row.data))
        if with_labels:
            feature["labels"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 3, 5]))
        out.append(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return tf.constant(out)


@pytest.fixture(params=KINDS)
def export(request):
    return request.getfixturevalue(f"{request.param}_export")


def test_predict_gives_the_keras_scores_labels_and_top_k(export):
    loaded = tf.saved_model.load(export.path)
    out = {k: v.numpy() for k, v in loaded.signatures["predict"](**predict_inputs(export)).items()}
    expected = keras_scores(export)
    np.testing.assert_allclose(out["scores"], expected, rtol=1e-5, atol=1e-6)
    decided = expected > export.thresholds
    np.testing.assert_array_equal(out["decisions"], decided.astype(np.int32))
    names = np.array(export.names)
    for i, row in enumerate(expected):
        order = np.argsort(-row, kind="stable")
        assert [s.decode() for s in out["top_k_labels"][i]] == list(names[order[:3]])
        np.testing.assert_allclose(out["top_k_scores"][i], row[order[:3]], rtol=1e-5)
        labels = [s.decode() for s in out["labels"][i] if s]
        assert labels == [names[j] for j in order if decided[i, j]]
    assert out["labels"].shape[1] == decided.sum(axis=1).max()


def test_serving_default_and_classify_take_serialized_examples(export):
    loaded = tf.saved_model.load(export.path)
    expected = keras_scores(export)
    scores = loaded.signatures["serving_default"](examples=examples(export))["scores"].numpy()
    np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-6)
    classified = loaded.signatures["classify"](inputs=examples(export))  # the top k, best first: no [B, L] strings
    k = classified["scores"].shape[1]
    assert 1 <= k <= len(export.names) and classified["classes"].shape == classified["scores"].shape
    best = np.argsort(-expected, axis=1, kind="stable")[:, :k]
    np.testing.assert_allclose(classified["scores"].numpy(), np.take_along_axis(expected, best, axis=1), rtol=1e-5,
                               atol=1e-6)
    assert [c.decode() for c in classified["classes"].numpy()[-1]] == [export.names[j] for j in best[-1]]


def test_blessing_signatures_give_every_score_and_the_multi_hot_rows(dense_export):
    loaded = tf.saved_model.load(dense_export.path)
    rows = examples(dense_export, True)
    hot = loaded.signatures[BLESSING_LABELS](examples=rows)[LABELS_MULTI_HOT].numpy()
    assert hot.shape == (6, 7)
    np.testing.assert_array_equal(np.flatnonzero(hot[4]), [1, 5])
    scores = loaded.signatures[BLESSING_SCORES](examples=rows)["scores"].numpy()
    np.testing.assert_allclose(scores, keras_scores(dense_export), rtol=1e-5, atol=1e-6)


def test_blessing_signatures_keep_only_the_sampled_labels(dense_export, tmp_path):
    from cdgt.serving.export import export_keras_model

    path = str(tmp_path / "m" / "1")
    export_keras_model(dense_export.model, path, dense_export.names, dense_export.thresholds, feature_kind="dense",
                       input_width=dense_export.inputs.shape[1], blessing_ids=[1, 4, 5])
    loaded = tf.saved_model.load(path)
    rows = examples(dense_export, True)
    hot = loaded.signatures[BLESSING_LABELS](examples=rows)[LABELS_MULTI_HOT].numpy()
    # example i has labels i % 3 and 5: label 1 for examples 1 and 4, label 4 never, label 5 always
    np.testing.assert_array_equal(hot, [[0, 0, 1], [1, 0, 1], [0, 0, 1], [0, 0, 1], [1, 0, 1], [0, 0, 1]])
    scores = loaded.signatures[BLESSING_SCORES](examples=rows)["scores"].numpy()
    np.testing.assert_allclose(scores, keras_scores(dense_export)[:, [1, 4, 5]], rtol=1e-5, atol=1e-6)
    assert read_metadata(path)["blessing_label_count"] == 3
    with pytest.raises(ValueError, match="blessing_ids"):
        export_keras_model(dense_export.model, str(tmp_path / "bad"), dense_export.names, dense_export.thresholds,
                           feature_kind="dense", input_width=dense_export.inputs.shape[1], blessing_ids=[7])


def test_label_names_thresholds_and_classify_method_travel_inside(text_export):
    from tensorflow.core.protobuf import saved_model_pb2

    path = Path(text_export.path)
    loaded = tf.saved_model.load(str(path))
    assert [n.decode() for n in loaded.label_names.numpy()] == text_export.names
    np.testing.assert_allclose(loaded.thresholds.numpy(), text_export.thresholds)
    assert (path / "assets" / "labels.txt").read_text().split() == text_export.names
    saved = saved_model_pb2.SavedModel.FromString((path / "saved_model.pb").read_bytes())
    methods = {k: v.method_name for k, v in saved.meta_graphs[0].signature_def.items()}
    assert methods["classify"] == CLASSIFY_METHOD and methods["predict"] == "tensorflow/serving/predict"
    meta = read_metadata(str(path))
    assert meta["feature_kind"] == "text" and meta["top_k"] == 3
    assert sorted(meta["signatures"]) == [BLESSING_LABELS, BLESSING_SCORES, "classify", "predict", "serving_default"]


def test_the_sentence_encoders_weights_are_saved_once_as_variables_not_graph_constants(embedded_text_export):
    """Each function that embeds would otherwise carry every weight as a constant (each cut's loop, each of the
    SavedModels tf.Transform writes and loads): GBs of memory for MiniLM."""
    from tensorflow.core.protobuf import saved_model_pb2

    from cdgt_keras.text_embedding import encoder

    options = embedded_text_export.featurizer.text.options
    weights = encoder(options.embedding, options.embedding_tokens).variables()
    shapes = {tuple(w.shape) for w in weights.values() if w.shape.rank == 2}
    path = Path(embedded_text_export.path)
    saved_shapes = {tuple(shape) for _, shape in tf.train.list_variables(str(path / "variables" / "variables"))}
    assert shapes <= saved_shapes
    graph = saved_model_pb2.SavedModel.FromString((path / "saved_model.pb").read_bytes()).meta_graphs[0].graph_def
    nodes = [*graph.node, *(n for f in graph.library.function for n in f.node_def)]
    constant_shapes = {tuple(d.size for d in n.attr["value"].tensor.tensor_shape.dim) for n in nodes if n.op == "Const"}
    assert not shapes & constant_shapes


@pytest.mark.parametrize("inputs, message", [
    ({"features": tf.constant([["a"] * 12])}, "string"),
    ({"features": tf.zeros([2, 5])}, r"\[batch, 12\]"),
    ({"text": tf.constant(["x"])}, "features"),
])
def test_the_signature_rejects_wrong_dtype_shape_and_name(dense_export, inputs, message):
    predict = tf.saved_model.load(dense_export.path).signatures["predict"]
    with pytest.raises((TypeError, ValueError, tf.errors.InvalidArgumentError), match=message):
        predict(**inputs)


def test_export_command_writes_the_next_version_of_a_train_run(text_export, tmp_path):
    from cdgt.pipeline.cli import main

    run = tmp_path / "run"
    run.mkdir()
    text_export.model.save(run / "model.keras")
    (run / "thresholds.json").write_text(json.dumps({"thresholds": text_export.thresholds.tolist()}))
    (run / "data.json").write_text(json.dumps({"feature_kind": "text", "label_names": text_export.names,
                                               "input_width": text_export.featurizer.width}))
    (run / "featurizer.json").write_text(json.dumps(text_export.featurizer.to_dict()))
    base = tmp_path / "models"
    assert main(["export", str(run), "--output", str(base), "--name", "tags", "--top-k", "3"]) == 0
    assert main(["export", str(run), "--output", str(base), "--name", "tags"]) == 0
    assert sorted(p.name for p in (base / "tags").iterdir()) == ["1", "2"]
    loaded = tf.saved_model.load(str(base / "tags" / "1"))
    scores = loaded.signatures["predict"](text=tf.constant(text_export.inputs))["scores"].numpy()
    np.testing.assert_allclose(scores, keras_scores(text_export), rtol=1e-5, atol=1e-6)


def test_export_of_an_incomplete_run_names_what_is_missing(tmp_path, capsys):
    from cdgt.pipeline.cli import main

    (tmp_path / "model.keras").write_text("")
    assert main(["export", str(tmp_path), "--output", str(tmp_path / "m"), "--name", "x"]) == 1
    assert "missing thresholds.json, data.json" in capsys.readouterr().err


def test_export_command_copies_a_pipeline_runs_pushed_model(dense_export, tmp_path):
    import shutil

    from cdgt.pipeline.cli import main
    from cdgt.serving.layout import resolve_saved_model

    run = tmp_path / "pipeline-run"
    for version in ("1700000000", "1700000500"):  # the Pusher's versions are timestamps; the newest wins
        shutil.copytree(dense_export.path, run / "serving" / "cdgt-synthetic" / version)
    (run / "serving" / "cdgt-synthetic" / "1700000500" / "marker").write_text("newest")
    assert main(["export", str(run), "--output", str(tmp_path / "models"), "--name", "vec", "--version", "7"]) == 0
    target = resolve_saved_model(tmp_path / "models" / "vec")
    assert target.name == "7" and (target / "marker").read_text() == "newest"
    assert main(["export", str(run), "--output", str(tmp_path / "models"), "--name", "vec", "--version", "7"]) == 1
    with pytest.raises(FileNotFoundError, match=r"holds no saved_model\.pb"):
        resolve_saved_model(tmp_path)


def test_predict_signature_refuses_non_finite_features(dense_export, sparse_export):
    """The SavedModel itself refuses NaN / infinity (TF Serving answers HTTP 400), whatever client sends them."""
    dense = tf.saved_model.load(dense_export.path).signatures["predict"]
    row = np.zeros((1, dense_export.model_input.shape[1]), np.float32)
    row[0, 1] = np.nan
    with pytest.raises(tf.errors.InvalidArgumentError, match="`features` must be finite numbers"):
        dense(features=tf.constant(row))
    sparse = tf.saved_model.load(sparse_export.path).signatures["predict"]
    with pytest.raises(tf.errors.InvalidArgumentError, match="`feature_values` must be finite numbers"):
        sparse(feature_ids=tf.constant([[0, 2]], tf.int64), feature_values=tf.constant([[1.0, np.inf]], tf.float32))


def _op_types(graph_def) -> set[str]:
    """Every op type a GraphDef names, its functions' bodies included."""
    ops = {node.op for node in graph_def.node}
    for function in graph_def.library.function:
        ops |= {node.op for node in function.node_def}
    return ops


def test_the_saved_model_names_no_cdgt_op_while_prediction_in_process_runs_through_the_kernel(dense_export):
    """TF Serving and TFMA load the SavedModel without cdgt's kernel library, so its graphs keep to TensorFlow's ops
    (`portable_graphs`); in process, the fusion runs through `CdgtColumnCombine`, with the exported graph's bits."""
    from tensorflow.core.protobuf import saved_model_pb2

    from cdgt_keras.kernels import column_combine, in_portable_graphs, portable_graphs

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((Path(dense_export.path) / "saved_model.pb").read_bytes())
    exported = set().union(*(_op_types(graph.graph_def) for graph in saved.meta_graphs))
    assert "SparseTensorDenseMatMul" in exported  # the fusion's product, as TensorFlow computes it
    assert not {op for op in exported if op.startswith("Cdgt")}
    if column_combine() is None:
        pytest.fail("cdgt's kernels did not build here: the in-process road cannot be checked")
    x = tf.constant(dense_export.model_input)
    call = tf.function(lambda rows: dense_export.model(rows, training=False))
    in_process = _op_types(call.get_concrete_function(x).graph.as_graph_def())
    assert "CdgtColumnCombine" in in_process and not in_portable_graphs()
    with portable_graphs():
        portable = tf.function(lambda rows: dense_export.model(rows, training=False))
        assert "CdgtColumnCombine" not in _op_types(portable.get_concrete_function(x).graph.as_graph_def())
        np.testing.assert_array_equal(call(x).numpy(), portable(x).numpy())
    loaded = tf.saved_model.load(dense_export.path).signatures["predict"](features=x)["scores"].numpy()
    np.testing.assert_array_equal(loaded, call(x).numpy())
