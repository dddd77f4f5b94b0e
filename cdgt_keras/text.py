"""Text -> TF-IDF: the one definition every path uses (`cdgt train`, the bench, the TFX Transform, serving).

The pieces are TensorFlow ops, so the same functions run eagerly on in-memory splits, inside the Transform's
graph (with the vocabulary and document frequencies from tf.Transform analyzers) and inside the exported
SavedModel (raw strings in):

- `tokens`: lower-cased tokens that keep identifiers (`c++`, `x11`, `gtk3`, `python3`, `real-time`, `c#`), then
  word n-grams up to `ngrams` joined by a space, then (with `identifier_parts`) the parts of compound identifiers
  (`libfoo-dev` -> `libfoo`, `dev`; `gtk3` -> `gtk`, `3`), so a name's affixes are features of their own, then
  (with `prefixes` n > 0) each token's first n characters marked `*` (`library`, `libfoo-dev` -> `lib*`);
- `unique_per_row`: each document's distinct terms (what document frequency counts);
- `smoothed_idf`: idf = ln((1 + n) / (1 + df)) + 1 (scikit-learn's and tf.Transform's smoothed IDF);
- `tfidf`: term ids -> L2-normalised rows of tf x idf, tf = 1 + ln(count) (sublinear) or the count.

`TextFeaturizer` fits the vocabulary on a training split: terms in at least `min_df` documents, the
`max_features` most frequent by document frequency, ties by term, largest first (tf.Transform's vocabulary
order, so both fits agree).

Example:
    >>> import numpy as np
    >>> fit = TextFeaturizer.fit(["A C++ editor.", "a GTK3 editor", "real-time c++"],
    ...                          TextOptions(ngrams=1, min_df=2))
    >>> fit.vocabulary
    ['editor', 'c++', 'a']
    >>> x = fit.transform(["c++ editor, c++"])   # scipy csr [1, 3], float32, L2 rows
    >>> [round(float(v), 4) for v in x.toarray()[0]]   # equal idf; tf: editor 1, c++ 1 + ln 2
    [0.5085, 0.861, 0.0]
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

# Characters that are part of a token; everything else separates tokens. Letters and digits of any script.
_SEPARATORS = r"[^\pL\pN_+#.\-]+"
_EDGE_PUNCTUATION = r"^[.\-]+|[.\-]+$"  # "editor." -> "editor", "--help" -> "help"; "c++" and "c#" stay
_HAS_WORD = r".*[\pL\pN].*"
_PART_SEPARATORS = r"[.\-_]+"  # inside a token: `libfoo-dev`, `e.g`, `snake_case`


# The CDGTConfig fields the text featurizer reads (TextOptions.from_config): what decides a text set's features.
TEXT_CONFIG_FIELDS = ("vocabulary_size", "text_ngrams", "text_min_df", "text_sublinear_tf", "text_identifier_parts",
                      "text_prefixes", "text_embedding", "text_embedding_tokens", "text_embedding_scale",
                      "text_embedding_lead_tokens")


@dataclass(frozen=True)
class TextOptions:
    """The text choices (CDGTConfig's text_* fields and vocabulary_size)."""

    ngrams: int = 2
    sublinear_tf: bool = True
    min_df: int = 2
    max_features: int = 100_000
    identifier_parts: bool = True
    prefixes: int = 0
    embedding: str = ""  # "" = none; a known sentence encoder's name or a BERT checkpoint's directory
    embedding_tokens: int = 128
    embedding_scale: float = 1.0
    embedding_lead_tokens: int = 0  # > 0: a second embedding block, of the first that many word pieces

    @classmethod
    def from_config(cls, config: Any) -> TextOptions:
        return cls(ngrams=config.text_ngrams, sublinear_tf=config.text_sublinear_tf, min_df=config.text_min_df,
                   max_features=config.vocabulary_size, identifier_parts=config.text_identifier_parts,
                   prefixes=config.text_prefixes, embedding=config.text_embedding,
                   embedding_tokens=config.text_embedding_tokens, embedding_scale=config.text_embedding_scale,
                   embedding_lead_tokens=config.text_embedding_lead_tokens)

    def terms(self, texts: Any) -> Any:
        """`tokens` of `texts` under these options: the one call every road makes, so an option reaches them all."""
        return tokens(texts, self.ngrams, self.identifier_parts, self.prefixes)


def tokens(texts: Any, ngrams: int = 2, identifier_parts: bool = False, prefixes: int = 0) -> Any:
    """Terms of a [B] or [B, 1] string tensor: a tf.RaggedTensor [B, None] of unigrams, then bigrams, ..., then
    (`identifier_parts`) the parts of each compound token, then (`prefixes` n > 0) the first n characters of each
    token longer than n.

    Example:
        >>> import tensorflow as tf
        >>> terms = tokens(tf.constant(["libfoo-dev for gtk3"]), ngrams=1, identifier_parts=True)
        >>> [t.decode() for t in terms.flat_values.numpy()]
        ['libfoo-dev', 'for', 'gtk3', 'libfoo', 'dev', 'gtk', '3']
        >>> [t.decode() for t in tokens(tf.constant(["libfoo-dev for gtk3"]), 1, prefixes=3).flat_values.numpy()]
        ['libfoo-dev', 'for', 'gtk3', 'lib*', 'gtk*']
    """
    import tensorflow as tf

    text = tf.strings.lower(tf.reshape(texts, [-1]), encoding="utf-8")
    words = tf.strings.split(tf.strings.regex_replace(text, _SEPARATORS, " "))
    words = words.with_flat_values(tf.strings.regex_replace(words.flat_values, _EDGE_PUNCTUATION, ""))
    words = tf.ragged.boolean_mask(words, words.with_flat_values(
        tf.strings.regex_full_match(words.flat_values, _HAS_WORD)))
    terms = words if ngrams <= 1 else tf.strings.ngrams(words, ngram_width=list(range(1, ngrams + 1)),
                                                        separator=" ")
    out = [terms]
    if identifier_parts:
        out.append(_identifier_parts(words))
    if prefixes > 0:
        out.append(_prefixes(words, prefixes))
    return out[0] if len(out) == 1 else tf.concat(out, axis=1)


def _prefixes(words: Any, length: int) -> Any:
    """Each token of `words` ([B, None]) longer than `length` characters gives its first `length`, marked `*`
    (`library` -> `lib*`; `*` separates tokens, so no token reads so): a tf.RaggedTensor [B, None]."""
    import tensorflow as tf

    flat = words.flat_values
    keep = tf.strings.length(flat, unit="UTF8_CHAR") > length
    heads = tf.strings.join([tf.strings.substr(tf.boolean_mask(flat, keep), 0, length, unit="UTF8_CHAR"),
                             tf.constant("*")])
    return tf.RaggedTensor.from_value_rowids(heads, tf.boolean_mask(words.value_rowids(), keep),
                                             nrows=words.nrows())


def _identifier_parts(words: Any) -> Any:
    """The parts of each compound token of `words` ([B, None]), split at `-`, `.` and `_` and where letters meet
    digits; tokens of one part add nothing. A tf.RaggedTensor [B, None]."""
    import tensorflow as tf

    spaced = tf.strings.regex_replace(words.flat_values, _PART_SEPARATORS, " ")
    spaced = tf.strings.regex_replace(spaced, r"(\pL)(\pN)", r"\1 \2")
    spaced = tf.strings.regex_replace(spaced, r"(\pN)(\pL)", r"\1 \2")
    parts = tf.strings.split(spaced)  # [tokens, parts]
    compound = parts.row_lengths() > 1
    parts = tf.ragged.boolean_mask(parts, compound)
    owner = tf.boolean_mask(words.value_rowids(), compound)  # the document of each compound token
    flat = parts.flat_values
    keep = tf.strings.regex_full_match(flat, _HAS_WORD)
    return tf.RaggedTensor.from_value_rowids(tf.boolean_mask(flat, keep),
                                             tf.boolean_mask(tf.gather(owner, parts.value_rowids()), keep),
                                             nrows=words.nrows())


def unique_per_row(terms: Any) -> Any:
    """Each row's distinct terms, in order of first appearance: tf.RaggedTensor [B, None]."""
    import tensorflow as tf

    rows = terms.value_rowids()
    keys = tf.strings.join([tf.strings.as_string(rows), terms.flat_values], separator="\x1f")
    unique, position = tf.unique(keys)
    first = tf.sort(tf.math.unsorted_segment_min(tf.range(tf.size(keys)), position, tf.size(unique)))
    return tf.RaggedTensor.from_value_rowids(tf.gather(terms.flat_values, first), tf.gather(rows, first),
                                             nrows=terms.nrows())


def smoothed_idf(document_frequency: Any, num_documents: Any) -> Any:
    """ln((1 + n) / (1 + df)) + 1, computed in float64 and returned as float32 [V]."""
    import tensorflow as tf

    df = tf.cast(document_frequency, tf.float64)
    n = tf.cast(num_documents, tf.float64)
    return tf.cast(tf.math.log((1.0 + n) / (1.0 + df)) + 1.0, tf.float32)


def tfidf(ids: Any, idf: Any, sublinear_tf: bool) -> Any:
    """Term ids (tf.RaggedTensor [B, None], -1 = not in the vocabulary) -> tf.SparseTensor [B, V] float32 of
    L2-normalised tf x idf rows, indices in row-major order."""
    import tensorflow as tf

    nrows = ids.nrows(out_type=tf.int64)
    width = tf.shape(idf, out_type=tf.int64)[0]
    cols = tf.cast(ids.flat_values, tf.int64)
    known = cols >= 0
    rows, cols = tf.boolean_mask(ids.value_rowids(), known), tf.boolean_mask(cols, known)
    unique, position = tf.unique(rows * width + cols)
    counts = tf.math.unsorted_segment_sum(tf.ones_like(position, tf.float32), position, tf.size(unique))
    order = tf.argsort(unique)
    unique, counts = tf.gather(unique, order), tf.gather(counts, order)
    rows, cols = unique // width, unique % width
    # float32 log gives another last bit at an array's tail than inside it (AVX-512, round 62), so a row would
    # depend on its batch; in float64, rounded once to float32, it does not
    term = tf.cast(1.0 + tf.math.log(tf.cast(counts, tf.float64)), tf.float32) if sublinear_tf else counts
    weights = term * tf.gather(idf, cols)
    norms = tf.sqrt(tf.math.unsorted_segment_sum(tf.square(weights), rows, nrows))
    weights = weights / tf.maximum(tf.gather(norms, rows), 1e-12)
    return tf.SparseTensor(tf.stack([rows, cols], axis=1), weights, tf.stack([nrows, width]))


def select_vocabulary(document_frequency: dict[str, int], min_df: int, max_features: int) -> list[str]:
    """Terms with df >= min_df, the max_features largest (df, term bytes) first: tf.Transform's order."""
    kept = [(df, term.encode("utf-8"), term) for term, df in document_frequency.items() if df >= min_df]
    kept.sort(key=lambda item: (item[0], item[1]), reverse=True)
    return [term for _, _, term in kept[:max_features]]


def _strings(texts: Sequence[str]) -> np.ndarray:
    """An object array of str (numpy's fixed-width str dtype would pad every text to the longest one)."""
    return np.fromiter((str(t) for t in texts), dtype=object, count=len(texts))


@dataclass
class TextFeaturizer:
    """A fitted text featurizer: options, vocabulary, document frequencies and the number of documents."""

    options: TextOptions
    vocabulary: list[str]
    document_frequency: np.ndarray
    num_documents: int
    _table: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def fit(cls, texts: Sequence[str], options: TextOptions | None = None, batch_size: int = 2048) -> TextFeaturizer:
        """Learn the vocabulary and the document frequencies on `texts` (the training split)."""
        options = options or TextOptions()
        texts = _strings(texts)
        counts: Counter[str] = Counter()
        for start in range(0, len(texts), batch_size):
            terms = unique_per_row(options.terms(texts[start:start + batch_size]))
            counts.update(t.decode("utf-8") for t in terms.flat_values.numpy())
        vocabulary = select_vocabulary(counts, options.min_df, options.max_features)
        if not vocabulary:
            raise ValueError(f"text: no term occurs in {options.min_df} or more of the {len(texts)} training "
                             "documents; lower text_min_df")
        df = np.array([counts[t] for t in vocabulary], np.int64)
        return cls(options, vocabulary, df, len(texts))

    @property
    def width(self) -> int:
        """Columns: the embedding's (with `options.embedding`; cdgt_keras.text_embedding), then the vocabulary."""
        return self.embedding_width + len(self.vocabulary)

    @functools.cached_property
    def embedding_width(self) -> int:
        from cdgt_keras.text_embedding import embedding_width

        return embedding_width(self.options)

    @functools.cached_property
    def idf(self) -> np.ndarray:
        """smoothed_idf of the document frequencies, computed once (eagerly, also when first asked inside a
        tf.function)."""
        import tensorflow as tf

        with tf.init_scope():
            return smoothed_idf(self.document_frequency, self.num_documents).numpy()

    def lookup(self) -> Any:
        """A tf.lookup.StaticHashTable term -> id (-1 when absent); what the SavedModel tracks."""
        if self._table is None:
            import tensorflow as tf

            init = tf.lookup.KeyValueTensorInitializer(
                tf.constant(self.vocabulary, tf.string), tf.range(len(self.vocabulary), dtype=tf.int64))
            self._table = tf.lookup.StaticHashTable(init, default_value=-1)
        return self._table

    def tensor(self, texts: Any) -> Any:
        """A [B] string tensor -> tf.SparseTensor [B, width] (graph-safe; what serving runs)."""
        weights = self._tfidf_tensor(texts)
        if not self.options.embedding:
            return weights
        from cdgt_keras.text_embedding import embedding_columns, prepend

        return prepend(embedding_columns(self.options, texts), weights)

    def _tfidf_tensor(self, texts: Any) -> Any:
        """A [B] string tensor -> tf.SparseTensor [B, len(vocabulary)]: the TF-IDF half of `tensor`."""
        import tensorflow as tf

        terms = self.options.terms(texts)
        ids = terms.with_flat_values(self.lookup().lookup(terms.flat_values))
        return tfidf(ids, tf.constant(self.idf), self.options.sublinear_tf)

    def _tfidf_rows(self, texts: np.ndarray, batch_size: int) -> sp.csr_matrix:
        parts, width = [], len(self.vocabulary)
        for start in range(0, len(texts), batch_size):
            batch = texts[start:start + batch_size]
            out = self._tfidf_tensor(batch)
            idx = out.indices.numpy()
            parts.append(sp.csr_matrix((out.values.numpy(), (idx[:, 0], idx[:, 1])),
                                       shape=(len(batch), width), dtype=np.float32))
        return sp.vstack(parts, format="csr") if parts else sp.csr_matrix((0, width), dtype=np.float32)

    def transform(self, texts: Sequence[str], batch_size: int = 2048) -> sp.csr_matrix:
        """The rows of `tensor` for `texts` as float32 csr [n, width], batch by batch (the embedding, when on,
        encoded shortest text first and kept in the disk cache: cdgt_keras.text_embedding.embed_texts)."""
        texts = _strings(texts)
        rows = self._tfidf_rows(texts, batch_size)
        if not self.options.embedding:
            return rows
        from cdgt_keras.text_embedding import embedding_rows

        vectors = embedding_rows(self.options, list(texts))
        return sp.hstack([sp.csr_matrix(vectors), rows], format="csr", dtype=np.float32)

    def trackables(self) -> dict[str, Any]:
        """Objects a SavedModel must hold to run `tensor`: the vocabulary's lookup table; with the embedding, the
        tokeniser's tables and the encoder's weights."""
        out = {"text_vocabulary": self.lookup()}
        if self.options.embedding:
            from cdgt_keras.text_embedding import encoder

            model = encoder(self.options.embedding, self.options.embedding_tokens)
            pieces, accents = model.tokenizer.tables()
            out.update(embedding_pieces=pieces, embedding_accents=accents,
                       embedding_weights=list(model.variables().values()))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"options": asdict(self.options), "vocabulary": list(self.vocabulary),
                "document_frequency": self.document_frequency.tolist(), "num_documents": int(self.num_documents)}

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> TextFeaturizer:
        vocabulary, df = list(payload["vocabulary"]), np.asarray(payload["document_frequency"], np.int64)
        if len(vocabulary) != df.size:
            raise ValueError(f"text featurizer: {len(vocabulary)} vocabulary entries but {df.size} frequencies")
        # A featurizer saved before `identifier_parts` existed made no parts: it keeps making none.
        options = TextOptions(**{"identifier_parts": False, **payload["options"]})
        return cls(options, vocabulary, df, int(payload["num_documents"]))
