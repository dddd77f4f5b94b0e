"""Named benchmark data sets: built once from CDGT_DATA_DIR into a cache with components' build, then loaded.

Every method sees the same splits and the same features: cdgt_keras.featurizer fitted on train with the default
CDGTConfig's text options (`pipeline.train.load_data`: dense z-scored, sparse as stored, TF-IDF for text), the
features `cdgt train`, the TFX Transform and the exported model use; a method that sets a text option
(`recommended[text_ngrams=1]`, `omikuji[text_identifier_parts=false]`) gets the features those options make.
"-R" variants ("corel5k-R30", "debtags-R50") remove 30 % / 50 % of the training positives of the rarest
ceil(tail_fraction · L) labels (`cdgt data build --rare-variant`).

Example:
    >>> data = load_dataset("yeast", data_root="../shared/data", cache_dir="runs/bench-data")  # doctest: +SKIP
    >>> data.splits["train"].num_labels, data.sources[0]["sha256"][:8]  # doctest: +SKIP
    (14, '...')
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from cdgt.pipeline.datasets import DATASETS, build_named, data_root, parse_name
from cdgt_keras.config import CDGTConfig
from cdgt_keras.data import MultiLabelData
from cdgt_keras.text import TEXT_CONFIG_FIELDS

REPO = Path(__file__).resolve().parents[1]
__all__ = ["DATASETS", "BenchData", "build_dataset", "data_root", "load_dataset", "parse_name", "shape_facts"]


@dataclass(frozen=True)
class BenchData:
    """Loaded splits plus what a result file records about them."""

    name: str
    splits: dict[str, MultiLabelData]
    sources: list[dict[str, str]] = field(default_factory=list)  # [{"path", "sha256"}] from the manifest
    facts: dict[str, Any] = field(default_factory=dict)


def build_dataset(name: str, root: Path, cache_dir: Path) -> Path:
    """The built directory of `name` under `cache_dir` (pipeline.datasets.build_named, in-memory DirectRunner)."""
    parse_name(name)  # benchmarks take registered names only
    return build_named(name, cache_dir, ["--direct_running_mode=in_memory"], root=root)


_LOADED: dict[tuple[Any, ...], BenchData] = {}


def feature_options(config: CDGTConfig | None = None) -> dict[str, Any]:
    """The text options of `config` (default: CDGTConfig()), the fields that decide a text set's features."""
    config = config or CDGTConfig()
    return {name: getattr(config, name) for name in TEXT_CONFIG_FIELDS}


def load_dataset(name: str, root: Path | None = None, cache_dir: Path | None = None,
                 features: CDGTConfig | None = None) -> BenchData:
    """Splits of `name` (built on first use, cached in memory for the rest of the process), a text set featurized
    under the text options of `features` (default: CDGTConfig()'s).

    The cached arrays are read-only: every run of a process shares them, and a method that changed them in place
    would silently change the data of the runs after it (it raises instead).
    """
    root = Path(root) if root else data_root()
    cache_dir = Path(cache_dir) if cache_dir else REPO / "runs" / "bench-data"
    options = feature_options(features)
    key = (name, str(cache_dir), *sorted(options.items()))
    if key not in _LOADED:
        data = _synthetic() if name == "synthetic" else _built(name, root, cache_dir, options)
        for split in data.splits.values():
            freeze(split.features)
            freeze(split.labels)
        _LOADED[key] = data
    return _LOADED[key]


def freeze(matrix: Any) -> None:
    """Make a numpy array or a scipy sparse matrix read-only in place (its data, indices and indptr)."""
    parts = [getattr(matrix, a) for a in ("data", "indices", "indptr") if hasattr(matrix, a)]
    for array in parts if sp.issparse(matrix) else [matrix]:
        if isinstance(array, np.ndarray):
            array.flags.writeable = False


def _built(name: str, root: Path, cache_dir: Path, options: dict[str, Any]) -> BenchData:
    from cdgt.pipeline.train import load_data
    from cdgt_keras.records import read_manifest

    if not root.is_dir():
        raise FileNotFoundError(f"data root {root} not found (set CDGT_DATA_DIR)")
    directory = build_dataset(name, root, cache_dir)
    manifest = read_manifest(directory)
    splits = load_data(directory, name, CDGTConfig().replace(**options))
    base, _ = parse_name(name)
    text = {"text_options": options} if manifest["feature_kind"] == "text" else {}
    facts = {"feature_kind": manifest["feature_kind"], **text, "split_rule": manifest.get("split_rule"),
             "build_options": manifest.get("options"), "note": DATASETS[base].note,
             "rare_variant": {k: v for k, v in manifest.get("rare_variant", {}).items() if k != "labels"}}
    return BenchData(name, splits, list(manifest.get("sources", [])), {**facts, **shape_facts(splits)})


def _synthetic() -> BenchData:
    from cdgt_keras.synthetic import synthetic_splits

    params = {"num_examples": 1500, "num_labels": 40, "seed": 0}
    splits = synthetic_splits(**params)
    digest = hashlib.sha256(repr(sorted(params.items())).encode()).hexdigest()
    return BenchData("synthetic", splits, [{"path": f"cdgt_keras.synthetic{params}", "sha256": digest}],
                     {"feature_kind": "dense", "note": DATASETS["synthetic"].note, **shape_facts(splits)})


def shape_facts(splits: dict[str, MultiLabelData]) -> dict[str, Any]:
    """Split sizes, L and feature count: `{"num_train": 1353, ..., "num_labels": 14, "num_features": 103}`."""
    out: dict[str, Any] = {f"num_{s}": d.num_examples for s, d in splits.items()}
    return {**out, "num_labels": splits["train"].num_labels, "num_features": splits["train"].num_features}
