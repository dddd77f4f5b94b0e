"""The sentence encoder (cdgt_keras.sentence, cdgt_keras.wordpiece, cdgt_keras.text_embedding): the tokeniser's ids
and the embeddings held to transformers/torch's for all-MiniLM-L6-v2 (tests/fixtures/minilm_reference.json, made
by `transformers.BertTokenizerFast` and `AutoModel` 4.x with torch 2.13 on the CPU: texts of accents,
punctuation, CJK, a word over 100 characters, an empty text and one cut at 128 pieces), the WordPiece rules on
hand-made vocabularies, and the embedding's columns in the text features."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import numpy as np
import pytest
import tensorflow as tf

from cdgt_keras.config import CDGTConfig
from cdgt_keras.featurizer import Featurizer
from cdgt_keras.sentence import DEFAULT_MODEL, SentenceEncoder, _tiny_checkpoint, model_directory, read_safetensors
from cdgt_keras.text import TextOptions
from cdgt_keras.text_embedding import embed_texts
from cdgt_keras.wordpiece import WordPiece

REFERENCE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "minilm_reference.json")


@pytest.fixture(scope="module")
def reference() -> dict:
    with open(REFERENCE, encoding="utf-8") as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def minilm(reference) -> SentenceEncoder:
    return SentenceEncoder(model_directory(DEFAULT_MODEL), reference["max_tokens"])


def _ids(tokenizer: WordPiece, texts: list[str], max_tokens: int) -> list[list[int]]:
    ids, mask = tokenizer(tf.constant(texts), max_tokens)
    return [[int(i) for i, m in zip(row, keep) if m] for row, keep in zip(ids.numpy(), mask.numpy())]


def test_wordpiece_ids_equal_the_reference_tokenizers(reference, minilm):
    assert _ids(minilm.tokenizer, reference["texts"], reference["max_tokens"]) == reference["ids"]


def test_embeddings_equal_torchs_within_1e_5(reference, minilm):
    got = minilm.embed_all(reference["texts"], batch_size=3)  # batches of mixed lengths: padding changes nothing
    np.testing.assert_allclose(got, np.asarray(reference["embeddings"], np.float32), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)


def test_wordpiece_cuts_greedily_longest_first_and_unknown_words_whole():
    pieces = WordPiece(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "una", "##ff", "##able", "##a", "!", "e", "中"])
    # "unaffable": "una" (longest first), then "##ff", "##able"; "unx" cannot be cut past "un": the whole word is
    # [UNK]; "É!" -> "e" (lower-cased, accent stripped) and "!" split off; CJK characters stand alone.
    assert _ids(pieces, ["Unaffable unx É! 中中", "a" * 101, ""], 16) == [
        [2, 5, 6, 7, 1, 10, 9, 11, 11, 3], [2, 1, 3], [2, 3]]
    assert _ids(pieces, ["una una una una"], 4) == [[2, 5, 5, 3]]  # cut at max_tokens, [SEP] kept


def test_wordpiece_needs_the_special_tokens():
    with pytest.raises(ValueError, match=r"\[UNK\]"):
        WordPiece(["[PAD]", "[CLS]", "[SEP]", "a"])


def test_safetensors_reader_reads_names_shapes_and_values(tmp_path):
    directory = _tiny_checkpoint(str(tmp_path / "bert"))
    weights = read_safetensors(os.path.join(directory, "model.safetensors"))
    assert weights["encoder.layer.1.intermediate.dense.weight"].shape == (16, 8)
    assert weights["embeddings.word_embeddings.weight"].dtype == np.float32
    assert np.isfinite(weights["embeddings.LayerNorm.bias"]).all()


def test_an_unknown_model_name_is_a_clear_error():
    with pytest.raises(ValueError, match="neither a directory"):
        model_directory("no-such-model")


def test_config_rejects_bad_embedding_fields():
    with pytest.raises(ValueError, match="text_embedding_tokens"):
        CDGTConfig(text_embedding_tokens=2)
    with pytest.raises(ValueError, match="text_embedding_scale"):
        CDGTConfig(text_embedding_scale=0.0)
    for lead in (2, 64, 100):  # under 3, or not shorter than the whole cut
        with pytest.raises(ValueError, match="text_embedding_lead_tokens"):
            CDGTConfig(text_embedding_tokens=64, text_embedding_lead_tokens=lead)
    assert TextOptions.from_config(CDGTConfig(text_embedding_lead_tokens=32)).embedding_lead_tokens == 32
    options = TextOptions.from_config(CDGTConfig(text_embedding="x", text_embedding_tokens=64,
                                                 text_embedding_scale=2.0))
    assert (options.embedding, options.embedding_tokens, options.embedding_scale) == ("x", 64, 2.0)


def test_embedding_columns_come_first_scaled_then_the_tfidf(tmp_path, monkeypatch):
    monkeypatch.setenv("CDGT_CACHE_DIR", str(tmp_path / "cache"))
    train = ["a text editor", "a text viewer", "editors of text", "a viewer"]
    plain = TextOptions(ngrams=1, min_df=2)
    options = replace(plain, embedding=_tiny_checkpoint(str(tmp_path / "bert")), embedding_tokens=8,
                      embedding_scale=2.0)
    fit, without = Featurizer.fit("text", train, options), Featurizer.fit("text", train, plain)
    assert fit.width == 8 + without.width
    fast = fit.transform(train).toarray()
    np.testing.assert_allclose(fast[:, 8:], without.transform(train).toarray(), atol=1e-7)
    np.testing.assert_allclose(np.linalg.norm(fast[:, :8], axis=1), 2.0, atol=1e-5)
    graph = tf.sparse.to_dense(fit.tensor(tf.constant(train))).numpy()
    np.testing.assert_allclose(graph, fast, atol=1e-6)


def test_embeddings_are_cached_on_disk_by_their_texts(tmp_path, monkeypatch):
    monkeypatch.setenv("CDGT_CACHE_DIR", str(tmp_path / "cache"))
    options = TextOptions(embedding=_tiny_checkpoint(str(tmp_path / "bert")), embedding_tokens=8)
    first = embed_texts(options, ["a text", "editors"])
    calls = []
    monkeypatch.setattr(SentenceEncoder, "embed_all", lambda *a, **k: calls.append(a) or np.zeros((1, 8)))
    np.testing.assert_array_equal(embed_texts(options, ["a text", "editors"]), first)  # from the cache
    assert calls == []
    embed_texts(options, ["another text"])  # new texts: encoded
    assert len(calls) == 1
    assert len(os.listdir(tmp_path / "cache" / "embeddings")) == 2  # one file a list of texts


def test_long_lists_show_progress_and_keep_the_input_order(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CDGT_CACHE_DIR", str(tmp_path / "cache"))
    options = TextOptions(embedding=_tiny_checkpoint(str(tmp_path / "bert")), embedding_tokens=8)
    texts = [("a text editor " * (i % 5)).strip() for i in range(2000)]  # lengths interleaved
    vectors = embed_texts(options, texts)
    lines = capsys.readouterr().err.strip().splitlines()
    assert 2 <= len(lines) <= 10
    assert lines[-1].startswith("text_embedding: encoded 2,000/2,000 texts to 8 word pieces in ")
    assert all(" s left" in line for line in lines[:-1]) and " s left" not in lines[-1]
    alone = embed_texts(options, texts[:5])  # encoded apart, in a batch of their own
    np.testing.assert_allclose(vectors[:5], alone, atol=1e-6)


def test_a_traced_batch_of_empty_texts_is_cls_and_sep():
    pieces = WordPiece(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"])
    traced = tf.function(lambda t: pieces(t, 8), input_signature=[tf.TensorSpec([None], tf.string)])
    ids, mask = traced(tf.constant(["", " \t"]))
    assert ids.numpy().tolist() == [[2, 3], [2, 3]] and mask.numpy().tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_a_batch_is_encoded_in_chunks_shortest_first_and_returned_in_order(tmp_path):
    encoder = SentenceEncoder(_tiny_checkpoint(str(tmp_path / "bert")), max_tokens=16)
    texts = ["a text editor, a text editor. editors", "a", "", "text editors", "a text", "editor editor editor"]
    alone = np.concatenate([encoder.embed(tf.constant([t])).numpy() for t in texts])
    for chunk in (1, 2, 4, 64):
        np.testing.assert_allclose(encoder.embed(tf.constant(texts), chunk=chunk).numpy(), alone, atol=1e-6)
    traced = tf.function(lambda t: encoder.embed(t, chunk=4), input_signature=[tf.TensorSpec([None], tf.string)])
    np.testing.assert_allclose(traced(tf.constant(texts)).numpy(), alone, atol=1e-6)
    assert traced(tf.constant([], tf.string)).shape == (0, 8)


def test_chunks_hold_texts_of_one_padded_length():
    lengths = tf.constant([8, 8, 8, 16, 16, 24, 24, 24, 24, 24])
    starts = SentenceEncoder._chunk_starts(lengths, chunk=2).numpy()
    assert np.flatnonzero(starts).tolist() == [0, 2, 3, 5, 7, 9]
    assert SentenceEncoder._chunk_starts(tf.constant([], tf.int32), chunk=2).shape == (0,)


def test_a_small_encoders_text_is_the_same_to_the_bit_alone_and_in_a_batch(tmp_path, minilm):
    """TensorFlow multiplies a batch of one small product on another kernel than a batch of several (on AVX2 the
    sums differ in the last bit), so a small encoder runs a chunk of one text as two copies; MiniLM needs not."""
    encoder = SentenceEncoder(_tiny_checkpoint(str(tmp_path / "bert")), max_tokens=16)
    assert encoder.pairs_singletons and not minilm.pairs_singletons
    texts = ["a text editor, a text editor. editors", "a", "", "text editors", "a text", "editor editor editor"]
    batch = encoder.embed_all(texts)
    for i, text in enumerate(texts):
        np.testing.assert_array_equal(encoder.embed_all([text]), batch[i:i + 1])


def test_a_texts_embedding_is_the_same_to_the_bit_in_any_batch(minilm):
    """The roads batch differently (`cdgt train` 64 texts by length, the Transform Beam's batches, serving the
    caller's): padded to a multiple of 8 word pieces, a text's numbers do not depend on its neighbours."""
    rng = np.random.default_rng(0)
    words = "the text editor for python3 gtk3 x11 c++ real-time audio network daemon of and a".split()
    texts = [" ".join(rng.choice(words, rng.integers(0, 40))) for _ in range(40)] + [""]
    traced = tf.function(lambda t: minilm.embed(t, chunk=3), input_signature=[tf.TensorSpec([None], tf.string)])
    reference = minilm.embed_all(texts, batch_size=64)
    for batch in (1, 5):
        np.testing.assert_array_equal(minilm.embed_all(texts[:12], batch_size=batch), reference[:12])
    np.testing.assert_array_equal(traced(tf.constant(texts[::-1])).numpy()[::-1], reference)
    short = minilm.embed_all(texts, batch_size=7, max_tokens=12)
    np.testing.assert_array_equal(minilm.embed_all(texts[3:9], max_tokens=12), short[3:9])


def test_the_lead_block_is_the_texts_first_pieces_embedded_apart_after_the_whole_cut(tmp_path, monkeypatch):
    monkeypatch.setenv("CDGT_CACHE_DIR", str(tmp_path / "cache"))
    directory = _tiny_checkpoint(str(tmp_path / "bert"))
    train = ["a text editor, a text editor. editors", "a text viewer", "editors of text", "a viewer"]
    whole = TextOptions(ngrams=1, min_df=2, embedding=directory, embedding_tokens=12, embedding_scale=2.0)
    lead = replace(whole, embedding_lead_tokens=4)
    fit, without = Featurizer.fit("text", train, lead), Featurizer.fit("text", train, whole)
    assert fit.width == 8 + without.width
    fast = fit.transform(train).toarray()
    np.testing.assert_allclose(fast[:, :8], without.transform(train).toarray()[:, :8], atol=1e-7)
    np.testing.assert_allclose(fast[:, 16:], without.transform(train).toarray()[:, 8:], atol=1e-7)
    short = SentenceEncoder(directory, max_tokens=4).embed(tf.constant(train)).numpy()  # an encoder cut at 4
    np.testing.assert_allclose(fast[:, 8:16], 2.0 * short, atol=1e-6)
    assert not np.allclose(fast[0, :8], fast[0, 8:16], atol=1e-3)  # the first text runs past 4 pieces
    graph = tf.sparse.to_dense(fit.tensor(tf.constant(train))).numpy()
    np.testing.assert_allclose(graph, fast, atol=1e-6)
