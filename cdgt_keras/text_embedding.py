"""A sentence embedding as the first columns of the text features (CDGTConfig.text_embedding).

With `text_embedding` set, a text's features are [embedding x text_embedding_scale | TF-IDF]: the sentence
encoder's L2-normalised vector (cdgt_keras.sentence, all-MiniLM-L6-v2 by default: 384 columns) first, then the
TF-IDF vocabulary, in every path (`cdgt train`, the bench, the TFX Transform, the exported model). The TF-IDF
carries the rare keyword -> label links; the embedding carries meaning shared by texts with no word in common.
With `text_embedding_lead_tokens` > 0 the embedding has a second block: the text's first that many word pieces
embedded on their own (a catalogue entry's name and first sentence), after the block of the whole cut.

Encoding is the costly part, and how costly depends on the cores: a debtags text (86 word pieces on average) at
both of `recommended_text`'s cuts took 37 ms on round 58's 2 cores and 179 ms on a 2-core AVX2 machine without
AVX-512 (bench/learner_notes.md, round 60), 21-45 ms a served text. So `embed_texts` keeps each list of texts'
embeddings on disk under `$CDGT_CACHE_DIR` (default `~/.cache/cdgt`), keyed by the checkpoint's weights file, the
token limit and the texts themselves: the bench's seeds and methods encode a split once.

Example:
    >>> import tensorflow as tf
    >>> from cdgt_keras.sentence import _tiny_checkpoint
    >>> from cdgt_keras.text import TextOptions
    >>> options = TextOptions(embedding=_tiny_checkpoint(), embedding_tokens=8, embedding_scale=2.0)
    >>> columns = embedding_columns(options, tf.constant(["a text editor", "editors"]))
    >>> columns.dense_shape.numpy().tolist(), round(float(tf.norm(tf.sparse.to_dense(columns)[0])), 4)
    ([2, 8], 2.0)
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from cdgt_keras.sentence import SentenceEncoder, model_directory

# 2: texts padded to a multiple of PAD_MULTIPLE (cdgt_keras.sentence), so the bits differ from version 1's;
# 3: the weights are variables, not graph constants, which moves the last bits (up to 2e-7, measured round 62)
_CACHE_VERSION = 3


@functools.lru_cache(maxsize=4)
def encoder(name: str, max_tokens: int) -> SentenceEncoder:
    """The sentence encoder `name` (a known model or a checkpoint directory), loaded once per process."""
    return SentenceEncoder(model_directory(name), max_tokens)


def cuts(options: Any) -> tuple[int, ...]:
    """The word-piece cuts embedded, one block of columns each: the whole cut, then the lead's (when on)."""
    lead = options.embedding_lead_tokens
    return (options.embedding_tokens, lead) if lead else (options.embedding_tokens,)


def embedding_width(options: Any) -> int:
    """Columns the embedding adds: the checkpoint's hidden size (config.json only) per cut, 0 without one."""
    if not options.embedding:
        return 0
    with open(os.path.join(model_directory(options.embedding), "config.json"), encoding="utf-8") as handle:
        return int(json.load(handle)["hidden_size"]) * len(cuts(options))


def embedding_columns(options: Any, texts: Any, own_tables: bool = False) -> Any:
    """A [B] string tensor -> tf.SparseTensor [B, width] of scale x embedding (graph-safe: serving and the TFX
    Transform run this; the Transform with `own_tables`, see cdgt_keras.wordpiece.WordPiece.__call__)."""
    import tensorflow as tf

    model = encoder(options.embedding, options.embedding_tokens)
    blocks = [model.embed(texts, own_tables, max_tokens=cut) for cut in cuts(options)]
    vectors = (blocks[0] if len(blocks) == 1 else tf.concat(blocks, axis=1)) * options.embedding_scale
    return _dense_to_sparse(vectors)


def _dense_to_sparse(vectors: Any) -> Any:
    """Every entry of a [B, D] float32 tensor as a tf.SparseTensor (zeros kept, so the pattern is fixed)."""
    import tensorflow as tf

    shape = tf.shape(vectors, out_type=tf.int64)
    rows = tf.repeat(tf.range(shape[0]), shape[1])
    cols = tf.tile(tf.range(shape[1]), [shape[0]])
    return tf.SparseTensor(tf.stack([rows, cols], axis=1), tf.reshape(vectors, [-1]), shape)


