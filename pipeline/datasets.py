"""Named data sets: one registry for `cdgt run --dataset`, `cdgt train --dataset`, `cdgt kubeflow` and `cdgt bench`.

A name is an embedded set (`synthetic`, `synthetic-sparse`: written by cdgt itself), a registered set read from
CDGT_DATA_DIR (default ../shared/data: yeast, emotions, bibtex, corel5k, delicious, debtags, deps, deps-all), a
registered set's rare-focused variant (`corel5k-R30`, `debtags-R50`: 30 % / 50 % of the rarest labels' training
positives removed: a harder long tail), or any other folder under CDGT_DATA_DIR (its format recognised from its
files). A cached build whose label rule differs from its registered spec is rebuilt.

Example:
    >>> parse_name("debtags-R30")
    ('debtags', 0.3)
    >>> DATASETS["deps"].min_label_count, DATASETS["deps-all"].min_label_count
    (2, 0)
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# Named data sets cdgt writes itself (no data directory): name -> the synthetic generator's arguments.
EMBEDDED: dict[str, dict[str, bool]] = {
    "synthetic": {"sparse": False},
    "synthetic-sparse": {"sparse": True},
}


@dataclass(frozen=True)
class DatasetSpec:
    """Where a data set comes from and how it is built (recorded with every benchmark run)."""

    format: str  # arff | debian | synthetic
    source: str = ""  # folder under the data root
    task: str | None = None
    min_label_count: int = 0
    note: str = ""


DATASETS: dict[str, DatasetSpec] = {
    "yeast": DatasetSpec("arff", "yeast"),
    "emotions": DatasetSpec("arff", "emotions"),
    "bibtex": DatasetSpec("arff", "bibtex"),
    "corel5k": DatasetSpec("arff", "corel5k"),
    "delicious": DatasetSpec("arff", "delicious"),
    "debtags": DatasetSpec("debian", "debian-bookworm", task="debtags"),
    # Debian dependency targets: 41k in all, 19k of them seen once. `deps` keeps the ~18.6k targets a model can
    # learn from and evaluate (>= 2 training positives); `deps-all` keeps every target. Evaluation at this size runs
    # on score chunks (cdgt_keras.chunked_eval), never a dense [n, L] matrix.
    "deps": DatasetSpec("debian", "debian-bookworm", task="deps", min_label_count=2,
                        note="dependency targets with >= 2 training positives (--min-label-count 2)"),
    "deps-all": DatasetSpec("debian", "debian-bookworm", task="deps", note="every dependency target"),
    "synthetic": DatasetSpec("synthetic", note="cdgt_keras.synthetic: 1,500 examples, 40 Zipf labels, seed 0"),
}
_RARE = re.compile(r"^(?P<base>[a-z0-9]+)-R(?P<percent>\d{1,2})$")


def data_root() -> Path:
    """CDGT_DATA_DIR, default ../shared/data relative to the repository."""
    return Path(os.environ.get("CDGT_DATA_DIR", REPO.parent / "shared" / "data")).resolve()


def parse_name(name: str) -> tuple[str, float]:
    """("corel5k", 0.3) for "corel5k-R30"; (name, 0.0) for a plain registered name; ValueError otherwise."""
    match = _RARE.match(name)
    base, fraction = (match["base"], int(match["percent"]) / 100) if match else (name, 0.0)
    if base not in DATASETS or (fraction and DATASETS[base].format == "synthetic"):
        raise ValueError(f"unknown data set {name!r}; choose from {sorted(DATASETS)} or NAME-R30 / NAME-R50")
    return base, fraction


def text_features(name: str) -> bool:
    """Whether the named set's features are raw text (the Debian catalogue's descriptions), without building it."""
    try:
        return DATASETS[parse_name(name)[0]].format == "debian"
    except ValueError:
        return False


def known_names(root: Path | None = None) -> list[str]:
    """Every name `build_named` accepts without a -R suffix: embedded, registered, and folders under the root."""
    root = root or data_root()
    folders = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    return list(dict.fromkeys([*EMBEDDED, *_registered(), *folders]))


def _registered() -> list[str]:
    """The registered names read from the data root (DATASETS without the embedded ones), in registry order."""
    return [n for n in DATASETS if DATASETS[n].format != "synthetic"]


def dataset_help(built: str) -> str:
    """The --dataset help of `cdgt train`, `cdgt run` and `cdgt kubeflow` (each takes every name build_named
    does), from this registry, ending with where the command builds the set (`built`).

        >>> dataset_help("built on first use").startswith("synthetic, synthetic-sparse (embedded; default synthetic)")
        True
    """
    return (f"{', '.join(EMBEDDED)} (embedded; default synthetic), a named set read from CDGT_DATA_DIR "
            f"({', '.join(_registered())}, NAME-R30 / NAME-R50), or any folder under it; {built}")


def add_source_arguments(parser: Any, built: str,
                         data_help: str = "a directory built by `cdgt data build`") -> None:
    """The mutually exclusive --dataset NAME / --data DIR of `cdgt train`, `cdgt run` and `cdgt kubeflow`."""
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--dataset", default="synthetic", metavar="NAME", help=dataset_help(built))
    source.add_argument("--data", metavar="DIR", type=Path, help=data_help)


def build_named(name: str, cache_dir: Path, beam: list[str] | None = None, *, root: Path | None = None,
                log: Callable[[str], None] = lambda _: None) -> Path:
    """The built directory `cache_dir/name`, running `components.example_gen.build` on first use only.

    Embedded sets are written by cdgt (seed 0); registered and -R names follow DATASETS; any other name is a
    folder under the data root. `beam`: Beam pipeline options (default: the local DirectRunner, beam_options).
    """
    out = Path(cache_dir) / name
    if (out / "manifest.json").is_file() and not _stale(out, name):
        return out
    root = Path(root) if root else data_root()
    if name in EMBEDDED:
        from cdgt.components.synthetic_source import write_synthetic

        log(f"writing the embedded {name} data to {out}")
        write_synthetic(str(out), seed=0, overwrite=True, **EMBEDDED[name])
        return out
    if not root.is_dir():
        raise FileNotFoundError(f"data set {name!r}: data root {root} not found (set CDGT_DATA_DIR)")
    try:
        base, fraction = parse_name(name)
    except ValueError:
        return _build_folder(name, root, out, beam, log)
    spec, rare_k = DATASETS[base], 0
    if fraction:
        from cdgt_keras.config import CDGTConfig
        from cdgt_keras.records import read_manifest

        num_labels = int(read_manifest(build_named(base, cache_dir, beam, root=root, log=log))["num_labels"])
        rare_k = math.ceil(CDGTConfig.tail_fraction * num_labels)
    source = root / spec.source
    if not source.is_dir():
        raise FileNotFoundError(f"data set {name!r}: no folder {source} (set CDGT_DATA_DIR)")
    _build(spec.format, source, out, beam, log, task=spec.task, min_label_count=spec.min_label_count,
           rare_fraction=fraction, rare_k=rare_k)
    return out


def _stale(out: Path, name: str) -> bool:
    """Whether the cached build of a registered name kept other labels than its spec says (an older registry),
    was written before each split's records were put in id order (its order depended on the build's process), or
    is an ARFF build without its feature names (what label texts are matched to: cdgt_keras.label_text)."""
    spec = DATASETS.get(name)
    if spec is None or spec.format == "synthetic":
        return False
    from cdgt_keras.records import RECORD_ORDER

    manifest = json.loads((out / "manifest.json").read_text())
    options = manifest.get("options", {})
    return (int(options.get("min_label_count", 0)) != spec.min_label_count
            or manifest.get("record_order") != RECORD_ORDER
            or (spec.format == "arff" and "feature_names" not in manifest))


def _build_folder(name: str, root: Path, out: Path, beam: list[str] | None, log: Callable[[str], None]) -> Path:
    source = root / name
    if not source.is_dir():
        raise FileNotFoundError(f"data set {name!r}: not a registered name and no folder {source} "
                                f"(set CDGT_DATA_DIR); known: {', '.join(known_names(root))}")
    names = [p.name.lower() for p in source.iterdir()]
    fmt = ("arff" if any(".arff" in n for n in names) else "debian" if any(n.startswith("packages") for n in names)
           else "csv" if any(".csv" in n for n in names) else "xmc")
    _build(fmt, source, out, beam, log, task="debtags" if fmt == "debian" else None)
    return out


def _build(fmt: str, source: Path, out: Path, beam: list[str] | None, log: Callable[[str], None],
           **options: object) -> None:
    from cdgt.components.example_gen import BuildOptions, build
    from cdgt.components.formats.sources import make_source
    from cdgt.pipeline.beam_options import beam_pipeline_args

    task = options.get("task")
    log(f"building {source} ({fmt}{', task ' + str(task) if task else ''}) into {out}")
    started = time.monotonic()
    build(make_source(fmt, [str(source)], **({"task": task} if fmt == "debian" else {})),
          BuildOptions(out=str(out), overwrite=True, **options),  # type: ignore[arg-type]
          beam or beam_pipeline_args([]))
    log(f"built in {time.monotonic() - started:.1f} s")
