"""How the pipeline blesses a model (TFMA's gate on the Evaluator): the thresholds' defaults and the command-line
options that set them, in one place for `cdgt run`, `cdgt kubeflow` and pipeline.pipeline's PipelineSettings.

Light to import (no TensorFlow, no TFX): the commands build their parsers from it before anything heavy loads.

Example:
    >>> parser = argparse.ArgumentParser()
    >>> add_blessing_arguments(parser)
    >>> args = parser.parse_args([])
    >>> args.min_auc, args.max_auc_drop, args.auc_labels
    (0.6, 0.01, 2000)
"""

from __future__ import annotations

import argparse

import numpy as np

MIN_AUC = 0.6  # TFMA value threshold on the micro AUC over the (example, label) pairs of the blessing's labels
MAX_AUC_DROP = 0.01  # change threshold: at most this much below the latest blessed model
# The blessing's AUC covers at most this many labels: TFMA walks the flattened (example, label) pairs one at a time
# in Python, so at deps' 18.6k labels x 5.7k test documents (106M pairs) the Evaluator ran for hours.
AUC_LABELS = 2000


def blessing_label_ids(num_labels: int, max_labels: int = AUC_LABELS) -> np.ndarray:
    """The label ids TFMA's blessing AUC covers, ascending: every label up to `max_labels`, else a fixed sample of
    `max_labels` of them (uniform, seed 0), the same for a candidate and its baseline, so both are judged on the same
    (example, label) pairs. A uniform sample of labels keeps the micro AUC's expectation over labels.

    Example:
        >>> blessing_label_ids(4, 8).tolist()
        [0, 1, 2, 3]
        >>> ids = blessing_label_ids(10_000, 100)
        >>> len(ids), bool((ids == blessing_label_ids(10_000, 100)).all()), int(ids.max()) < 10_000
        (100, True, True)
    """
    if num_labels < 1 or max_labels < 1:
        raise ValueError(f"need at least one label and max_labels >= 1, got {num_labels} and {max_labels}")
    if num_labels <= max_labels:
        return np.arange(num_labels, dtype=np.int64)
    return np.sort(np.random.default_rng(0).choice(num_labels, size=max_labels, replace=False)).astype(np.int64)


def add_blessing_arguments(parser: argparse.ArgumentParser) -> None:
    """--min-auc, --max-auc-drop and --auc-labels, defaulting to MIN_AUC, MAX_AUC_DROP and AUC_LABELS."""
    parser.add_argument("--min-auc", type=float, default=MIN_AUC,
                        help=f"TFMA value threshold on the micro AUC ({MIN_AUC})")
    parser.add_argument("--max-auc-drop", type=float, default=MAX_AUC_DROP,
                        help=f"TFMA change threshold: largest AUC drop allowed vs the latest blessed model "
                             f"({MAX_AUC_DROP})")
    parser.add_argument("--auc-labels", type=int, default=AUC_LABELS,
                        help=f"the blessing's AUC covers at most this many labels: every label up to it, else a "
                             f"fixed uniform sample of this many (TFMA scores each (example, label) pair in Python, "
                             f"which takes hours at tens of thousands of labels; default {AUC_LABELS})")
