"""`cdgt run` on the other inputs: a text data set (vocabulary + TF-IDF in tf.Transform; the export answers raw
strings) and the real yeast data built from CDGT_DATA_DIR."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from cdgt.components.formats.record import Record, to_tf_example
from cdgt.pipeline.cli import main
from cdgt.pipeline.local_runner import run_summary

QUICK = ["--set", "epochs=4", "--set", "learning_rate=0.005", "--set", "batch_size=64", "--set", "encoder_hidden=32",
         "--set", "head_hidden=16", "--set", "vocabulary_size=200"]
NUM_LABELS = 8


def _text_example(rng: np.random.Generator, split: str, row: int) -> Record:
    """1-3 labels (label 0 most frequent); each label adds two of its own words to filler text."""
    weights = 1.0 / np.arange(1, NUM_LABELS + 1)
    labels = sorted(rng.choice(NUM_LABELS, size=int(rng.integers(1, 4)), replace=False, p=weights / weights.sum()))
    words = [f"topic{label}word{rng.integers(0, 3)}" for label in labels for _ in range(2)]
    words += [f"filler{rng.integers(0, 50)}" for _ in range(8)]
    rng.shuffle(words)
    return Record(f"text-{split}:{row}", split, tuple(int(x) for x in labels), text=" ".join(words).capitalize() + ".")


def write_text_dataset(out: Path, sizes: dict[str, int], seed: int = 0) -> None:
    """A small built data directory with `text` features (the layout `cdgt data build` writes)."""
    rng = np.random.default_rng(seed)
    for split, size in sizes.items():
        path = out / split / "data-00000-of-00001.tfrecord.gz"
        path.parent.mkdir(parents=True)
        with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
            for row in range(size):
                writer.write(to_tf_example(_text_example(rng, split, row)))
    manifest = {"format": "test", "feature_kind": "text", "num_features": None, "num_labels": NUM_LABELS,
                "splits": {s: {"examples": n} for s, n in sizes.items()},
                "label_names": [f"topic{i}" for i in range(NUM_LABELS)]}
    (out / "manifest.json").write_text(json.dumps(manifest))


def test_text_data_trains_on_tfidf_and_serves_raw_strings(tmp_path):
    data = tmp_path / "text-data"
    write_text_dataset(data, {"train": 900, "validation": 150, "test": 150})
    out = tmp_path / "run"
    # TF-IDF alone: raw text would start from recommended_text, whose sentence encoder is tested on its own roads
    # (tests/pipeline/test_featurizer_paths.py, tests/cdgt_keras/test_sentence.py)
    assert main(["run", "--data", str(data), "--output", str(out), "--preset", "recommended", *QUICK]) == 0
    summary = run_summary(str(out / "metadata.sqlite"), "cdgt-text-data")
    assert summary.states["CdgtTrainer"] == "COMPLETE" and summary.states["Pusher"] == "COMPLETE"
    metrics = json.loads((Path(summary.artifacts["cdgt.MultiLabelMetrics"]["uri"]) / "metrics.json").read_text())
    assert metrics["report"]["overall"]["p_at_1"] > 0.5
    loaded = tf.saved_model.load(str(Path(summary.artifacts["Model"]["uri"]) / "Format-Serving"))
    result = loaded.signatures["predict"](text=tf.constant(["Topic3word1 filler2 TOPIC3WORD0, filler9.", ""]))
    scores = result["scores"].numpy()
    assert scores.shape == (2, NUM_LABELS) and np.isfinite(scores).all()
    assert scores[0, 3] > scores[1, 3]  # the words of label 3 raise its score


@pytest.mark.data
def test_run_builds_yeast_from_the_data_dir(data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("CDGT_DATA_DIR", str(data_dir))
    out = tmp_path / "yeast"
    assert main(["run", "--dataset", "yeast", "--output", str(out), "--set", "epochs=10"]) == 0
    assert (out / "data" / "yeast" / "manifest.json").is_file()
    summary = run_summary(str(out / "metadata.sqlite"), "cdgt-yeast")
    assert all(state == "COMPLETE" for state in summary.states.values()), summary.states
    assert summary.artifacts["ModelBlessing"]["properties"]["blessed"] == 1
    metrics = json.loads((Path(summary.artifacts["cdgt.MultiLabelMetrics"]["uri"]) / "metrics.json").read_text())
    assert metrics["num_labels"] == 14 and metrics["report"]["overall"]["micro_f1"] > 0.5
    loaded = tf.saved_model.load(summary.artifacts["PushedModel"]["properties"]["pushed_destination"])
    assert loaded.signatures["predict"](features=tf.zeros([2, 103]))["scores"].shape == (2, 14)
