"""Export a `cdgt train` run directory (model.keras, thresholds.json, data.json, featurizer.json) as a SavedModel.

Example:
    >>> export_run("runs/debtags", "serving/models/debtags/1")      # doctest: +SKIP
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_NEEDED = ("model.keras", "thresholds.json", "data.json")


def load_run(run_dir: str | Path) -> dict[str, Any]:
    """The pieces of a run an export needs: model, label names, thresholds, feature kind, width, TF-IDF."""
    run_dir = Path(run_dir)
    missing = [name for name in _NEEDED if not (run_dir / name).is_file()]
    if missing:
        hint = " (data.json is written by `cdgt train` since serving; re-run the training)" \
            if missing == ["data.json"] else ""
        raise FileNotFoundError(f"{run_dir} is not a `cdgt train` run directory: missing {', '.join(missing)}{hint}")
    import keras

    import cdgt_keras.model  # noqa: F401  (registers CDGTModel for loading)
    from cdgt_keras.featurizer import Featurizer

    data = json.loads((run_dir / "data.json").read_text())
    thresholds = json.loads((run_dir / "thresholds.json").read_text())["thresholds"]
    featurizer = None
    if (run_dir / "featurizer.json").is_file():
        featurizer = Featurizer.from_dict(json.loads((run_dir / "featurizer.json").read_text()))
    elif data["feature_kind"] == "text":
        raise FileNotFoundError(f"{run_dir}/featurizer.json is missing: a text model needs its vocabulary (runs of "
                                "older versions wrote tfidf.json instead: train it again)")
    model = keras.saving.load_model(run_dir / "model.keras", compile=False)
    config = json.loads((run_dir / "config.json").read_text()) if (run_dir / "config.json").is_file() else {}
    return {"model": model, "label_names": data["label_names"], "thresholds": thresholds,
            "feature_kind": data["feature_kind"], "input_width": int(data["input_width"]),
            "featurizer": featurizer,
            "config": config}


def export_run(run_dir: str | Path, export_dir: str | Path, top_k: int = 5) -> str:
    """Write the SavedModel of a `cdgt train` run to `export_dir` (serving/export.py signatures)."""
    from cdgt.serving.export import export_keras_model

    run = load_run(run_dir)
    return export_keras_model(run["model"], str(export_dir), run["label_names"], run["thresholds"],
                              feature_kind=run["feature_kind"], input_width=run["input_width"],
                              featurizer=run["featurizer"],
                              top_k=top_k, metadata={"config": run["config"], "source": str(run_dir)})
