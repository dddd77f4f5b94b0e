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

Some labels are themselves items of the catalogue: a dependency target is a package with a description of its own.
With `config.label_documents`, such a label is known by that training record too (`label_table`: the mean of its
name's row and its record's features, so the layer scores the mean of the two cosines; a label without a record
keeps its name's row); records of the validation and test splits are never used.

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


def label_table(config: Any, names: sp.csr_matrix | None, features: Any, ids: Sequence[str] | None,
                label_names: Sequence[str]) -> sp.csr_matrix | None:
    """The rows the label-text layer holds: the labels' names (`label_features`), joined with each label's own
    training record (`with_documents`) when `config.label_documents`; `features` and `ids`: the training split's,
    as the model takes them (records without ids, `ids` None: the names alone). Both roads (`fit_model`, the TFX
    Trainer) make them here.

        >>> from cdgt_keras.config import CDGTConfig
        >>> names = sp.csr_matrix([[1.0, 0.0], [0.0, 1.0]])
        >>> cfg = CDGTConfig(label_text=True, label_documents=True)
        >>> label_table(cfg, names, sp.csr_matrix([[0.0, 2.0]]), ["gtk"], ["gtk", "qt"]).toarray().tolist()
        [[0.5, 0.5], [0.0, 1.0]]
    """
    if names is None or ids is None or not (config.label_text and config.label_documents):
        return names  # records without ids: no label can name one
    return with_documents(names, label_documents(features, ids, label_names))


def label_documents(features: Any, ids: Sequence[str] | None, label_names: Sequence[str]) -> sp.csr_matrix:
    """[L, F] rows of unit length: row l is the features of the training record whose id is label l's name (a
    dependency target that is itself a package of the catalogue), empty where no record has that id (the first
    one where several have). `features`: [n, F], the training split's, in the order of `ids`.

        >>> docs = label_documents(sp.csr_matrix([[3.0, 4.0], [0.0, 2.0]]), ["gtk", "qt"], ["qt", "motif"])
        >>> docs.toarray().astype(float).tolist()
        [[0.0, 1.0], [0.0, 0.0]]
    """
    features = sp.csr_matrix(features)
    if ids is None or len(ids) != features.shape[0]:
        got = "no ids" if ids is None else f"{len(ids)} ids"
        raise ValueError(f"label documents need one id per training record: {got} for {features.shape[0]} records")
    first: dict[str, int] = {}
    for row, record_id in enumerate(ids):
        first.setdefault(str(record_id), row)
    picks = [(label, first[name]) for label, name in enumerate(label_names) if name in first]
    take = sp.csr_matrix((np.ones(len(picks)), ([p[0] for p in picks], [p[1] for p in picks])),
                         shape=(len(label_names), features.shape[0]))
    return unit_rows(take @ features)


def with_documents(names: sp.csr_matrix, documents: sp.csr_matrix) -> sp.csr_matrix:
    """Each label's rows, [L, F] of unit (or empty) rows each, averaged over what is known of it: (name + document)
    / 2 where the label has a document, its name's row where it has none (so data whose labels name no record are
    left as they were). A layer that holds these rows scores an input of unit length by the mean of its cosines with
    the label's name and its document.

        >>> rows = with_documents(sp.csr_matrix([[1.0, 0.0], [0.0, 1.0]]), sp.csr_matrix([[0.0, 1.0], [0.0, 0.0]]))
        >>> rows.toarray().astype(float).tolist()
        [[0.5, 0.5], [0.0, 1.0]]
    """
    if names.shape != documents.shape:
        raise ValueError(f"label names' rows {list(names.shape)} and documents' rows {list(documents.shape)} differ")
    documents = sp.csr_matrix(documents, dtype=np.float64)
    documents.eliminate_zeros()
    share = np.where(np.diff(documents.indptr) > 0, 0.5, 1.0)
    out = sp.csr_matrix(sp.diags(share) @ sp.csr_matrix(names, dtype=np.float64) + 0.5 * documents,
                        dtype=np.float32)
    out.eliminate_zeros()
    out.sort_indices()
    return out


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
