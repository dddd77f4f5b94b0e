"""An exported model whose tail decides apart (config tail_decisions="own"): `predict` ranks by the model's scores
and decides by its decision scores, `serving_default` serves both, and the pipeline's evaluation of the export
reads its F1 from the decision scores."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import tensorflow as tf

from cdgt_keras.config import CDGTConfig
from cdgt_keras.inputs import to_sparse_tensor
from cdgt_keras.neighbours import MemoryShape

LABELS = 10


def _model():
    """A small untrained model with input-space votes: weight 0.2, the tail labels' decisions at 0.9."""
    import keras

    from cdgt_keras.learning import build_trainable

    rng = np.random.default_rng(2)
    x = sp.random(40, 25, density=0.25, format="csr", random_state=2, dtype=np.float64)
    y = sp.csr_matrix((rng.random((40, LABELS)) < np.linspace(0.5, 0.1, LABELS)).astype(np.float32))
    keras.utils.set_random_seed(2)
    config = CDGTConfig(n_players=2, encoder_hidden=(8,), head_hidden=(), neighbours=3, tail_fraction=0.3,
                        tail_decisions="own")
    model = build_trainable(config, np.asarray(y.mean(0)).ravel() + 0.01, MemoryShape.of(x, y))
    model.build((None, x.shape[1]))
    model.neighbours.remember(x, y)
    model.neighbours.weight.assign(0.2)
    model.neighbours.decision_weight.assign(0.9)
    return model, x, y


def _examples(x: sp.csr_matrix, y: sp.csr_matrix) -> list[bytes]:
    out = []
    for i in range(x.shape[0]):
        feature = {"feature_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=x[i].indices.tolist())),
                   "feature_values": tf.train.Feature(float_list=tf.train.FloatList(value=x[i].data.tolist())),
                   "labels": tf.train.Feature(int64_list=tf.train.Int64List(value=y[i].indices.tolist()))}
        out.append(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return out


def test_an_export_ranks_by_the_scores_and_decides_by_the_decision_scores(tmp_path) -> None:
    from cdgt.components.evaluation import evaluate_export
    from cdgt.serving.export import export_keras_model, read_metadata
    from cdgt_keras.metrics import report
    from cdgt_keras.thresholds import apply_thresholds

    model, x, y = _model()
    assert model.decides_apart()
    q = to_sparse_tensor(x[:6])
    ranked, decided = np.asarray(model(q)), np.asarray(model(q, deciding=True))
    tail = np.flatnonzero(model.tail_mask.numpy())
    assert not np.allclose(ranked[:, tail], decided[:, tail])
    thresholds = np.full(LABELS, 0.3, np.float32)
    path = export_keras_model(model, str(tmp_path / "export"), [f"l{i}" for i in range(LABELS)], thresholds,
                              feature_kind="sparse", input_width=x.shape[1])
    assert read_metadata(path)["decisions_apart"] is True
    served = tf.saved_model.load(path)
    for i in range(6):
        row = x[i]
        out = served.signatures["predict"](feature_ids=tf.constant(row.indices[None].astype(np.int64)),
                                           feature_values=tf.constant(row.data[None].astype(np.float32)))
        np.testing.assert_allclose(out["scores"].numpy()[0], ranked[i], atol=1e-6)
        np.testing.assert_array_equal(out["decisions"].numpy()[0], (decided[i] > thresholds).astype(np.int32))
        np.testing.assert_array_equal(out["top_k_ids"].numpy()[0], np.argsort(-ranked[i], kind="stable")[:5])
    both = served.signatures["serving_default"](examples=tf.constant(_examples(x[:6], y[:6])))
    np.testing.assert_allclose(both["scores"].numpy(), ranked, atol=1e-6)
    np.testing.assert_allclose(both["decision_scores"].numpy(), decided, atol=1e-6)

    records = str(tmp_path / "test.gz")
    with tf.io.TFRecordWriter(records, options="GZIP") as writer:
        for example in _examples(x, y):
            writer.write(example)
    head, props = [0, 1], np.ones(LABELS)
    stats = {"num_labels": LABELS, "head": head, "tail": tail.tolist(), "propensities": props.tolist()}
    got = evaluate_export(path, records, stats)["report"]
    every = to_sparse_tensor(x)
    want = report(y, np.asarray(model(every)), apply_thresholds(np.asarray(model(every, deciding=True)), thresholds),
                  head_labels=head, tail_labels=tail, propensities=props)
    for group in want:
        for metric, value in want[group].items():
            np.testing.assert_allclose(got[group][metric], value, atol=1e-6, err_msg=f"{group} {metric}")