def prepend(columns: Any, tfidf: Any) -> Any:
    """[B, D] embedding columns and [B, V] TF-IDF -> tf.SparseTensor [B, D + V], indices in row-major order."""
    import tensorflow as tf

    return tf.sparse.reorder(tf.sparse.concat(1, [columns, tfidf]))


def seconds_left(seconds: float, done: int, total: int) -> float:
    """Time left of a job whose cost grows with its units (characters), `done` of `total` of them in `seconds`.

    Example:
        >>> seconds_left(30.0, 1_000, 4_000)   # a quarter done in 30 s
        90.0
    """
    return seconds * (total - done) / max(done, 1)


def _cache_path(options: Any, texts: Sequence[str], cut: int) -> str:
    directory = model_directory(options.embedding)
    weights = os.path.join(directory, "model.safetensors")
    digest = hashlib.sha256()
    digest.update(f"{_CACHE_VERSION}\0{os.path.realpath(weights)}\0{os.path.getsize(weights)}\0{cut}\0".encode())
    for text in texts:
        digest.update(text.encode("utf-8", "surrogatepass") + b"\0")
    root = os.environ.get("CDGT_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "cdgt")
    return os.path.join(root, "embeddings", digest.hexdigest() + ".npy")


def embedding_rows(options: Any, texts: Sequence[str]) -> np.ndarray:
    """The rows of `embedding_columns` for a list of texts, float32 [n, embedding_width] (scaled), every cut's
    block from the disk cache or encoded now."""
    texts = [str(t) for t in texts]
    blocks = [embed_texts(options, texts, cut) for cut in cuts(options)]
    return np.hstack(blocks) * np.float32(options.embedding_scale)


def embed_texts(options: Any, texts: Sequence[str], cut: int = 0) -> np.ndarray:
    """Unscaled embeddings of `texts` read to `cut` word pieces (0: `options.embedding_tokens`), float32
    [n, width], from the disk cache or encoded now (with progress on stderr for long lists)."""
    texts = [str(t) for t in texts]
    cut = cut or options.embedding_tokens
    path = _cache_path(options, texts, cut)
    if os.path.exists(path):
        cached = np.load(path)
        if cached.shape[0] == len(texts):
            return cached
    model = encoder(options.embedding, options.embedding_tokens)
    # embed_all encodes shortest first, so the texts done so far are the cheap ones: the time left is read off the
    # characters left (a word piece is about 4.5 characters of English; those past the cut cost nothing, and each
    # text's [CLS], [SEP] and padding about two pieces), timed from the end of the first batch (which also traces)
    cost = np.cumsum(np.minimum(np.sort([len(t) for t in texts], kind="stable"), 4.5 * cut) + 9)
    every, shown, start, first = max(len(texts) // 10, 1), [0], time.perf_counter(), [0.0, 0]

    def progress(done: int, total: int) -> None:
        seconds = time.perf_counter() - start
        if not first[1]:
            first[:] = [seconds, done]
        if total >= 2000 and (done - shown[0] >= every or done == total):
            shown[0] = done
            left = "" if done == total or done == first[1] else ", about {:,.0f} s left".format(seconds_left(
                seconds - first[0], int(cost[done - 1] - cost[first[1] - 1]), int(cost[-1] - cost[first[1] - 1])))
            print(f"text_embedding: encoded {done:,}/{total:,} texts to {cut} word pieces in {seconds:,.0f} s"
                  f"{left}", file=sys.stderr, flush=True)

    vectors = model.embed_all(texts, progress=progress, max_tokens=cut)
    if not np.all(np.isfinite(vectors)):
        raise ValueError(f"text_embedding {options.embedding!r}: non-finite embeddings")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = f"{path}.{os.getpid()}.tmp.npy"
    np.save(temporary, vectors)
    os.replace(temporary, path)
    return vectors
