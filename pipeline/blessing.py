"""How the pipeline blesses a model (TFMA's gate on the Evaluator): the thresholds' defaults and the command-line
options that set them, in one place for `cdgt run`, `cdgt kubeflow` and pipeline.pipeline's PipelineSettings.

Light to import (no TensorFlow, no TFX): the commands build their parsers from it before anything heavy loads.

Example:
    >>> parser = argparse.ArgumentParser()
    >>> add_blessing_arguments(parser)
    >>> args = parser.parse_args([])
    >>> args.min_auc, args.max_auc_drop
    (0.6, 0.01)
"""

from __future__ import annotations

import argparse

MIN_AUC = 0.6  # TFMA value threshold on the micro AUC over all (example, label) pairs
MAX_AUC_DROP = 0.01  # change threshold: at most this much below the latest blessed model


def add_blessing_arguments(parser: argparse.ArgumentParser) -> None:
    """--min-auc and --max-auc-drop, defaulting to MIN_AUC and MAX_AUC_DROP."""
    parser.add_argument("--min-auc", type=float, default=MIN_AUC,
                        help=f"TFMA value threshold on micro AUC ({MIN_AUC})")
    parser.add_argument("--max-auc-drop", type=float, default=MAX_AUC_DROP,
                        help=f"TFMA change threshold: largest AUC drop allowed vs the latest blessed model "
                             f"({MAX_AUC_DROP})")
