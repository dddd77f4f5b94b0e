"""Evaluate a trained model on a split: thresholds tuned on validation, the SPEC §7 report on test.

Large label spaces (n·L above `DENSE_LIMIT` on either split) are evaluated on score chunks
(`cdgt_keras.chunked_eval`): the model predicts a few hundred rows at a time and no [n, L] score matrix is held;
the figures are those of the dense path.

Example:
    >>> result = evaluate_model(model, splits["validation"], splits["test"], train_counts, num_train,
    ...                         config)                                                  # doctest: +SKIP
    >>> print(format_report(result.report))                                            # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from cdgt_keras.chunked_eval import ScoreChunks, chunk_rows, chunked_report, matrix_chunks
from cdgt_keras.config import CDGTConfig
from cdgt_keras.data import MultiLabelData
from cdgt_keras.labels import head_tail_split
from cdgt_keras.metrics import propensities, report
from cdgt_keras.thresholds import apply_thresholds, config_rule, tune_thresholds_chunks, tuned_thresholds

DENSE_LIMIT = 1 << 26  # 64M scores (256 MB in float32) per split: above, the chunked path
PREDICT_ELEMENTS = 1 << 24


@dataclass(frozen=True)
class Evaluation:
    """Tuned thresholds [L] and the report {"overall"|"head"|"tail": {metric: value}} on the test split."""

    thresholds: np.ndarray
    report: dict[str, dict[str, float]]
    head_labels: np.ndarray
    tail_labels: np.ndarray


def predict_probs(model, data: MultiLabelData, batch_size: int) -> np.ndarray:
    """Fused probabilities [n, L] for a split."""
    from cdgt_keras.inputs import make_dataset

    return np.asarray(model.predict(make_dataset(data.features, batch_size=batch_size), verbose=0))


def predict_chunks(model, data: MultiLabelData, batch_size: int, rows: int | None = None,
                   score: Callable[[Any, int], np.ndarray] | None = None) -> ScoreChunks:
    """Re-iterable chunks of `predict_probs`: `rows` per chunk (default about 16M scores, whole batches: fewer
    `predict` calls; at 18.6k labels 768 rows, 57 MB of float32). `score(features, batch_size)`: the chunk's
    scores by another function than the model's whole answer (the training's ranking: `inputs.batch_scorer`)."""
    def chunks():
        for start, stop in row_chunks(data, batch_size, rows):
            part = MultiLabelData(data.features[start:stop], data.labels[start:stop], [])
            yield predict_probs(model, part, batch_size) if score is None else score(part.features, batch_size)

    return chunks


def row_chunks(data: MultiLabelData, batch_size: int, rows: int | None = None) -> list[tuple[int, int]]:
    """(start, stop) of each chunk of `data`'s rows: `rows` a chunk, or about `PREDICT_ELEMENTS` scores in whole
    batches (`chunk_rows`). What `predict_chunks` and `answer_chunks` cut a split by.

        >>> row_chunks(MultiLabelData(np.zeros((5, 1)), sp.csr_matrix((5, 3)), []), batch_size=2, rows=2)
        [(0, 2), (2, 4), (4, 5)]
    """
    step = rows or chunk_rows(data.num_labels, multiple=batch_size, elements=PREDICT_ELEMENTS)
    return [(start, min(start + step, data.num_examples)) for start in range(0, data.num_examples, step)]


def decision_scorer(model: Any) -> Callable[[Any, int], np.ndarray] | None:
    """`score(features, batch_size)`: the scores `model` reads its decisions from (`call(..., deciding=True)`),
    when its tail decides apart (`decides_apart`; config.tail_decisions="own"); None when they are its ranking's."""
    if not _apart(model):
        return None
    from cdgt_keras.inputs import batch_scorer

    return batch_scorer(lambda x: model(x, training=False, deciding=True))


