"""Label texts: each label's own name, featurized like a document, as a memory the model can score an input by.

A catalogue's label names say what the labels are about: `uitoolkit::gtk`, `works-with::image:raster`,
`python3-numpy`. A rare label has few training documents, so the players and the centroids know little of it, but
its name is known from the start. `label_words` turns a name into a short text (its last `::` part, the leaf of a
hierarchical name: a facet such as `works-with` is shared by many labels and says little of each; punctuation
`:`, `_`, `/` as spaces, and hyphenated words once whole and once split), and the featurizer that makes the inputs'
features makes the labels' (`label_features`: text features only; other kinds have no words to match). The model
scores label l by max(0, cos(x, t_l)) in a `cdgt_keras.centroids.LabelCentroids` layer that holds these rows, and
blends it in last, with its weight tuned on validation like the other memories (`cdgt_keras.settling`).

Example:
    >>> label_words("works-with::image:raster")
    'image raster image raster'
    >>> label_words("python3-numpy")   # the tokenizer keeps `python3-numpy` whole
    'python3-numpy python3 numpy'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

_SPACES = re.compile(r"[:_/]+")


def label_words(name: str) -> str:
    """The text a label is known by: the leaf of its name (after the last `::`), `:`, `_` and `/` as spaces, then
    the same again with hyphens as spaces (the tokenizer keeps `real-time` whole; its parts are words too)."""
    words = _SPACES.sub(" ", name.rsplit("::", 1)[-1]).strip()
    return f"{words} {words.replace('-', ' ')}"


def label_features(featurizer: Any, label_names: Sequence[str]) -> sp.csr_matrix | None:
    """[L, F] float32 rows of unit length (or empty, for a name with no known word): the labels' words as the
    inputs' features (`featurizer`: a fitted `cdgt_keras.featurizer.Featurizer`); None unless it makes text
    features.

        >>> from cdgt_keras.featurizer import Featurizer
        >>> from cdgt_keras.text import TextOptions
        >>> fit = Featurizer.fit("text", ["a gtk editor", "a qt editor", "gtk qt"], TextOptions(ngrams=1, min_df=1))
        >>> fit.text.vocabulary, label_features(fit, ["uitoolkit::gtk", "use::editing"]).toarray().tolist()
        (['qt', 'gtk', 'editor', 'a'], [[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    """
    if featurizer is None or getattr(featurizer, "kind", None) != "text":
        return None
    return unit_rows(featurizer.transform([label_words(n) for n in label_names]))


def unit_rows(matrix: Any) -> sp.csr_matrix:
    """`matrix` as float32 csr with each non-empty row scaled to unit length and explicit zeros dropped (what
    the layer's cosine assumes, whichever road made the rows)."""
    m = sp.csr_matrix(matrix, dtype=np.float64)
    m.eliminate_zeros()
    lengths = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
    out = sp.csr_matrix(sp.diags(1.0 / np.maximum(lengths, 1e-12)) @ m, dtype=np.float32)
    out.sort_indices()
    return out
