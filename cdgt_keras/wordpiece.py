"""BERT's uncased WordPiece tokenisation in plain TensorFlow ops (no tensorflow-text, so TF Serving runs it).

What `transformers.BertTokenizer(do_lower_case=True)` does, as graph ops on a batch of strings:

1. clean: NUL, U+FFFD and control/format characters dropped, every white space a space;
2. CJK ideographs spaced apart, the text lower-cased, accents stripped (NFD, then the combining marks dropped:
   the decomposition is a lookup table built from `unicodedata`), punctuation spaced apart;
3. words split at spaces, each word cut greedily into the longest vocabulary pieces (`##` marks a piece that
   continues a word); a word that cannot be cut, or longer than 100 characters, is `[UNK]`;
4. per text the first `max_tokens - 2` pieces between `[CLS]` and `[SEP]`, padded with `[PAD]` (id 0).

One deviation: unassigned and private-use code points are kept (BERT drops them); they become `[UNK]`.

Example:
    >>> import tensorflow as tf
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "cafe", "!", "x"]
    >>> pieces = WordPiece(vocab)
    >>> ids, mask = pieces(tf.constant(["Unaffable CAFÉ!", "xyz"]), max_tokens=8)
    >>> ids.numpy().tolist()
    [[2, 4, 5, 6, 7, 8, 3], [2, 1, 3, 0, 0, 0, 0]]
    >>> mask.numpy().sum(axis=1).tolist()               # float32 1/0: a mean pool's weights
    [7.0, 3.0]
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Sequence
from typing import Any

_MAX_WORD_CHARS = 100  # BERT's max_input_chars_per_word
_DROP = r"[\x{0}\x{FFFD}\p{Cc}\p{Cf}]"
_CJK = (r"([\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B73F}\x{2B740}-\x{2B81F}"
        r"\x{2B820}-\x{2CEAF}\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F}])")
# BERT's punctuation: the ASCII symbols that are not letters, digits or space, and every Unicode P* character.
_PUNCTUATION = r"([!-/:-@\[-`{-~]|\pP)"


@functools.lru_cache(maxsize=1)
def _decompositions() -> tuple[list[str], list[str]]:
    """Characters whose NFD form holds combining marks (Mn) -> that form without them (`é` -> `e`)."""
    keys, values = [], []
    for code in range(0x110000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        char = chr(code)
        nfd = unicodedata.normalize("NFD", char)
        if nfd == char:
            continue
        stripped = "".join(c for c in nfd if unicodedata.category(c) != "Mn")
        if stripped != char:
            keys.append(char)
            values.append(stripped)
    return keys, values


class WordPiece:
    """A vocabulary (`vocab.txt`'s lines, id = line number) and the graph ops that cut texts into its ids."""

    def __init__(self, vocabulary: Sequence[str]) -> None:
        self.vocabulary = list(vocabulary)
        index = {token: i for i, token in enumerate(self.vocabulary)}
        for special in ("[PAD]", "[UNK]", "[CLS]", "[SEP]"):
            if special not in index:
                raise ValueError(f"wordpiece vocabulary: it has no {special} token")
        self.pad, self.unk, self.cls, self.sep = (index[s] for s in ("[PAD]", "[UNK]", "[CLS]", "[SEP]"))
        # The longest piece in characters: no candidate longer than it can match.
        self.longest = max(len(t[2:] if t.startswith("##") else t) for t in self.vocabulary)
        self._tables: tuple[Any, Any] | None = None

    @classmethod
    def from_file(cls, path: str) -> WordPiece:
        with open(path, encoding="utf-8") as handle:
            return cls([line.rstrip("\n") for line in handle])

    def tables(self) -> tuple[Any, Any]:
        """The piece -> id table (-1 when absent) and the accent-stripping table: what a SavedModel tracks."""
        if self._tables is None:
            import tensorflow as tf

            with tf.init_scope():  # made eagerly even when first asked inside a tf.function: reused after it
                self._tables = self._make_tables()
        return self._tables

    def _make_tables(self) -> tuple[Any, Any]:
        import tensorflow as tf

        pieces = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
            tf.constant(self.vocabulary), tf.range(len(self.vocabulary), dtype=tf.int64)), default_value=-1)
        keys, values = _decompositions()
        accents = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
            tf.constant(keys), tf.constant(values)), default_value="\x00")
        return pieces, accents

    def words(self, texts: Any, tables: tuple[Any, Any] | None = None) -> Any:
        """Steps 1-2: a [B] string tensor -> tf.RaggedTensor [B, None] of normalised words."""
        import tensorflow as tf

        text = tf.strings.regex_replace(tf.reshape(texts, [-1]), r"\s", " ")
        text = tf.strings.regex_replace(text, _DROP, "")
        text = tf.strings.regex_replace(text, _CJK, r" \1 ")
        text = tf.strings.lower(text, encoding="utf-8")
        chars = tf.strings.unicode_split(text, "UTF-8")
        stripped = (tables or self.tables())[1].lookup(chars.flat_values)
        flat = tf.where(tf.equal(stripped, "\x00"), chars.flat_values, stripped)
        text = tf.strings.reduce_join(chars.with_flat_values(flat), axis=1)
        text = tf.strings.regex_replace(text, r"\p{Mn}", "")
        text = tf.strings.regex_replace(text, _PUNCTUATION, r" \1 ")
        return tf.strings.split(text)

    def pieces(self, words: Any, tables: tuple[Any, Any] | None = None) -> Any:
        """Step 3: a [N] string tensor of words -> tf.RaggedTensor [N, None] of piece ids, greedy longest first."""
        import tensorflow as tf

        table = (tables or self.tables())[0]
        length = tf.strings.length(words, unit="UTF8_CHAR")
        n = tf.size(words)
        start = tf.zeros([n], tf.int32)
        failed = length > _MAX_WORD_CHARS
        # A first step of -1s (dropped below like every -1): a batch of empty texts then still stacks a list
        # that is not empty, which a traced function cannot do with an unknown element shape.
        steps = tf.TensorArray(tf.int64, size=0, dynamic_size=True).write(0, tf.fill([n], tf.constant(-1, tf.int64)))

        def cut(i: Any, start: Any, failed: Any, steps: Any) -> tuple[Any, Any, Any, Any]:
            active = (start < length) & ~failed
            best_id = tf.fill([n], tf.constant(-1, tf.int64))
            best_len = tf.zeros([n], tf.int32)
            prefix = tf.where(start > 0, "##", "")
            for size in range(self.longest, 0, -1):  # longest first: the first match a word finds is kept
                fits = active & (best_len == 0) & (start + size <= length)
                candidate = tf.strings.join([prefix, tf.strings.substr(words, start, tf.fill([n], size),
                                                                       unit="UTF8_CHAR")])
                found = table.lookup(candidate)
                take = fits & (found >= 0)
                best_id = tf.where(take, found, best_id)
                best_len = tf.where(take, size, best_len)
            failed = failed | (active & (best_len == 0))
            steps = steps.write(i, tf.where(active & (best_len > 0), best_id, -1))
            return i + 1, start + best_len, failed, steps

        def more(i: Any, start: Any, failed: Any, steps: Any) -> Any:
            return tf.reduce_any((start < length) & ~failed)

        _, _, failed, steps = tf.while_loop(more, cut, [tf.constant(1), start, failed, steps])
        grid = tf.transpose(tf.reshape(steps.stack(), [-1, n]))  # [N, steps], -1 past a word's end
        ids = tf.ragged.boolean_mask(grid, grid >= 0)
        unk = tf.RaggedTensor.from_row_lengths(tf.fill([n], tf.constant(self.unk, tf.int64)), tf.ones([n], tf.int64))
        return _select_rows(failed, unk, ids)

    def __call__(self, texts: Any, max_tokens: int = 128, own_tables: bool = False) -> tuple[Any, Any]:
        """Step 4: [B] strings -> (ids int64 [B, T], mask float32 [B, T]), T <= max_tokens the batch's longest.

        `own_tables`: make the lookup tables in the graph being built (a tf.Transform preprocessing_fn tracks
        only the tables made inside it) instead of the shared ones made once, outside any graph."""
        import tensorflow as tf

        tables = self._make_tables() if own_tables else self.tables()
        words = self.words(texts, tables)
        words = words[:, :max_tokens - 2]  # every word gives at least one piece: no more can be kept
        pieces = self.pieces(words.flat_values, tables)
        counts = tf.math.unsorted_segment_sum(pieces.row_lengths(), words.value_rowids(), words.nrows())
        per_text = tf.RaggedTensor.from_row_lengths(pieces.flat_values, counts)
        body = per_text[:, :max_tokens - 2]
        rows = body.nrows()
        cls = tf.fill([rows, 1], tf.constant(self.cls, tf.int64))
        sep = tf.fill([rows, 1], tf.constant(self.sep, tf.int64))
        full = tf.concat([cls, body, sep], axis=1)
        ids = full.to_tensor(default_value=self.pad)
        mask = tf.sequence_mask(full.row_lengths(), tf.shape(ids, out_type=tf.int64)[1], tf.float32)
        return ids, mask


def _select_rows(failed: Any, unk: Any, ids: Any) -> Any:
    """Row i of `unk` where failed[i], else row i of `ids` (tf.RaggedTensor [N, None] both)."""
    import tensorflow as tf

    def only(rows: Any, keep: Any) -> Any:
        return tf.ragged.boolean_mask(rows, tf.ones_like(rows, tf.bool) & keep[:, None])

    return tf.concat([only(ids, ~failed), only(unk, failed)], axis=1)