def predict_answers(model: Any, data: MultiLabelData, batch_size: int,
                    score: Callable[[Any, int], Any] | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """(the ranking's scores [n, L], the decisions' own [n, L] or None when they are the ranking's), from one
    pass of the model over the split (`CDGTModel.answers` when its tail decides apart, `predict_probs` else).
    `score`: `answer_scorer(model)`, made once for several splits (else made here)."""
    if not _apart(model):
        return predict_probs(model, data, batch_size), None
    return (score or answer_scorer(model))(data.features, batch_size)


def answer_scorer(model: Any) -> Callable[[Any, int], tuple[np.ndarray, np.ndarray]] | None:
    """`score(features, batch_size)` -> (ranking, decisions) by one pass of `model.answers`, traced once: a caller
    scoring validation and test (`predict_answers`, `answer_chunks`) builds it once and passes it to both. None
    when the model's decisions are its ranking's (`_apart`)."""
    if not _apart(model):
        return None
    from cdgt_keras.inputs import batch_scorer

    return batch_scorer(model.answers)


def answer_chunks(model: Any, data: MultiLabelData, batch_size: int, rows: int | None = None,
                  score: Callable[[Any, int], Any] | None = None) -> tuple[ScoreChunks, ScoreChunks | None]:
    """`predict_answers` in re-iterable chunks (`predict_chunks`): (the ranking's chunks, the decisions' or
    None). Both come from one pass of the model: a chunk of decisions read right after the ranking's chunk of the
    same rows (as `chunked_report` reads them) is the one that pass kept, not a second prediction; read alone
    (thresholds tuned on validation), each chunk is predicted once. `score`: as in `predict_answers`."""
    if not _apart(model):
        return predict_chunks(model, data, batch_size, rows), None
    score = score or answer_scorer(model)
    spans = row_chunks(data, batch_size, rows)
    kept: dict[int, np.ndarray] = {}  # the decisions of the ranking's last chunk, by its first row

    def ranking():
        for start, stop in spans:
            ranked, decided = score(data.features[start:stop], batch_size)
            kept.clear()
            kept[start] = decided
            yield ranked

    def deciding():
        for start, stop in spans:
            decided = kept.pop(start, None)
            yield decided if decided is not None else score(data.features[start:stop], batch_size)[1]

    return ranking, deciding


def _apart(model: Any) -> bool:
    """Whether `model`'s decisions are read from scores of their own (`CDGTModel.decides_apart`)."""
    decides_apart = getattr(model, "decides_apart", None)
    return decides_apart is not None and bool(decides_apart())


def label_groups(train_counts: np.ndarray, num_train: int, config: CDGTConfig) -> tuple:
    """(head ids, tail ids, propensities) from the training label counts."""
    head, tail = head_tail_split(train_counts / max(num_train, 1), config.head_fraction, config.tail_fraction)
    return head, tail, propensities(train_counts, num_train, a=config.psp_a, b=config.psp_b)


def evaluate_probs(val_probs: np.ndarray | sp.spmatrix, validation: MultiLabelData,
                   test_probs: np.ndarray | sp.spmatrix, test: MultiLabelData,
                   train_counts: np.ndarray, num_train: int, config: CDGTConfig,
                   val_deciding: np.ndarray | None = None, test_deciding: np.ndarray | None = None) -> Evaluation:
    """Tune thresholds on validation (SPEC §4), then report every metric on test, overall/head/tail (SPEC §7).
    `val_deciding` / `test_deciding`: the scores the decisions are read from, when not the ranking's
    (`decision_scorer`): the thresholds are tuned on them and the F1 metrics read them.

    Above DENSE_LIMIT scores, or for sparse score matrices (a tree model's beam), the scores are read by row
    chunks (`evaluate_chunks`): the same figures, faster and without [n, L] temporaries (decisions,
    sub-matrices) beside the scores.
    """
    if (val_deciding is None) != (test_deciding is None):
        raise ValueError("give the decisions' scores of both validation and test, or of neither")
    if (max(np.shape(val_probs)[0], np.shape(test_probs)[0]) * test.num_labels > DENSE_LIMIT
            or sp.issparse(val_probs) or sp.issparse(test_probs)):
        apart = val_deciding is not None
        return evaluate_chunks(matrix_chunks(val_probs), validation, matrix_chunks(test_probs), test, train_counts,
                               num_train, config, matrix_chunks(val_deciding) if apart else None,
                               matrix_chunks(test_deciding) if apart else None)
    val_deciding = val_probs if val_deciding is None else val_deciding
    test_deciding = test_probs if test_deciding is None else test_deciding
    thresholds = tuned_thresholds(val_deciding, validation.labels, config)
    head, tail, props = label_groups(train_counts, num_train, config)
    result = report(test.labels, test_probs, apply_thresholds(test_deciding, thresholds),
                    head_labels=head, tail_labels=tail, propensities=props)
    return Evaluation(thresholds, result, head, tail)


def evaluate_chunks(val_chunks: ScoreChunks, validation: MultiLabelData, test_chunks: ScoreChunks,
                    test: MultiLabelData, train_counts: np.ndarray, num_train: int,
                    config: CDGTConfig, val_deciding: ScoreChunks | None = None,
                    test_deciding: ScoreChunks | None = None) -> Evaluation:
    """`evaluate_probs` on score chunks: one pass over validation, two over test (the second for MAP); the
    decisions' own chunks, when given, one pass over each split."""
    if (val_deciding is None) != (test_deciding is None):
        raise ValueError("give the decisions' score chunks of both validation and test, or of neither")
    thresholds = tune_thresholds_chunks((val_deciding or val_chunks)(), validation.labels, **config_rule(config))
    head, tail, props = label_groups(train_counts, num_train, config)
    result = chunked_report(test.labels, test_chunks, thresholds, head_labels=head, tail_labels=tail,
                            propensities=props, decision_chunks=test_deciding)
    return Evaluation(thresholds, result, head, tail)


def evaluate_model(model, validation: MultiLabelData, test: MultiLabelData, train_counts: np.ndarray,
                   num_train: int, config: CDGTConfig, chunked: bool | None = None) -> Evaluation:
    """Predict validation and test with `model`, then `evaluate_probs`, or `evaluate_chunks` when `chunked`
    (default: when a split holds more than DENSE_LIMIT scores; the chunked path predicts test twice, for MAP)."""
    if chunked is None:
        chunked = max(validation.num_examples, test.num_examples) * test.num_labels > DENSE_LIMIT
    score = answer_scorer(model)  # traced once for both splits
    if chunked:  # each split's ranking and decisions from one pass of the model (`answer_chunks`)
        (val_chunks, val_deciding), (test_chunks, test_deciding) = (
            answer_chunks(model, s, config.batch_size, score=score) for s in (validation, test))
        return evaluate_chunks(val_chunks, validation, test_chunks, test, train_counts, num_train, config,
                               val_deciding, test_deciding)
    (val_probs, val_deciding), (test_probs, test_deciding) = (
        predict_answers(model, s, config.batch_size, score) for s in (validation, test))
    return evaluate_probs(val_probs, validation, test_probs, test, train_counts, num_train, config, val_deciding,
                          test_deciding)
