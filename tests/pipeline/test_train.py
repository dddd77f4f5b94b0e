"""`cdgt train`: the fast path writes a model and metrics that a reload reproduces; the CLI stays light."""

from __future__ import annotations

import json
import subprocess
import sys

import keras
import numpy as np
import pytest

from cdgt.pipeline.cli import main
from cdgt.pipeline.train import load_embedded
from cdgt_keras import metrics as M
from cdgt_keras.config import CDGTConfig
from cdgt_keras.evaluation import predict_probs
from cdgt_keras.thresholds import apply_thresholds

KEYS = ["micro_f1", "macro_f1", "rare_f1", "map", "hamming_loss", "p_at_1", "p_at_3", "p_at_5",
        "ndcg_at_1", "ndcg_at_3", "ndcg_at_5", "psp_at_1", "psp_at_3", "psp_at_5"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("train")
    code = main(["train", "--output", str(out), "--quiet", "--set", "epochs=3", "--set", "encoder_hidden=64",
                 "--set", "head_hidden=32"])
    assert code == 0
    return out


def test_writes_every_artifact_with_snake_case_metrics(run_dir):
    for name in ("model.keras", "config.json", "thresholds.json", "metrics.json", "history.json"):
        assert (run_dir / name).is_file(), name
    assert any((run_dir / "logs").rglob("events.out.tfevents*"))
    metrics = json.loads((run_dir / "metrics.json").read_text())
    for key in KEYS:
        assert 0.0 <= metrics[key] <= 1.0, key
    for row in ("head", "tail"):
        for key in KEYS:
            if key != "rare_f1":
                assert f"{row}/{key}" in metrics
    assert metrics["rare_f1"] == metrics["tail/micro_f1"]
    assert CDGTConfig.load(run_dir / "config.json").epochs == 3
    assert CDGTConfig.load(run_dir / "config.json").preset_name == "recommended"  # synthetic dense: not text


def test_reloaded_model_reproduces_the_reported_metrics(run_dir):
    model = keras.models.load_model(run_dir / "model.keras")
    thresholds = np.array(json.loads((run_dir / "thresholds.json").read_text())["thresholds"], dtype=np.float32)
    config = CDGTConfig.load(run_dir / "config.json")
    test = load_embedded("synthetic", seed=config.seed)["test"]
    probs = predict_probs(model, test, batch_size=config.batch_size)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    pred = apply_thresholds(probs, thresholds)
    assert M.micro_f1(test.labels, pred) == pytest.approx(metrics["micro_f1"], abs=1e-6)
    assert M.precision_at_k(test.labels, probs, 3) == pytest.approx(metrics["p_at_3"], abs=1e-6)


def test_help_does_not_import_tensorflow():
    code = ("import sys\nfrom cdgt.pipeline.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules, 'TF imported by --help'\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "train" in result.stdout and "data" in result.stdout


def test_bad_override_is_a_clear_error(capsys, tmp_path):
    assert main(["train", "--output", str(tmp_path), "--set", "fusion=median"]) == 1
    err = capsys.readouterr().err
    assert "fusion='median' is not allowed" in err and "attention" in err


def test_unknown_dataset_is_a_clear_error(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("CDGT_DATA_DIR", str(tmp_path))
    (tmp_path / "yeast").mkdir()
    assert main(["train", "--dataset", "no-such-set", "--output", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "no-such-set" in err and "yeast" in err and "CDGT_DATA_DIR" in err


@pytest.mark.data
def test_named_dataset_is_built_from_the_data_dir_once(data_dir, tmp_path, monkeypatch):
    """`cdgt train --dataset yeast` builds $CDGT_DATA_DIR/yeast into runs/data/yeast, as `cdgt run` does."""
    monkeypatch.setenv("CDGT_DATA_DIR", str(data_dir))
    monkeypatch.chdir(tmp_path)
    args = ["train", "--dataset", "yeast", "--quiet", "--set", "epochs=1", "--set", "encoder_hidden=32",
            "--set", "head_hidden=16"]
    assert main([*args, "--output", "one"]) == 0
    manifest = tmp_path / "runs" / "data" / "yeast" / "manifest.json"
    built = manifest.stat().st_mtime_ns
    metrics = json.loads((tmp_path / "one" / "metrics.json").read_text())
    assert metrics["num_test"] == 917 and metrics["report"]["overall"]["micro_f1"] > 0
    assert main([*args, "--output", "two"]) == 0
    assert manifest.stat().st_mtime_ns == built  # reused, not rebuilt


def test_a_diverging_training_fails_and_writes_no_model(tmp_path, capsys):
    """Issue 16 item 1: a NaN loss is an error (exit 1, one line naming the epoch), not a saved model of NaNs."""
    out = tmp_path / "diverged"
    code = main(["train", "--output", str(out), "--quiet", "--set", "learning_rate=1e30", "--set", "epochs=2",
                 "--set", "encoder_hidden=16", "--set", "head_hidden=8"])
    assert code == 1
    assert "training diverged: the loss is nan" in capsys.readouterr().err
    assert not (out / "model.keras").exists() and not (out / "metrics.json").exists()


@pytest.mark.parametrize("value", ["inf", "nan", "-inf"])
def test_config_numbers_must_be_finite(value):
    with pytest.raises(ValueError, match="expected a finite number"):
        CDGTConfig().with_overrides([f"beta={value}"])


def test_a_used_output_folder_is_refused_without_overwrite(run_dir, capsys):
    """Issue 16 item 7: a second run into a used folder would mix two runs' TensorBoard files."""
    assert main(["train", "--output", str(run_dir), "--quiet", "--set", "epochs=1"]) == 1
    err = capsys.readouterr().err
    assert "is not empty" in err and "pass --overwrite" in err
    assert (run_dir / "model.keras").is_file()  # untouched


def test_a_full_disk_while_saving_leaves_no_truncated_model(tmp_path, monkeypatch, capsys):
    """Issue 16 item 8: the model is written to a temporary file and renamed; a failure is one line and leaves
    neither a truncated model.keras nor a metrics.json claiming a finished run."""

    def full_disk(self, filepath, *args, **kwargs):
        with open(filepath, "wb") as handle:
            handle.write(b"PK\x03\x04 half a zip")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(keras.Model, "save", full_disk)
    out = tmp_path / "full"
    assert main(["train", "--output", str(out), "--quiet", "--set", "epochs=1", "--set", "encoder_hidden=16",
                 "--set", "head_hidden=8"]) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(("model", ".model", "metrics"))) == []


def test_metrics_count_labels_without_a_training_positive(run_dir, tmp_path):
    """Issue 16 item 6, the metrics half: how many labels the model could not learn at all."""
    import scipy.sparse as sp

    from cdgt.pipeline.train import run_training
    from cdgt_keras.data import MultiLabelData

    assert json.loads((run_dir / "metrics.json").read_text())["num_labels_without_train_positive"] == 0
    splits = load_embedded("synthetic")
    labels = splits["train"].labels.tolil()
    labels[:, [3, 7]] = 0  # two labels lose every training positive
    splits["train"] = MultiLabelData(splits["train"].features, sp.csr_matrix(labels), splits["train"].label_names)
    config = CDGTConfig(epochs=1, encoder_hidden=(16,), head_hidden=())
    metrics = run_training(config, splits, tmp_path / "run", verbose=0)
    assert metrics["num_labels_without_train_positive"] == 2
