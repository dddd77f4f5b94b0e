"""The tail labels' own share of the memory (`tail_memory="own"`): after `settle` has picked each memory layer's
weight on validation P@5, the tail labels (the `tail_fraction` rarest, the labels of the report's Rare-F1) get
weights of their own, picked on validation Rare-F1.

Why: P@5 is the head's metric. A rare label is almost never in a document's top five, so the weights validation
P@5 picks are the ones that serve the frequent labels, and on debtags it gives the input's neighbour votes (rare
shared words: what a rare label is known by) no share at all. With its own weights, the tail's answer is
(1 - w_t) p_hat + w_t votes on the tail's columns while the others keep w.

How: a coordinate search over the layers in the order the answer blends them, each over its grid
(`neighbour_weights`, `centroid_weights`), starting from 0, ties to the smaller weight. A candidate counts only if
validation P@1 and P@5 (every label, the tail's columns blended with the candidate) stay within `slack` of the
shared weights' (P@1 too: with a handful of labels, as emotions' six, P@5 hardly moves while P@1 can fall); the
thresholds behind Rare-F1 are tuned by the config's rule on every label (the others' columns
with the shared weights), as the evaluation tunes them. The shared weights stay unless the tail's own beat them
on validation Rare-F1. With `folds` > 1 (`tail_memory_folds`) that Rare-F1 is cross-fitted: validation's rows are
dealt into folds (row i to fold i mod folds), each fold's tail decisions are made at the thresholds the rule tunes on
the other folds, and the folds' counts are summed. A tail of a few dozen validation positives is otherwise scored at
thresholds fitted to those very positives, which rewards the weights that let the thresholds fit them.
Only the tail's columns are held ([n, T] per layer), so a large label space holds no
[n, L] matrix beyond a chunk.

Example (two documents, label 1 the tail; the votes find its positive, the model's own answer does not):
    >>> bare = np.array([[0.9, 0.2], [0.8, 0.3]]); votes = np.array([[0.0, 0.9], [1.0, 0.0]])
    >>> truth = sp.csr_matrix([[1, 1], [1, 0]])
    >>> view = TailView.of(lambda: [(bare, [votes], truth)], [0.0], tail=np.array([1]), k=1)
    >>> tune_tail(view, [(0.0, 0.5)], {"mode": "global"}, slack=0.0).weights   # the tail's own weight: 0.5
    [0.5]
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from cdgt_keras.threads import elementwise, map_rows
from cdgt_keras.thresholds import ThresholdCounts

GUARDED = (1, 5)  # the P@k the tail's weights must keep (within the slack)
Chunks = Callable[[], Iterable[tuple[np.ndarray, list[np.ndarray], sp.spmatrix]]]


def blend(scores: np.ndarray, extra: np.ndarray, weight: float | np.ndarray) -> np.ndarray:
    """(1 - weight) scores + weight extra: a memory layer's share of the answer, as the model blends it (in row
    blocks on every core: the same values); `weight` one share, or one per label ([L], float32, as the model's).

        >>> blend(np.array([1.0, 0.0]), np.array([0.0, 1.0]), 0.25).tolist()
        [0.75, 0.25]
    """
    return elementwise(lambda s, e: (1.0 - weight) * s + weight * e, np.asarray(scores), np.asarray(extra))


def blend_all(bare: np.ndarray, parts: Sequence[np.ndarray], weights: Sequence[float]) -> np.ndarray:
    """The model's answer from its own scores and each memory layer's, blended in order:
    s <- (1 - w) s + w part (a weight of 0 leaves s as it is).

        >>> blend_all(np.array([1.0, 0.0]), [np.array([0.0, 1.0])], [0.25]).tolist()
        [0.75, 0.25]
    """
    scores = bare
    for part, w in zip(parts, weights):
        if w > 0.0:
            scores = blend(scores, part, w)
    return scores


@dataclass
class TailView:
    """What the tail's tuning needs of validation: the tail's columns of the model's own scores and of each
    layer's ([n, T] each), their truth, and of the other labels, under the shared weights, each row's k best
    scores in order (and whether each is a positive) and their threshold counts, one per fold (row i in fold
    i mod the number of folds)."""

    tail: np.ndarray
    bare: np.ndarray
    parts: list[np.ndarray]
    truth: sp.csr_matrix
    rest_top: np.ndarray
    rest_hits: np.ndarray
    rest_counts: list[ThresholdCounts]
    k: int

    @classmethod
    def of(cls, chunks: Chunks, shared: Sequence[float], tail: np.ndarray, k: int = 5,
           grid: np.ndarray | None = None, folds: int = 1) -> TailView:
        """Read validation's chunks (the model's own scores [rows, L], each layer's [rows, L], labels) once; the
        other labels' threshold counts are kept per fold (row i in fold i mod `folds`)."""
        if folds < 1:
            raise ValueError(f"folds must be an integer >= 1, got {folds!r}")
        bare, parts, truth, tops, hits = [], [], [], [], []
        counts: list[ThresholdCounts] = []
        seen = 0
        for scores, layer_scores, labels in chunks():
            labels = sp.csr_matrix(labels)
            rest = np.setdiff1d(np.arange(scores.shape[1]), tail)
            bare.append(scores[:, tail])
            parts.append([np.asarray(p)[:, tail] for p in layer_scores])
            truth.append(labels[:, tail])
            shared_scores = blend_all(scores, layer_scores, shared)[:, rest]
            rest_truth = labels[:, rest]
            top, hit = _top(shared_scores, rest_truth, k)
            tops.append(top)
            hits.append(hit)
            counts = counts or [ThresholdCounts(rest.size, grid) for _ in range(folds)]
            fold = (seen + np.arange(scores.shape[0])) % folds
            for f, fold_counts in enumerate(counts):
                if (fold == f).any():
                    fold_counts.add(shared_scores[fold == f], rest_truth[fold == f])
            seen += scores.shape[0]
        return cls(np.asarray(tail), np.concatenate(bare), [np.concatenate(p) for p in zip(*parts)],
                   sp.vstack(truth, format="csr"), np.concatenate(tops), np.concatenate(hits), counts, k)

    @property
    def fold(self) -> np.ndarray:
        """Each row's fold (row i in fold i mod the number of folds)."""
        return np.arange(self.bare.shape[0]) % len(self.rest_counts)

    def scores(self, weights: Sequence[float]) -> np.ndarray:
        """The tail's columns [n, T] under `weights` (one per layer)."""
        return blend_all(self.bare, self.parts, weights)

    @functools.cached_property
    def tail_positives(self) -> np.ndarray:
        """The tail's truth as a dense bool [n, T], made once (every candidate's P@k reads it)."""
        return self.truth.toarray() != 0

    def precision(self, tail_scores: np.ndarray, k: int) -> float:
        """P@k (k at most the view's) over every label, the tail's columns scored `tail_scores`."""
        scores = np.concatenate([self.rest_top[:, :k], tail_scores], axis=1)
        hits = np.concatenate([self.rest_hits[:, :k], self.tail_positives], axis=1)
        best = _best_k(scores, k)
        return float(np.take_along_axis(hits, best, axis=1).sum(axis=1).mean() / k) if len(scores) else 0.0

    def precisions(self, tail_scores: np.ndarray) -> dict[int, float]:
        """P@k for each k the guard reads (GUARDED, up to the view's k)."""
        return {k: self.precision(tail_scores, k) for k in GUARDED if k <= self.k}

    def rare_f1(self, tail_scores: np.ndarray, rule: dict) -> float:
        """Micro-F1 on the tail's labels at the thresholds `rule` tunes on every label (validation): in-sample with
        one fold, each fold's decisions at the thresholds tuned on the other folds with more."""
        tp, predicted, positives = (c.sum() for c in self._decided(tail_scores, rule))
        denom = positives + predicted
        return float(2.0 * tp / denom) if denom > 0 else 0.0

    def tail_macro_f1(self, tail_scores: np.ndarray, rule: dict) -> float:
        """The mean of the tail labels' F1 (a label with neither positives nor decisions counts 0), decided as
        `rare_f1` decides: the tail's share of Macro-F1, the other labels' decisions held.

            >>> view = TailView.of(lambda: [(np.array([[0.9, 0.8], [0.1, 0.2]]), [], sp.csr_matrix([[1, 0], [0, 0]]))],
            ...                    [], tail=np.array([1]), k=1)
            >>> view.tail_macro_f1(np.array([[0.8], [0.2]]), {"mode": "global"})   # no positive, no decision
            0.0
        """
        tp, predicted, positives = self._decided(tail_scores, rule)
        denom = positives + predicted
        f1 = np.divide(2.0 * tp, denom, out=np.zeros(denom.shape, np.float64), where=denom > 0)
        return float(f1.mean()) if f1.size else 0.0

    def f1(self, tail_scores: np.ndarray, rule: dict, metric: str = "rare_f1") -> float:
        """`rare_f1` or `tail_macro_f1` ("macro_f1") of the tail's scores."""
        return self.rare_f1(tail_scores, rule) if metric == "rare_f1" else self.tail_macro_f1(tail_scores, rule)

    def _decided(self, tail_scores: np.ndarray, rule: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per tail label, (true positives, decisions, positives) over validation: in-sample with one fold, each
        fold's decisions at the thresholds tuned on the other folds with more."""
        folds = len(self.rest_counts)
        counts = [self.tail_counts(tail_scores, f) for f in range(folds)]
        total = [np.zeros(self.tail.size, np.int64) for _ in range(3)]
        for f in range(folds):
            tuned_on = [g for g in range(folds) if g != f] or [f]
            decided = decided_counts(counts[f], self.tail_thresholds([counts[g] for g in tuned_on], tuned_on, rule))
            total = [t + d for t, d in zip(total, decided)]
        return total[0], total[1], total[2]

    def tail_thresholds(self, tail_counts: Sequence[ThresholdCounts], folds: Sequence[int], rule: dict) -> np.ndarray:
        """The tail's thresholds [T] that `rule` tunes on every label's counts over `folds` (the tail's counts
        `tail_counts`, one per fold in `folds`; the other labels' under the shared weights), as the evaluation
        tunes them."""
        rest = _summed([self.rest_counts[f] for f in folds])
        both = _summed(tail_counts)
        joined = ThresholdCounts(rest.num_labels + both.num_labels, rest.grid)
        for name in ("predicted", "true_pos", "positives"):
            setattr(joined, name, np.concatenate([getattr(rest, name), getattr(both, name)]))
        return joined.thresholds(**rule)[rest.num_labels:]

    def without(self, fold: int) -> TailView:
        """The view of validation without one fold's rows, as one fold (its Rare-F1 in-sample on those rows)."""
        keep = self.fold != fold
        rest = _summed([c for f, c in enumerate(self.rest_counts) if f != fold])
        return TailView(self.tail, self.bare[keep], [p[keep] for p in self.parts], self.truth[keep],
                        self.rest_top[keep], self.rest_hits[keep], [rest], self.k)

    def tail_counts(self, tail_scores: np.ndarray, fold: int = 0) -> ThresholdCounts:
        """The tail's threshold counts over one fold's rows (with one fold, every row)."""
        rows = self.fold == fold
        counts = ThresholdCounts(self.tail.size, self.rest_counts[fold].grid)
        if rows.any():
            counts.add(tail_scores[rows], self.truth[rows])
        return counts


def decided_counts(counts: ThresholdCounts, thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per label, (true positives, decided positives, positives) at `thresholds` (on the counts' grid).

        >>> counts = ThresholdCounts(1, np.array([0.0, 0.5, 1.0]))
        >>> counts.add(np.array([[0.9], [0.6], [0.2]]), sp.csr_matrix([[1], [0], [1]]))
        >>> [c.tolist() for c in decided_counts(counts, np.array([0.5]))]
        [[1], [2], [2]]
    """
    at = np.searchsorted(counts.grid, np.asarray(thresholds, np.float64))
    labels = np.arange(counts.num_labels)
    return counts.true_pos[labels, at], counts.predicted[labels, at], counts.positives


def _summed(counts: Sequence[ThresholdCounts]) -> ThresholdCounts:
    """The same labels' counts summed over folds."""
    total = ThresholdCounts(counts[0].num_labels, counts[0].grid)
    for name in ("predicted", "true_pos", "positives"):
        setattr(total, name, sum(getattr(c, name) for c in counts))
    return total


@dataclass(frozen=True)
class TailChoice:
    """The tail's weights (None: the shared ones stay), with validation Rare-F1 (or the search's `metric`) and
    P@k of both ({k: P@k})."""

    weights: list[float] | None
    rare_f1: float
    shared_rare_f1: float
    precision: dict[int, float]
    shared_precision: dict[int, float]
    metric: str = "rare_f1"


def tune_tail(view: TailView, grids: Sequence[Sequence[float]], rule: dict, slack: float,
              shared: Sequence[float] | None = None, metric: str = "rare_f1") -> TailChoice:
    """The coordinate search of the module docstring; `shared`: the layers' shared weights (default 0 each);
    `metric`: what it scores candidates by, validation Rare-F1 or the tail's macro F1 ("macro_f1",
    `TailView.tail_macro_f1`)."""
    shared = list(shared) if shared is not None else [0.0] * len(grids)
    base_p, base_f1, allowed = _guard(view, shared, rule, slack, metric)

    weights = [0.0] * len(grids)
    for i, grid in enumerate(grids):
        best: tuple[tuple[float, float], float] | None = None
        for w in sorted({float(g) for g in grid} | {weights[i]}):
            trial = [*weights[:i], w, *weights[i + 1:]]
            scores = view.scores(trial)
            if not allowed(scores):
                continue
            key = (view.f1(scores, rule, metric), -w)
            if best is None or key > best[0]:
                best = (key, w)
        if best is not None:
            weights[i] = best[1]
    return _choice(view, weights, rule, allowed, base_p, base_f1, lambda f1: f1 > base_f1, metric)


def tune_tail_fold_mean(view: TailView, grids: Sequence[Sequence[float]], rule: dict, slack: float,
                        shared: Sequence[float] | None = None) -> TailChoice:
    """`tail_memory_pick="fold_mean"`: the search of `tune_tail` once per fold on validation without that fold,
    and the tail's weights the mean of the picks (the shared weights where a pick kept them): a pick made on a few
    dozen tail positives varies with which rows it saw, the mean of several varies less. The mean stays if it
    keeps validation P@1 and P@5 within `slack` (all of validation) and some pick was the tail's own."""
    folds = len(view.rest_counts)
    if folds < 2:
        raise ValueError(f"the fold mean needs at least 2 folds of validation, got {folds}")
    shared = list(shared) if shared is not None else [0.0] * len(grids)
    picks = [tune_tail(view.without(f), grids, rule, slack, shared).weights for f in range(folds)]
    weights = [float(w) for w in np.mean([p or shared for p in picks], axis=0)]
    base_p, base_f1, allowed = _guard(view, shared, rule, slack)
    return _choice(view, weights, rule, allowed, base_p, base_f1, lambda f1: any(p is not None for p in picks))


def _guard(view: TailView, shared: list[float], rule: dict, slack: float, metric: str = "rare_f1"
           ) -> tuple[dict[int, float], float, Callable[[np.ndarray], bool]]:
    """The shared weights' validation P@k and Rare-F1 (or `metric`), and the guard: whether tail scores keep every
    P@k within `slack` of the shared weights'."""
    base_scores = view.scores(shared)
    base_p = view.precisions(base_scores)

    def allowed(scores: np.ndarray) -> bool:
        return all(p >= base_p[k] - slack for k, p in view.precisions(scores).items())

    return base_p, view.f1(base_scores, rule, metric), allowed


def _choice(view: TailView, weights: list[float], rule: dict, allowed: Callable[[np.ndarray], bool],
            base_p: dict[int, float], base_f1: float, better: Callable[[float], bool],
            metric: str = "rare_f1") -> TailChoice:
    """The TailChoice of `weights`: kept if allowed and `better` (of their validation Rare-F1, or `metric`)."""
    scores = view.scores(weights)
    f1 = view.f1(scores, rule, metric)
    keep = allowed(scores) and better(f1)
    return TailChoice(weights if keep else None, f1, base_f1, view.precisions(scores), base_p, metric)


def _top(scores: np.ndarray, truth: sp.csr_matrix, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's k best scores in descending order (padded with -inf when a row has fewer columns) and whether
    each is a positive."""
    n, width = scores.shape
    if width < k:
        scores = np.concatenate([scores, np.full((n, k - width), -np.inf, scores.dtype)], axis=1)
    best = _best_k(scores, k)
    best = np.take_along_axis(best, np.argsort(-np.take_along_axis(scores, best, axis=1), axis=1, kind="stable"),
                              axis=1)
    dense = truth.toarray() != 0
    if width < k:
        dense = np.concatenate([dense, np.zeros((n, k - width), bool)], axis=1)
    return np.take_along_axis(scores, best, axis=1), np.take_along_axis(dense, best, axis=1)


def _best_k(scores: np.ndarray, k: int) -> np.ndarray:
    """The column ids of each row's k largest scores (any order; every column when a row has at most k)."""
    if scores.shape[1] <= k:
        return np.broadcast_to(np.arange(scores.shape[1]), scores.shape).copy()
    return np.concatenate(map_rows(lambda block: np.argpartition(-block, k - 1, axis=1)[:, :k], scores))
