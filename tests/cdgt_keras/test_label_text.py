"""Label texts (cdgt_keras/label_text.py): the words of a name by hand, the rows against the featurizer, the layer
blended last after settle's tuning (with the votes and centroids in), the tail's own weight, saved and loaded."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from cdgt_keras.config import CDGTConfig
from cdgt_keras.featurizer import Featurizer
from cdgt_keras.inputs import to_sparse_tensor
from cdgt_keras.label_text import label_features, label_words, unit_rows
from cdgt_keras.metrics import precision_at_k
from cdgt_keras.neighbours import MemoryShape
from cdgt_keras.settling import settle
from cdgt_keras.text import TextOptions


@pytest.mark.parametrize("name, words", [
    ("uitoolkit::gtk", "gtk gtk"),
    ("works-with::image:raster", "image raster image raster"),
    ("python3-numpy", "python3-numpy python3 numpy"),
    ("TAG_machine_learning", "TAG machine learning TAG machine learning"),
    ("a::b::real-time", "real-time real time"),
])
def test_label_words_by_hand(name: str, words: str) -> None:
    assert label_words(name) == words


def test_label_features_are_the_featurizers_rows_of_the_words_at_unit_length() -> None:
    docs = ["a gtk editor for images", "a qt editor", "raster image viewer in gtk", "numpy for python3"]
    fit = Featurizer.fit("text", docs, TextOptions(ngrams=2, min_df=1))
    names = ["uitoolkit::gtk", "works-with::image:raster", "python3-numpy", "use::nothing-known"]
    got = label_features(fit, names)
    want = fit.transform([label_words(n) for n in names]).toarray()
    np.testing.assert_allclose(got.toarray(), want, atol=1e-6)
    lengths = np.linalg.norm(got.toarray(), axis=1)
    np.testing.assert_allclose(lengths[:3], 1.0, atol=1e-6)
    assert got[3].nnz == 0 and got.dtype == np.float32  # no known word: an empty row, which scores 0
    assert label_features(Featurizer.fit("dense", np.ones((2, 3), np.float32)), names) is None
    assert label_features(None, names) is None


def test_unit_rows_by_hand() -> None:
    got = unit_rows(sp.csr_matrix([[3.0, 0.0, 4.0], [0.0, 0.0, 0.0]]))
    np.testing.assert_allclose(got.toarray(), [[0.6, 0.0, 0.8], [0.0, 0.0, 0.0]], atol=1e-7)
    assert got.nnz == 2


def _data(seed: int = 0, n: int = 40, d: int = 30, labels: int = 6) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    rng = np.random.default_rng(seed)
    x = sp.random(n, d, density=0.2, format="csr", random_state=seed, dtype=np.float64)
    x.data = rng.random(x.nnz) + 0.1
    y = sp.csr_matrix((rng.random((n, labels)) < 0.3).astype(np.float32))
    texts = unit_rows(sp.random(labels, d, density=0.1, format="csr", random_state=seed + 1))
    return x, y, texts


def _model(x, y, texts, **overrides):
    from cdgt_keras.learning import build_trainable

    config = CDGTConfig(n_players=2, encoder_hidden=(8,), head_hidden=(), label_text=True,
                        label_text_weights=(0.0, 0.4), **overrides)
    model = build_trainable(config, np.asarray(y.mean(0)).ravel() + 0.01, MemoryShape.for_config(config, x, y, texts))
    model.build((None, x.shape[1]))
    return model


def test_settle_tunes_the_label_texts_last_and_the_model_blends_them_last(tmp_path) -> None:
    import keras

    x, y, texts = _data()
    model = _model(x, y, texts, neighbours=3, neighbour_weights=(0.0, 0.3), centroid_features=10,
                   centroid_weights=(0.0, 0.5))
    assert model.memory.label_text_nnz == texts.nnz
    assert [layer.name for layer, _ in model.memory_layers()] == ["neighbours", "centroids", "label_text"]
    plain = np.asarray(model(to_sparse_tensor(x[:8])))
    settle(model, x, y, x, y, (0.0, 0.3), batch_size=16, rows=24, label_features=texts)
    nu = float(model.label_text.weight.numpy())
    table = model.label_text.tuning
    assert set(table) == {0.0, 0.4} and nu == max(table, key=lambda m: (table[m], -m))
    # its table: validation P@5 of the answer with the votes and centroids in at their weights, blended with it
    model.label_text.weight.assign(0.0)
    served = np.asarray(model(to_sparse_tensor(x)))
    scores = model.label_text(to_sparse_tensor(x)).numpy()
    q = x.toarray()
    want_scores = np.maximum((q / np.linalg.norm(q, axis=1, keepdims=True)) @ texts.toarray().T, 0.0)
    np.testing.assert_allclose(scores, want_scores, atol=1e-6)
    for m, p5 in table.items():
        assert p5 == pytest.approx(precision_at_k(y, (1.0 - m) * served + m * scores, 5), abs=1e-9)
    for layer, w in zip([model.neighbours, model.centroids, model.label_text], (0.3, 0.5, 0.4)):
        layer.weight.assign(w)  # set every weight, whatever validation chose, to check the blend's order
    part = x[:8]
    votes, cents, named = (layer(to_sparse_tensor(part)).numpy()
                           for layer in (model.neighbours, model.centroids, model.label_text))
    want = 0.6 * (0.5 * (0.7 * plain + 0.3 * votes) + 0.5 * cents) + 0.4 * named
    np.testing.assert_allclose(np.asarray(model(to_sparse_tensor(part))), want, atol=1e-6)
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(np.asarray(loaded(to_sparse_tensor(part))), want, atol=1e-6)


def test_the_tail_search_covers_the_label_texts(monkeypatch) -> None:
    from cdgt_keras import tail_memory
    from cdgt_keras.centroids import centroid_matrix

    x, y, texts = _data(seed=3, n=60, labels=10)
    model = _model(x, y, texts, centroid_features=10, centroid_weights=(0.0, 0.5), tail_memory="own")
    seen = {}
    real = tail_memory.tune_tail

    def spy(view, grids, rule, slack, shared=None):
        seen["grids"], seen["parts"] = grids, view.parts
        found = real(view, grids, rule, slack, shared)
        return tail_memory.TailChoice([0.1, 0.6], found.rare_f1, found.shared_rare_f1, found.precision,
                                      found.shared_precision)

    monkeypatch.setattr(tail_memory, "tune_tail", spy)
    settle(model, x, y, x, y, (0.0,), batch_size=16, rows=24, label_features=texts)
    assert seen["grids"] == [[0.0, 0.5], [0.0, 0.4]]  # the centroids', then the label texts'
    tail = np.flatnonzero(model.tail_mask.numpy())
    q = x.toarray() / np.linalg.norm(x.toarray(), axis=1, keepdims=True)
    named = np.maximum(q @ texts.toarray().T, 0.0)[:, tail]
    np.testing.assert_allclose(seen["parts"][1], named, atol=1e-6)  # the label texts' scores of the tail
    np.testing.assert_allclose(seen["parts"][0], np.maximum(q @ centroid_matrix(x, y, 10).toarray().T, 0)[:, tail],
                               atol=1e-6)
    assert float(model.centroids.tail_weight.numpy()) == pytest.approx(0.1)
    assert float(model.label_text.tail_weight.numpy()) == pytest.approx(0.6)


def test_off_by_default_absent_without_texts_and_an_error_when_settle_lacks_them() -> None:
    x, y, texts = _data()
    assert CDGTConfig().label_text is False and CDGTConfig.preset("paper").label_text is False
    assert MemoryShape.for_config(CDGTConfig(), x, y, texts) is None
    assert MemoryShape.for_config(CDGTConfig(neighbours=3), x, y, texts).label_text_nnz == 0
    assert MemoryShape.for_config(CDGTConfig(label_text=True), x, y, None).label_text_nnz == 0
    no_texts = _model(x, y, None)
    assert no_texts.label_text is None and no_texts.memory_layers() == []
    model = _model(x, y, texts)
    with pytest.raises(ValueError, match="label_features"):
        settle(model, x, y, x, y, (0.0,), batch_size=16, rows=24)
    with pytest.raises(ValueError, match="label_text_weights"):
        CDGTConfig(label_text_weights=(1.5,))


def test_a_shared_prefix_is_dropped_and_a_bag_of_words_matches_feature_names() -> None:
    from cdgt_keras.label_text import label_texts, named_features

    assert label_texts(["TAG_svm", "TAG_web"]) == ["svm svm", "web web"]
    assert label_texts(["uitoolkit::gtk", "uitoolkit::qt"]) == ["gtk gtk", "qt qt"]
    assert label_texts(["gtk", "gtk2"]) == ["gtk gtk", "gtk2 gtk2"]  # a shared "gtk" is not a prefix to drop
    assert label_texts(["only_one"]) == ["only one only one"]
    names = ["Data", "mining", "svm", "web", "data"]  # case aside; the first of two equal names is kept
    got = named_features(names, ["TAG_data-mining", "TAG_svm", "TAG_nothing"]).toarray()
    np.testing.assert_allclose(got, [[0.5 ** 0.5, 0.5 ** 0.5, 0, 0, 0], [0, 0, 1, 0, 0], [0] * 5], atol=1e-7)
    fit = Featurizer.fit("sparse", sp.csr_matrix(np.ones((2, 5))), feature_names=names)
    np.testing.assert_array_equal(label_features(fit, ["TAG_svm", "TAG_web"]).toarray(),
                                  named_features(names, ["TAG_svm", "TAG_web"]).toarray())
    assert Featurizer.from_dict(fit.to_dict()).names == names
    assert label_features(Featurizer.fit("sparse", sp.csr_matrix(np.ones((2, 5)))), ["TAG_svm"]) is None
    with pytest.raises(ValueError, match="feature names"):
        Featurizer.fit("sparse", sp.csr_matrix(np.ones((2, 5))), feature_names=names[:3])



def test_label_documents_by_hand() -> None:
    from cdgt_keras.label_text import label_documents

    features = sp.csr_matrix([[3.0, 4.0, 0.0], [0.0, 0.0, 2.0], [1.0, 0.0, 0.0], [0.0, 5.0, 0.0]])
    ids = ["gtk", "qt", "empty", "gtk"]  # a repeated id: its first record is the label's document
    got = label_documents(features, ids, ["qt", "motif", "gtk", "empty"])
    np.testing.assert_allclose(got.toarray(), [[0, 0, 1], [0, 0, 0], [0.6, 0.8, 0], [1, 0, 0]], atol=1e-7)
    assert got.dtype == np.float32 and got[1].nnz == 0
    with pytest.raises(ValueError, match="one id per training record: no ids for 4 records"):
        label_documents(features, None, ["qt"])
    with pytest.raises(ValueError, match="3 ids for 4 records"):
        label_documents(features, ids[:3], ["qt"])


def test_label_table_joins_names_and_documents_when_the_config_asks() -> None:
    from cdgt_keras.label_text import label_table, with_documents

    names = unit_rows(sp.csr_matrix([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 2.0]]))
    features = sp.csr_matrix([[0.0, 3.0, 4.0], [1.0, 0.0, 0.0]])
    on = CDGTConfig(label_text=True, label_documents=True)
    got = label_table(on, names, features, ["c", "b"], ["a", "b", "c"]).toarray()
    r = 1 / np.sqrt(2)
    # (name + document) / 2 where a label has a document ("b", "c"), its name's row where it has none ("a")
    want = [[r, r, 0.0], [0.5, 0.0, 0.0], [0.0, 0.3, 0.5 + 0.4]]
    np.testing.assert_allclose(got, want, atol=1e-7)
    # labels that name no training record: the names' rows as they were, to the bit
    unchanged = label_table(on, names, features, ["x", "y"], ["a", "b", "c"])
    assert (unchanged != names).nnz == 0 and unchanged.dtype == np.float32
    assert label_table(CDGTConfig(label_text=True), names, features, None, ["a", "b", "c"]) is names
    assert label_table(on, None, features, ["c", "b"], ["a", "b", "c"]) is None
    assert label_table(on, names, features, None, ["a", "b", "c"]) is names  # records without ids name nothing
    # the layer scores an input of unit length by the mean of its cosines with the name and the document
    q = np.array([[0.0, 0.6, 0.8]])
    cos_name, cos_doc = q @ names.toarray()[2], q @ np.array([0.0, 0.6, 0.8])
    assert (q @ got[2])[0] == pytest.approx((cos_name[0] + cos_doc) / 2)
    with pytest.raises(ValueError, match="differ"):
        with_documents(names, sp.csr_matrix((2, 3)))


def test_label_documents_are_off_by_default_and_nothing_without_the_label_texts() -> None:
    from cdgt_keras.label_text import label_table

    assert CDGTConfig().label_documents is False and CDGTConfig.preset("paper").label_documents is False
    names = unit_rows(sp.csr_matrix([[1.0, 0.0]]))
    assert label_table(CDGTConfig(label_documents=True), names, sp.csr_matrix([[0.0, 1.0]]), ["a"], ["a"]) is names


def test_fit_model_holds_the_names_joined_with_the_training_documents() -> None:
    from cdgt_keras.data import MultiLabelData
    from cdgt_keras.label_text import label_table
    from cdgt_keras.training import fit_model

    x, y, texts = _data(seed=5, n=30, labels=4)
    names = ["r0", "r7", "nobody", "r3"]  # three labels name training records
    ids = [f"r{i}" for i in range(x.shape[0])]
    train = MultiLabelData(x.astype(np.float32), sp.csr_matrix(y, dtype=np.uint8), names, texts, ids)
    config = CDGTConfig(n_players=2, encoder_hidden=(8,), head_hidden=(), label_text=True, label_documents=True,
                        label_text_weights=(0.0, 0.4), epochs=1, batch_size=16)
    model, _, _ = fit_model(config, train, train)
    want = label_table(config, texts, train.features, ids, names)
    assert want.nnz > texts.nnz and model.memory.label_text_nnz == want.nnz
    q = unit_rows(x).toarray()
    np.testing.assert_allclose(model.label_text(to_sparse_tensor(x)).numpy(),
                               np.maximum(q @ want.toarray().T, 0.0), atol=1e-6)
    doc = unit_rows(x[7]).toarray()[0]
    np.testing.assert_allclose(want.toarray()[1], (texts.toarray()[1] + doc) / 2, atol=1e-6)
