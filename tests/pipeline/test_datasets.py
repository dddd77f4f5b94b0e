"""pipeline.datasets: one registry of named data sets for `cdgt run`, `cdgt train`, `cdgt kubeflow` and the bench."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import write_debian_catalogue

from cdgt.pipeline.datasets import DATASETS, build_named, known_names, parse_name


def _manifest(directory: Path) -> dict:
    return json.loads((directory / "manifest.json").read_text())


def test_parse_name():
    assert parse_name("yeast") == ("yeast", 0.0)
    assert parse_name("debtags-R30") == ("debtags", 0.3)
    for bad in ("nope", "synthetic-R30", "yeast-R100"):
        with pytest.raises(ValueError, match="unknown data set"):
            parse_name(bad)


def test_debian_names_read_the_catalogue_folder_with_their_task(tmp_path: Path):
    """`--dataset debtags` / `deps` build from <root>/debian-bookworm (not a folder named after the task)."""
    root = tmp_path / "data"
    write_debian_catalogue(root / DATASETS["debtags"].source)
    tags = _manifest(build_named("debtags", tmp_path / "cache", root=root))
    assert tags["task"] == "debtags" and tags["num_examples"] == 30
    assert tags["label_names"] == ["t::0", "t::1", "t::2"]
    deps = _manifest(build_named("deps", tmp_path / "cache", root=root))
    assert deps["task"] == "deps" and deps["options"]["min_label_count"] == 2


def _write_targets_catalogue(folder: Path, n: int = 60) -> dict[str, list[str]]:
    """Packages p0..p{n-1}, each depending on `common`, `t{i % 7}` and its own `own{i}` (one positive each);
    returns the targets per split (split by md5 of the package name, as the build does)."""
    import lz4.frame

    from cdgt.components.formats.splits import catalogue_split

    folder.mkdir(parents=True)
    stanzas, by_split = [], {"train": [], "validation": [], "test": []}
    for i in range(n):
        targets = ["common", f"t{i % 7}", f"own{i}"]
        by_split[catalogue_split(f"p{i}")] += targets
        stanzas.append(f"Package: p{i}\nDepends: {', '.join(targets)}\nDescription: s{i}\nDescription-md5: m{i}\n")
    with lz4.frame.open(folder / "Packages.lz4", "wt") as handle:
        handle.write("\n".join(stanzas))
    (folder / "Translation-en").write_text("\n".join(f"Package: p{i}\nDescription-md5: m{i}\nDescription-en: s{i}\n"
                                                     f" long {i}\n" for i in range(n)))
    return by_split


def test_deps_keeps_targets_with_two_training_positives_and_deps_all_keeps_every_target(tmp_path: Path):
    """The min-count rule of `deps` (>= 2 training positives) and `deps-all` (none), and what the manifests say."""
    from collections import Counter

    by_split = _write_targets_catalogue(tmp_path / "data" / "debian-bookworm")
    train = Counter(by_split["train"])
    every = set().union(*map(set, by_split.values()))
    deps = _manifest(build_named("deps", tmp_path / "cache", root=tmp_path / "data"))
    kept = sorted(t for t in every if train[t] >= 2)
    assert deps["label_names"] == kept and "common" in kept and not any(t.startswith("own") for t in kept)
    assert deps["labels_dropped_below_min_count"] == len(every) - len(kept)
    dropped = len(every) - len(kept)
    assert deps["label_rule"] == f"labels with >= 2 training positives ({len(kept)} kept, {dropped} dropped)"
    assert deps["options"]["min_label_count"] == 2 and deps["labels_without_training_positive"] == 0
    full = _manifest(build_named("deps-all", tmp_path / "cache", root=tmp_path / "data"))
    assert full["label_names"] == sorted(every) and full["labels_dropped_below_min_count"] == 0
    assert full["label_rule"] == f"every label seen in any split ({len(every)} kept)"
    assert full["labels_without_training_positive"] == sum(1 for t in every if not train[t])
    assert full["num_examples"] == deps["num_examples"] == 60


def test_a_cached_build_with_another_label_rule_is_rebuilt(tmp_path: Path):
    """A `deps` cache built under an older registry (another min count) is rebuilt, not reused."""
    _write_targets_catalogue(tmp_path / "data" / "debian-bookworm")
    out = build_named("deps", tmp_path / "cache", root=tmp_path / "data")
    manifest = _manifest(out)
    manifest["options"]["min_label_count"] = 20
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert _manifest(build_named("deps", tmp_path / "cache", root=tmp_path / "data"))["options"]["min_label_count"] == 2


def test_a_cached_build_from_before_the_id_order_is_rebuilt(tmp_path: Path):
    """A cache written before splits were put in id order (its record order depended on the process) is rebuilt."""
    _write_targets_catalogue(tmp_path / "data" / "debian-bookworm")
    out = build_named("deps", tmp_path / "cache", root=tmp_path / "data")
    manifest = _manifest(out)
    assert manifest["record_order"].startswith("by id")
    del manifest["record_order"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert "record_order" in _manifest(build_named("deps", tmp_path / "cache", root=tmp_path / "data"))


def test_a_built_name_is_reused_and_a_rare_variant_builds_its_base_first(tmp_path: Path):
    root = tmp_path / "data"
    write_debian_catalogue(root / "debian-bookworm")
    first = build_named("debtags", tmp_path / "cache", root=root)
    stamp = (first / "manifest.json").stat().st_mtime_ns
    assert build_named("debtags", tmp_path / "cache", root=root) == first
    assert (first / "manifest.json").stat().st_mtime_ns == stamp  # not rebuilt
    rare = _manifest(build_named("debtags-R50", tmp_path / "cache", root=root))
    assert rare["rare_variant"]["fraction"] == 0.5 and rare["rare_variant"]["k"] == 1  # ceil(0.2 * 3 labels)


def test_any_other_folder_under_the_root_is_built_by_its_format(tmp_path: Path):
    root = tmp_path / "data"
    write_debian_catalogue(root / "my-apt-lists")
    assert _manifest(build_named("my-apt-lists", tmp_path / "cache", root=root))["format"] == "debian"
    assert "my-apt-lists" in known_names(root) and "debtags" in known_names(root)


def test_unknown_or_missing_names_are_clear_errors(tmp_path: Path):
    root = tmp_path / "data"
    root.mkdir()
    with pytest.raises(FileNotFoundError, match=r"no folder .*nope.*known: synthetic, synthetic-sparse, yeast"):
        build_named("nope", tmp_path / "cache", root=root)
    with pytest.raises(FileNotFoundError, match=r"'yeast': no folder .*data/yeast"):
        build_named("yeast", tmp_path / "cache", root=root)
    with pytest.raises(FileNotFoundError, match=r"data root .* not found"):
        build_named("yeast", tmp_path / "cache", root=tmp_path / "absent")


def test_embedded_names_need_no_data_root(tmp_path: Path):
    out = build_named("synthetic", tmp_path / "cache", root=tmp_path / "absent")
    assert _manifest(out)["num_labels"] == 100
