"""Label texts: each label's own name, featurized like a document, as a memory the model can score an input by.

A catalogue's label names say what the labels are about: `uitoolkit::gtk`, `works-with::image:raster`,
`python3-numpy`. A rare label has few training documents, so the players and the centroids know little of it, but
its name is known from the start. `label_words` turns a name into a short text (its last `::` part, the leaf of a
hierarchical name: a facet such as `works-with` is shared by many labels and says little of each; punctuation
`:`, `_`, `/` as spaces, and hyphenated words once whole and once split), and the featurizer that makes the inputs'
features makes the labels' (`label_features`: text features, or a bag of words whose feature names are known, as
MULAN's ARFF attributes; dense features have no words to match). The model
scores label l by max(0, cos(x, t_l)) in a `cdgt_keras.centroids.LabelCentroids` layer that holds these rows, and
blends it in last, with its weight tuned on validation like the other memories (`cdgt_keras.settling`).

Example:
    >>> label_words("works-with::image:raster")
    'image raster image raster'
    >>> label_words("python3-numpy")   # the tokenizer keeps `python3-numpy` whole
    'python3-numpy python3 numpy'
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from cdgt_keras.centroids import unit_rows

_SPACES = re.compile(r"[:_/]+")


def label_words(name: str) -> str:
    """The text a label is known by: the leaf of its name (after the last `::`), `:`, `_` and `/` as spaces, then
    the same again with hyphens as spaces (the tokenizer keeps `real-time` whole; its parts are words too)."""
    words = _SPACES.sub(" ", name.rsplit("::", 1)[-1]).strip()
    return f"{words} {words.replace('-', ' ')}"


def label_texts(label_names: Sequence[str]) -> list[str]:
    """Each label's words (`label_words`), after the prefix every name shares up to a `_` or `::` (MULAN's
    `TAG_`: the same for every label, it tells none apart).

        >>> label_texts(["TAG_svm", "TAG_data-mining"])
        ['svm svm', 'data-mining data mining']
    """
    names = list(label_names)
    common = os.path.commonprefix(names) if len(names) > 1 else ""  # noqa: RUF071 (characters are what is meant)
    cut = max(common.rfind("_") + 1, common.rfind("::") + 2 if "::" in common else 0)
    return [label_words(n[cut:]) for n in names]


def label_features(featurizer: Any, label_names: Sequence[str]) -> sp.csr_matrix | None:
    """[L, F] float32 rows of unit length (or empty, for a name with no known word): the labels' words as the
    inputs' features (`featurizer`: a fitted `cdgt_keras.featurizer.Featurizer`): TF-IDF for text, the named
    features for a sparse bag of words whose feature names are known (`named_features`); None otherwise.

        >>> from cdgt_keras.featurizer import Featurizer
        >>> from cdgt_keras.text import TextOptions
        >>> fit = Featurizer.fit("text", ["a gtk editor", "a qt editor", "gtk qt"], TextOptions(ngrams=1, min_df=1))
        >>> fit.text.vocabulary, label_features(fit, ["uitoolkit::gtk", "use::editing"]).toarray().tolist()
        (['qt', 'gtk', 'editor', 'a'], [[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    """
    kind = getattr(featurizer, "kind", None)
    if kind == "text":
        return unit_rows(featurizer.transform(label_texts(label_names)))
    if kind == "sparse" and featurizer.names is not None:
        return named_features(featurizer.names, label_names)
    return None


def named_features(feature_names: Sequence[str], label_names: Sequence[str]) -> sp.csr_matrix:
    """[L, F] rows of unit length: 1 at each feature whose name (case aside) is one of the label's words
    (`label_texts`), for a bag of words given as feature ids (MULAN's ARFF attributes are its words).

        >>> rows = named_features(["data", "mining", "svm"], ["TAG_data-mining", "TAG_svm"])
        >>> rows.toarray().astype(float).round(3).tolist()
        [[0.707, 0.707, 0.0], [0.0, 0.0, 1.0]]
    """
    ids: dict[str, int] = {}
    for i, name in enumerate(feature_names):
        ids.setdefault(name.lower(), i)
    rows, cols = [], []
    for label, text in enumerate(label_texts(label_names)):
        for word in sorted({ids[w] for w in text.lower().split() if w in ids}):
            rows.append(label)
            cols.append(word)
    ones = np.ones(len(rows), np.float64)
    return unit_rows(sp.csr_matrix((ones, (rows, cols)), shape=(len(label_names), len(feature_names))))
