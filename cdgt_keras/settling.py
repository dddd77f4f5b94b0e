"""Settling a trained model's memory: remember the training split in its neighbour votes and label centroids (and
the label texts, cdgt_keras.label_text), then tune each one's share of the answer on validation P@k (k the
config's `memory_tuning_k`, 5 by default; or PSP@k, or PSP@k among the weights near the best P@k, by the config's
`memory_tuning_metric`; the votes' weight first, then the centroids' with the votes in, then the
label texts' with both in), as `cdgt_keras.model` blends them: (1 - nu) [(1 - mu) [(1 - w) p_hat + w votes] + mu
centroids] + nu texts (with votes in two spaces, `neighbour_space="both"`, the encoder's votes blend in after the
input's, their weight tuned second). With `tail_memory="own"` the tail labels then get weights of their own, on
validation Rare-F1 (cdgt_keras.tail_memory).

Every path that trains (`cdgt_keras.training.fit_model`, the TFX Trainer) calls `settle` once after training.
The votes' validation scores are computed once, chunk by chunk, and kept between the tunings as sparse rows (a
row has the labels of its k neighbours only); the blends are formed here, so the votes' pass over the memory (the
costly one) is not run again while the next weight is tuned. The model's own answer (every weight at 0), that
answer with the layers tuned so far, and the label tables' scores are dense [n, L]: they are kept too while all of
them fit `SCORES_KEPT_BYTES` (deps' 5.9k x 18.6k, four matrices of 440 MB, are; deps-all's 41k labels are not), else
computed again for each tuning, so a large label space holds no dense [n, L] matrix beyond a chunk. Each weight's
P@5 is counted among a few candidate labels per row, with the full ranking's hits (cdgt_keras.blend_hits).

Example:
    >>> p, v = np.array([[0.9, 0.1], [0.6, 0.4]]), np.array([[0.0, 1.0], [0.0, 1.0]])
    >>> tune_weight(lambda: [(p, v, sp.csr_matrix([[0, 1], [0, 1]]))], (0.0, 0.5), k=1)   # w = 0.5 ranks label 1 first
    (0.5, {0.0: 0.0, 0.5: 1.0})
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import scipy.sparse as sp

from cdgt_keras.blend_hits import blend_hits
from cdgt_keras.centroids import centroid_matrix
from cdgt_keras.inputs import batch_scorer
from cdgt_keras.metrics import propensities
from cdgt_keras.postings import cap_lists
from cdgt_keras.reranking import tune_reranking
from cdgt_keras.tail_memory import blend

# Validation's scores [n, L] (the model's own answer, the answer with the layers tuned so far, each label table's)
# are computed once and kept while all of them fit in this many bytes (deps: 4 x 440 MB), else computed again, chunk
# by chunk, for each weight tuned.
SCORES_KEPT_BYTES = 2 << 30
# Two weights whose validation tables differ by less than this (relative) tie, and the smaller is kept.
TIE_TOLERANCE = 1e-9


def tune_weight(pairs: Callable[[], Iterable[tuple[np.ndarray, np.ndarray, Any]]], grid: Iterable[float],
                k: int = 5, label_weights: np.ndarray | None = None,
                slack: float | None = None) -> tuple[float, dict[float, float]]:
    """The weight w of `grid` whose blend (1 - w) p + w v has the highest validation P@k, and P@k per weight; with
    `label_weights` (1 / propensity), the highest propensity-weighted hits per top-k slot instead (PSP@k's
    numerator over the slots: the same order of weights as PSP@k, whose denominator does not depend on w). With
    both `label_weights` and `slack`: the most weighted hits among the weights whose P@k is within `slack` (a
    fraction: 0.001 = 0.1 points) of the best P@k, and P@k per weight: a weight that validation P@k cannot tell
    from the best is picked by what it does to the rarer labels' ranks, and no weight that costs P@k is.

    `pairs()` yields chunks (model scores [n, L], votes [n, L] dense or scipy sparse, labels [n, L]) of the
    validation split; ties go to the smaller weight, so votes that add nothing stay out. The hits are counted as
    integers, so two weights with as many hits tie exactly (summed means differed in their last bits, chunk by
    chunk, and decided ties); each blend is ranked among a few candidate labels per row, with the full ranking's
    hits (cdgt_keras.blend_hits).

    Example:
        >>> p, v = np.array([[0.9, 0.1], [0.6, 0.4]]), np.array([[0.0, 1.0], [0.0, 1.0]])
        >>> tune_weight(lambda: [(p, v, sp.csr_matrix([[0, 1], [0, 1]]))], (0.0, 0.5, 0.9), k=1)
        (0.5, {0.0: 0.0, 0.5: 1.0, 0.9: 1.0})
        >>> p, v = np.array([[0.9, 0.8, 0.0]]), np.array([[0.0, 0.0, 1.0]])   # label 2 rare: its hit weighs 10
        >>> tune_weight(lambda: [(p, v, sp.csr_matrix([[0, 1, 1]]))], (0.0, 0.5), k=2,
        ...             label_weights=np.array([1.0, 1.0, 10.0]), slack=0.0)   # both P@2 0.5: the rare hit decides
        (0.5, {0.0: 0.5, 0.5: 0.5})
    """
    grid = sorted({float(w) for w in grid})
    both = label_weights is not None and slack is not None
    # both: each blend ranked once, its hits counted (a column of ones: integers, exact in float64) and weighted
    counted = np.column_stack([np.ones(len(label_weights)), label_weights]) if both else label_weights
    hits, weighted, total = dict.fromkeys(grid, 0), dict.fromkeys(grid, 0.0), 0
    for scores, votes, truth in pairs():
        total += scores.shape[0]
        for w, found in blend_hits(scores, votes, truth, grid, k, counted).items():  # among candidates, exactly
            if both:
                hits[w] += int(found[0])
                weighted[w] += float(found[1])
            else:
                hits[w] += found
    table = {w: hits[w] / (k * max(total, 1)) for w in grid}
    if not both:
        return _best(table, grid), table
    floor = max(table.values()) - float(slack)
    return _best(weighted, [w for w in grid if table[w] >= floor]), table


def _best(values: dict[float, float], grid: list[float]) -> float:
    """The smallest weight of `grid` whose value is the highest, values within TIE_TOLERANCE of each other (relative)
    tying: weighted hits are float sums, whose last bits depend on the order of the chunks and candidates.

        >>> _best({0.0: 1.0, 0.5: 1.0 + 1e-15, 0.9: 0.5}, [0.0, 0.5, 0.9])
        0.0
    """
    top = max(values[w] for w in grid)
    return min(w for w in grid if values[w] >= top - TIE_TOLERANCE * max(abs(top), 1.0))


def settle(model: Any, train_x: Any, train_y: Any, val_x: Any, val_y: Any, grid: Iterable[float],
           batch_size: int = 256, rows: int = 2048, label_features: Any = None,
           centroids: Any = None) -> dict[float, float]:
    """Remember the training split in the model's memory and tune what it adds on validation (P@k, k the config's
    `memory_tuning_k`, in chunks of `rows`): each set of neighbour votes' weight over `grid`, in the order the answer
    blends them, with the ones before it in (returns the first's validation P@k per weight), then, with the votes
    in, the label centroids' weight over the config's `centroid_weights` (cdgt_keras.centroids), then the label
    texts' over `label_text_weights` (`label_features`, [L, F]: cdgt_keras.label_text); with `tail_memory="own"`,
    the tail labels' own weights (`settle_tail`); last, the propensity re-ranking's exponent (config rerank_slack:
    `cdgt_keras.reranking.tune_reranking`). `centroids`: the training split's label centroids, when the caller has
    made them already (`centroid_matrix`, for the model's shape). A model with no memory gets the last alone."""
    voters, tables = model.vote_layers(), _remember_tables(model, train_x, train_y, label_features, centroids)
    config = model.cdgt_config
    k = config.memory_tuning_k
    if not voters and not tables:
        tune_reranking(model, val_x, val_y, batch_size, rows)
        return {}
    weights = tuning_weights(config, train_y)
    slack = config.memory_tuning_slack if config.memory_tuning_metric == "p_then_psp_at_k" else None
    for votes, space in voters:
        encode = batch_scorer(lambda x, space=space: model.neighbour_query(x, space)) if space == "encoder" \
            else None
        votes.remember(train_x if encode is None else encode(train_x, batch_size), train_y)
        _unset(votes)
    starts = range(0, val_x.shape[0], rows)
    layers = [layer for layer, _ in voters] + [layer for layer, _ in tables]
    tuned: list[tuple[Any, Callable[[int], np.ndarray]]] = []  # each layer tuned so far, its scores of a chunk
    fused = batch_scorer(model.fused_probs)  # the model's own answer, p_hat: every memory's weight at 0
    # the model's own answer, scored once when validation's scores fit SCORES_KEPT_BYTES, else for each weight
    # tuned; kept with it, the answer with the layers tuned so far (each layer blended in once, not once a tuning)
    kept_bytes = (2 + len(tables)) * val_x.shape[0] * model.num_labels * np.dtype(np.float32).itemsize
    bare: dict[int, np.ndarray] | None = {} if kept_bytes <= SCORES_KEPT_BYTES else None
    blended: dict[int, tuple[int, np.ndarray]] = {}  # start -> (how many layers of `tuned` it has, the scores)

    def chunks() -> Iterator[tuple[int, np.ndarray, Any]]:
        """(start, the model's answer with the layers tuned so far, labels), chunk by chunk of validation."""
        for start in starts:
            done, scores = blended.get(start, (0, None))
            if scores is None and bare is not None and start in bare:
                scores = bare[start]
            elif scores is None:
                scores = fused(val_x[start:start + rows], batch_size)
                if bare is not None:
                    bare[start] = scores
            for layer, scored in tuned[done:]:
                w = float(layer.weight.numpy())
                scores = blend(scores, _dense(scored(start)), w) if w > 0.0 else scores
            if bare is not None:
                blended[start] = (len(tuned), scores)
            yield start, scores, sp.csr_matrix(val_y[start:start + rows])

    first_tables: list[dict[float, float]] = []
    for votes, space in voters:
        score = batch_scorer(lambda x, votes=votes, space=space: votes(model.neighbour_query(x, space)))
        held = {start: sp.csr_matrix(score(val_x[start:start + rows], batch_size)) for start in starts}

        def scored(start: int, held: dict[int, sp.csr_matrix] = held) -> sp.csr_matrix:
            return held[start]

        first_tables.append(_tune(votes, lambda scored=scored: ((p, scored(s), y) for s, p, y in chunks()), grid, k,
                                  weights, slack))
        tuned.append((votes, scored))
    for table, table_grid in tables:
        # the table's validation scores, kept for the next tunings when they fit SCORES_KEPT_BYTES, else scored again
        scored = _table_scores(batch_scorer(table), val_x, rows, batch_size, keep=bare is not None)
        _tune(table, lambda scored=scored: ((p, scored(s), y) for s, p, y in chunks()), table_grid, k, weights,
              slack)
        tuned.append((table, scored))

    def own_scores() -> Iterator[tuple[np.ndarray, list[np.ndarray], Any]]:
        """(the model's own answer, each memory layer's scores, labels), chunk by chunk of validation."""
        for start in starts:
            part = val_x[start:start + rows]
            own = bare[start] if bare is not None and start in bare else fused(part, batch_size)
            yield own, [_dense(scored(start)) for _, scored in tuned], sp.csr_matrix(val_y[start:start + rows])

    if config.tail_memory == "own" or config.tail_decisions == "own":
        settle_tail(model, layers, own_scores, [grid] * len(voters) + [g for _, g in tables])
    # last: it re-ranks the answer the memories made, blended here from the scores settle holds (the model's
    # answer, the same float32 operations; with a shortlist the network's scores differ, and the model is asked)
    answers = None if model.shortlisted() else lambda: settled_answers(model, layers, own_scores)
    tune_reranking(model, val_x, val_y, batch_size, rows, answers=answers)
    return first_tables[0] if first_tables else {}


def settled_answers(model: Any, layers: list[Any], chunks: Callable[[], Iterable[tuple[np.ndarray, list[Any], Any]]]
                    ) -> Iterator[tuple[np.ndarray, Any]]:
    """(the model's ranking scores before any re-ranking, labels), chunk by chunk: each of `chunks()`'s (own
    answer, each memory layer's scores, labels) blended as the model blends them, in `layers`' order at each
    layer's share per label (its weight; on the tail labels its tail weight where that is set), in float32."""
    tail = np.asarray(model.tail_mask.numpy(), dtype=bool)
    shares = [_share(layer, tail) for layer in layers]
    for own, parts, labels in chunks():
        scores = own
        for part, share in zip(parts, shares):
            if share.max() > 0.0:
                scores = blend(scores, np.asarray(part, dtype=np.float32), share)
        yield scores, labels


def _share(layer: Any, tail: np.ndarray) -> np.ndarray:
    """A memory layer's share of the ranking per label [L] (float32), as the model's `_share` computes it."""
    weight, tail_weight = np.float32(layer.weight.numpy()), np.float32(layer.tail_weight.numpy())
    return np.where(tail & (tail_weight >= 0.0), tail_weight, weight).astype(np.float32)


def tuning_weights(config: Any, train_y: Any) -> np.ndarray | None:
    """What a hit in the memories' tuning counts: None (1 each: P@k) or each label's 1 / propensity (PSP@k, Jain
    et al.'s propensities of the training split's label counts, the config's psp_a and psp_b), by the config's
    `memory_tuning_metric`.

        >>> from cdgt_keras.config import CDGTConfig
        >>> y = sp.csr_matrix(np.array([[1, 0], [1, 1], [1, 0], [1, 0]]))
        >>> tuning_weights(CDGTConfig(memory_tuning_metric="p_at_k"), y) is None
        True
        >>> w = tuning_weights(CDGTConfig(memory_tuning_metric="psp_at_k"), y); bool(w[1] > w[0] > 1)
        True
    """
    if config.memory_tuning_metric == "p_at_k":
        return None  # p_then_psp_at_k and psp_at_k weigh the hits
    counts = np.asarray(sp.csr_matrix(train_y).sum(axis=0)).ravel()
    return 1.0 / propensities(counts, train_y.shape[0], config.psp_a, config.psp_b)


def _remember_tables(model: Any, train_x: Any, train_y: Any, label_features: Any,
                     centroid_rows: Any = None) -> list[tuple[Any, Any]]:
    """Fill the model's label tables (the centroids of the training split, made here unless `centroid_rows`
    holds them, the label texts) and set their weights to 0; returns [(layer, its weight grid)] in the order the
    answer blends them."""
    config, out = model.cdgt_config, []
    centroids, texts = getattr(model, "centroids", None), getattr(model, "label_text", None)
    if centroids is not None:
        rows = centroid_matrix(train_x, train_y, config.centroid_features) if centroid_rows is None else centroid_rows
        centroids.store(cap_lists(rows, config.memory_list_cap))
        out.append((centroids, config.centroid_weights))
    if texts is not None:
        if label_features is None:
            raise ValueError("the model has a label-text layer (label_text=true) but settle got no label_features")
        texts.store(cap_lists(label_features, config.memory_list_cap))
        out.append((texts, config.label_text_weights))
    for layer, _ in out:
        _unset(layer)
    return out


def _unset(layer: Any) -> None:
    """A memory layer's weights before `settle` tunes them: no share (0), the tail's and the decisions' the
    shared one (-1)."""
    layer.weight.assign(0.0)
    layer.tail_weight.assign(-1.0)
    if layer.decision_weight is not None:
        layer.decision_weight.assign(-1.0)


def _table_scores(score: Callable[[Any, int], np.ndarray], val_x: Any, rows: int, batch_size: int,
                  keep: bool) -> Callable[[int], np.ndarray]:
    """A chunk's scores by a label table (start -> [rows, L]), each computed once and kept when `keep`."""
    kept: dict[int, np.ndarray] = {}

    def scored(start: int) -> np.ndarray:
        found = kept.get(start)
        if found is None:
            found = score(val_x[start:start + rows], batch_size)
            if keep:
                kept[start] = found
        return found

    return scored


def settle_tail(model: Any, layers: list[Any], scores: Any, grids: list[Iterable[float]]) -> Any:
    """Give the tail labels their own memory weights where validation Rare-F1 says so (cdgt_keras.tail_memory):
    in the ranking with `tail_memory="own"` (kept as `model.tail_choice` and returned), and in the decisions alone
    with `tail_decisions="own"` (the same search without the P@k guard, on `tail_decisions_metric`, against the
    ranking's weights: kept as `model.decision_choice`)."""
    from cdgt_keras.tail_memory import TailView, tune_tail, tune_tail_fold_mean
    from cdgt_keras.thresholds import config_rule

    config, tail = model.cdgt_config, np.flatnonzero(model.tail_mask.numpy())
    if tail.size == 0 or tail.size == model.num_labels:
        return None
    shared = [float(layer.weight.numpy()) for layer in layers]
    view = TailView.of(scores, shared, tail, folds=config.tail_memory_folds)
    grids, rule, choice = [list(g) for g in grids], config_rule(config), None
    if config.tail_memory == "own":
        pick = tune_tail_fold_mean if config.tail_memory_pick == "fold_mean" else tune_tail
        choice = pick(view, grids, rule, config.tail_memory_slack, shared)
        for layer, w in zip(layers, choice.weights or [-1.0] * len(layers)):
            layer.tail_weight.assign(w)
        model.tail_choice = choice
    if config.tail_decisions == "own":
        ranking = choice.weights if choice is not None and choice.weights is not None else shared
        decided = tune_tail(view, grids, rule, slack=1.0, shared=ranking,  # a slack of 1: no P@k guard
                            metric=config.tail_decisions_metric)
        for layer, w in zip(layers, decided.weights or [-1.0] * len(layers)):
            layer.decision_weight.assign(w)
        model.decision_choice = decided
    return choice


def _tune(layer: Any, pairs: Callable[[], Iterable[tuple[np.ndarray, np.ndarray, Any]]],
          grid: Iterable[float], k: int, label_weights: np.ndarray | None = None,
          slack: float | None = None) -> dict[float, float]:
    """Set `layer.weight` (its share of the model's answer) to the best of `grid` on the blends of `pairs` (as in
    tune_weight); returns (and keeps in `layer.tuning`, for whoever reports the run) validation P@k per weight, k
    the config's `memory_tuning_k` (or the propensity-weighted hits per slot, with `label_weights` and no
    `slack`)."""
    best, table = tune_weight(pairs, grid, k=k, label_weights=label_weights, slack=slack)
    layer.weight.assign(best)
    layer.tuning = table
    return table


def _dense(scores: Any) -> np.ndarray:
    """A chunk's scores as a dense array (the votes are held sparse)."""
    return scores.toarray() if sp.issparse(scores) else scores
