"""MultiLabelEvaluator: the multi-label metrics (overall / head / tail) of a trained model, beside TFMA's
(which blesses the model).

TFMA computes binary metrics on the flattened score matrix; the multi-label metrics of the paper (Rare-F1,
micro/macro-F1, P@k, nDCG@k, PSP@k, mAP, overall / head / tail) need the whole label ranking per example and the
label statistics. This component runs the exported model's `serving_default` signature on a split of raw
tf.Examples, decides with the thresholds stored in the model, and writes a `cdgt.MultiLabelMetrics` artifact
holding `metrics.json` (the report of cdgt_keras.metrics.report); headline values are also custom properties
in ML-Metadata.

Example (inside a pipeline):
    >>> ev = MultiLabelEvaluator(examples=example_gen.outputs["examples"], model=trainer.outputs["model"],
    ...                          label_stats=stats.outputs["label_stats"])  # doctest: +SKIP
"""

# No `from __future__ import annotations`: TFX reads the component signatures at run time.

import json
import os
from typing import Any

import numpy as np
from tfx import v1 as tfx
from tfx.types import artifact, artifact_utils

from cdgt.components.label_stats_component import LabelFrequencies, load_stats
from cdgt_keras.features import LABELS, label_spec, labels_csr, stack_labels
from cdgt_keras.metrics import HEADLINE_METRICS

METRICS_FILE = "metrics.json"
# The artifact's properties: the headline figures, then the rest of the ranking figures (MLMD queries filter on them).
PROPERTIES = (*HEADLINE_METRICS, "p_at_3", "psp_at_1", "psp_at_3", "ndcg_at_5", "map")


class MultiLabelMetrics(artifact.Artifact):
    """A directory with metrics.json: {"split", "num_examples", "report": {overall|head|tail: {metric: v}}}."""

    TYPE_NAME = "cdgt.MultiLabelMetrics"


def serving_dir(model_uri: str) -> str:
    """The SavedModel inside a Model artifact (TFX writes it under Format-Serving)."""
    from tfx.utils import path_utils

    return path_utils.serving_model_path(model_uri)


def score_split(export_dir: str, file_pattern: str, num_labels: int,
                batch_size: int = 1024) -> tuple[Any, Any, Any, Any]:
    """(scores [n, L], truth csr [n, L], thresholds [L], the scores the decisions are read from [n, L]) from the
    exported model on gzipped tf.Examples (the last are the first unless the export serves `decision_scores`: a
    model whose tail decides apart)."""
    import tensorflow as tf

    loaded = tf.saved_model.load(export_dir)
    serve = loaded.signatures["serving_default"]
    files = sorted(tf.io.gfile.glob(file_pattern))
    if not files:
        raise FileNotFoundError(f"no examples match {file_pattern}")
    scores, deciding, truth = [], [], []
    spec = label_spec()
    for batch in tf.data.TFRecordDataset(files, compression_type="GZIP").batch(batch_size):
        out = serve(examples=batch)
        scores.append(out["scores"].numpy())
        deciding.append(out["decision_scores"].numpy() if "decision_scores" in out else scores[-1])
        truth.append(labels_csr(tf.io.parse_example(batch, spec)[LABELS], num_labels))
    return (np.concatenate(scores), stack_labels(truth, num_labels), loaded.thresholds.numpy(),
            np.concatenate(deciding))


def evaluate_export(export_dir: str, file_pattern: str, stats: dict[str, Any]) -> dict[str, Any]:
    """The multi-label report (overall / head / tail) of an exported model on one split."""
    from cdgt_keras.metrics import report
    from cdgt_keras.thresholds import apply_thresholds

    scores, truth, thresholds, deciding = score_split(export_dir, file_pattern, int(stats["num_labels"]))
    result = report(truth, scores, apply_thresholds(deciding, thresholds), head_labels=stats["head"],
                    tail_labels=stats["tail"], propensities=np.asarray(stats["propensities"], np.float64))
    return {"num_examples": int(truth.shape[0]), "num_labels": int(truth.shape[1]),
            "num_head_labels": len(stats["head"]), "num_tail_labels": len(stats["tail"]), "report": result}


@tfx.dsl.components.component
def MultiLabelEvaluator(
    examples: tfx.dsl.components.InputArtifact[tfx.types.standard_artifacts.Examples],
    model: tfx.dsl.components.InputArtifact[tfx.types.standard_artifacts.Model],
    label_stats: tfx.dsl.components.InputArtifact[LabelFrequencies],
    metrics: tfx.dsl.components.OutputArtifact[MultiLabelMetrics],
    split: tfx.dsl.components.Parameter[str] = "test",
) -> None:
    """Score `split` with the trained model and write metrics.json."""
    pattern = os.path.join(artifact_utils.get_split_uri([examples], split), "*")
    result = {"split": split, **evaluate_export(serving_dir(model.uri), pattern, load_stats(label_stats.uri))}
    os.makedirs(metrics.uri, exist_ok=True)
    with open(os.path.join(metrics.uri, METRICS_FILE), "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=1, default=float)
        handle.write("\n")
    for key in PROPERTIES:
        value = result["report"]["overall"].get(key)
        if value is not None and np.isfinite(value):
            metrics.set_float_custom_property(key, float(value))


def read_metrics(uri: str) -> dict[str, Any]:
    """metrics.json of a MultiLabelMetrics artifact."""
    with open(os.path.join(uri, METRICS_FILE), encoding="utf-8") as handle:
        return json.load(handle)
