"""Bench peers at scale (issue 14): Omikuji's Bonsai settings and LibMultiLabel's tree as peer methods, and every
run's peak RSS beside its wall time, in the result file and the report's tables. Tiny data only (the embedded
synthetic set)."""

from __future__ import annotations

import json
import time

import pytest

from cdgt.bench import memory
from cdgt.bench.memory import peak_rss
from cdgt.bench.methods import PEERS, resolve
from cdgt.bench.report import write_report
from cdgt.bench.runner import RunSpec, run
from cdgt_keras.config import CDGTConfig

MIB = 1 << 20


def test_peak_rss_is_the_runs_own_peak_not_the_processs():
    """ru_maxrss would give the second block the first block's 200 MiB; the reset high-water mark does not."""
    with peak_rss() as big:
        block = b"x" * (200 * MIB)
        del block
    with peak_rss() as small:
        block = b"x" * (40 * MIB)
        del block
    assert big.how == memory.KERNEL and small.how == memory.KERNEL
    assert big.peak_rss_mib - big.start_rss_mib >= 190
    assert 38 <= small.peak_rss_mib - small.start_rss_mib < 120


def test_peak_rss_samples_where_the_high_water_mark_cannot_be_reset(tmp_path, monkeypatch):
    monkeypatch.setattr(memory, "CLEAR_REFS", tmp_path / "no-such-dir" / "clear_refs")
    with peak_rss() as sampled:
        block = b"x" * (100 * MIB)
        time.sleep(0.2)  # several sampling periods
        del block
    assert sampled.how == memory.SAMPLED
    assert sampled.peak_rss_mib - sampled.start_rss_mib >= 95


def test_peer_names_resolve_and_take_only_the_text_options():
    from cdgt.bench.peers import PEERS as PEER_METHODS
    from cdgt.bench.peers import peer

    assert set(PEERS) == set(PEER_METHODS) >= {"omikuji_bonsai", "libmultilabel_tree"}
    assert resolve("omikuji_bonsai").kind == "omikuji_bonsai"
    assert "cluster_k=100, cluster_balanced=False, max_depth=3" in peer("omikuji_bonsai").settings
    with pytest.raises(ValueError, match=r"a peer takes only the text features' options .* not max_depth"):
        resolve("omikuji_bonsai[max_depth=2]")
    with pytest.raises(ValueError, match="not alpha"):
        resolve("omikuji[text_ngrams=1,alpha=0.3]")
    flipped = not CDGTConfig().text_identifier_parts
    method = resolve(f"omikuji[text_identifier_parts={str(flipped).lower()},text_ngrams=1]")
    assert method.name == f"omikuji[text_identifier_parts={str(flipped).lower()},text_ngrams=1]"
    assert method.config().text_identifier_parts is flipped and method.config().text_ngrams == 1
    with pytest.raises(ValueError, match="unknown peer 'bonsai'"):
        peer("bonsai")


def test_a_runs_text_options_decide_the_features_it_gets(tmp_path, monkeypatch):
    """`omikuji[text_ngrams=1]` and `recommended[text_ngrams=1]` are featurized under their own options, cached apart
    from the default features; a dense or sparse set ignores them."""
    from cdgt.bench import datasets, runner

    built = []

    def fake_built(name, root, cache_dir, options):
        built.append(options)
        return datasets.BenchData(name, {})

    monkeypatch.setattr(datasets, "_built", fake_built)
    monkeypatch.setattr(datasets, "_LOADED", {})
    tmp_path.joinpath("data").mkdir()
    for name in ("recommended[text_ngrams=1]", "omikuji[text_ngrams=1]", "omikuji", "recommended"):
        datasets.load_dataset("debtags", tmp_path / "data", tmp_path / "cache", resolve(name).config())
    assert [options["text_ngrams"] for options in built] == [1, CDGTConfig().text_ngrams]
    assert built[0] == datasets.feature_options(CDGTConfig().replace(text_ngrams=1))

    seen = []
    monkeypatch.setattr(runner, "load_dataset", lambda name, root, cache, features: seen.append(features) or 1 / 0)
    with pytest.raises(ZeroDivisionError):
        runner.run(RunSpec("debtags", resolve("rarity_bce[text_min_df=3]"), 0), tmp_path / "results")
    assert seen[0].text_min_df == 3


@pytest.fixture(scope="module")
def synthetic_runs(tmp_path_factory):
    """Every installed peer and one short run of ours on the embedded synthetic set, in one results folder."""
    from cdgt.bench.peers import available

    output = tmp_path_factory.mktemp("bench")
    specs = [RunSpec("synthetic", resolve(p), 0) for p in PEERS if available(p)]
    specs.append(RunSpec("synthetic", resolve("rarity_bce[epochs=1,min_steps_per_epoch=1]"), 0, row="rarity_bce"))
    for spec in specs:
        assert run(spec, output / "results") == "done"
    return output, {spec.row or spec.method.name: json.loads(spec.path(output / "results").read_text())
                    for spec in specs}


def test_every_run_records_its_peak_rss_beside_its_wall_time(synthetic_runs):
    _, results = synthetic_runs
    assert {"omikuji_bonsai", "libmultilabel_tree", "rarity_bce"} <= set(results)
    for name, result in results.items():
        mem = result["memory"]
        assert mem["how"] == memory.KERNEL, name
        assert 0 < mem["start_rss_mib"] <= mem["peak_rss_mib"], name
        assert result["timing"]["train_seconds"] > 0, name
        if name != "rarity_bce":  # ours trains one short epoch here; the synthetic set is easy for every peer
            assert result["metrics"]["overall"]["p_at_1"] > 0.5, name
    ours = results["rarity_bce"]
    assert ours["memory"]["start_rss_mib"] > 200  # TensorFlow was imported before the run was measured
    assert results["omikuji_bonsai"]["config"]["settings"].startswith("Omikuji, Bonsai settings")
    assert results["libmultilabel_tree"]["config"]["settings"].startswith("LibMultiLabel train_tree")


def test_the_report_shows_peak_rss_next_to_train_seconds(synthetic_runs):
    output, results = synthetic_runs
    write_report(output)
    lines = (output / "REPORT.md").read_text().splitlines()
    header = next(line for line in lines if line.startswith("| method | Micro-F1 |"))
    assert "| train s | peak RSS MiB | infer s |" in header
    row = next(line for line in lines if line.startswith("| omikuji |"))  # the main table's peer row
    cells = [c.strip() for c in row.strip("|").split("|")]
    column = [c.strip() for c in header.strip("|").split("|")].index("peak RSS MiB")
    assert cells[column] == f"{results['omikuji']['memory']['peak_rss_mib']:.0f} ± 0"
    peers = [line for line in lines if line.startswith("| synthetic | rarity_bce | ")]
    assert {line.split("|")[3].strip() for line in peers} >= {"omikuji_bonsai", "libmultilabel_tree"}
    assert any("peak RSS" in line for line in peers)  # compared as a cost, lower is better


def test_curves_from_counts_equal_the_dense_computation():
    """The tail PR curve, the long-tail curve and the frequency buckets, computed from what the chunked evaluation
    keeps, equal the same figures computed on dense [n, L] arrays."""
    import numpy as np
    import scipy.sparse as sp

    from cdgt.bench.measures import TAIL_PR_GRID, frequency_buckets, long_tail_curve, tail_pr_curve
    from cdgt_keras.metrics import _dense_topk, micro_f1
    from cdgt_keras.thresholds import ThresholdCounts, apply_thresholds

    rng = np.random.default_rng(0)
    n, num_labels = 120, 30
    y = sp.csr_matrix(rng.random((n, num_labels)) < 0.1)
    scores = rng.random((n, num_labels)).astype(np.float32)
    train_counts = rng.integers(0, 70, num_labels)
    tau = np.full(num_labels, 0.6, np.float32)
    pred = apply_thresholds(scores, tau)
    tail = np.arange(20, 30)

    counts = ThresholdCounts(tail.size, grid=TAIL_PR_GRID)
    counts.add(scores[:, tail], y[:, tail])
    curve = tail_pr_curve(counts)
    truth = y[:, tail].toarray()
    for t, precision, recall in zip(curve["threshold"], curve["precision"], curve["recall"]):
        decided = scores[:, tail] > np.float32(t)
        tp = (decided & truth).sum()
        assert precision == pytest.approx(tp / decided.sum() if decided.sum() else 1.0)
        assert recall == pytest.approx(tp / truth.sum())

    per_label = (np.asarray(y.multiply(pred).sum(axis=0)).ravel(), np.asarray(y.sum(axis=0)).ravel(), pred.sum(axis=0))
    lt = long_tail_curve(per_label, train_counts, bins=4)
    from cdgt_keras.labels import label_order

    groups = np.array_split(label_order(train_counts.astype(float)), 4)
    assert lt["f1"] == pytest.approx([micro_f1(y[:, g], pred[:, g]) for g in groups])

    top = _dense_topk(scores, 5)
    buckets = frequency_buckets(y, (top, np.take_along_axis(scores, top, 1)), per_label, train_counts)
    bucket_of = {0: "0", 1: "1", 2: "2"}
    names = np.array([bucket_of.get(c) or next(f"{2 ** (b - 1) + 1}-{2 ** b}" for b in range(2, 12)
                                                 if c <= 2 ** b) for c in train_counts])
    hit = np.zeros((n, num_labels), bool)
    np.put_along_axis(hit, top, True, axis=1)
    dense = y.toarray().astype(bool)
    for name, labels, f1, recall in zip(buckets["train_count"], buckets["labels"], buckets["f1"],
                                        buckets["recall_at_k"]):
        cols = np.flatnonzero(names == name)
        assert labels == cols.size > 0
        assert f1 == pytest.approx(micro_f1(y[:, cols], pred[:, cols]))
        assert recall == pytest.approx((hit[:, cols] & dense[:, cols]).sum() / max(dense[:, cols].sum(), 1))
    assert sum(buckets["labels"]) == num_labels


def test_the_long_tail_table_shows_each_methods_buckets_over_seeds():
    from cdgt.bench.report import long_tail_table

    def run(method, seed, f1):
        buckets = {"k": 5, "train_count": ["2", "3-4"], "labels": [10, 4], "test_positives": [7, 9],
                   "f1": f1, "recall_at_k": [0.5, 0.25]}
        return {"dataset": {"name": "deps"}, "method": {"name": method, "row": method, "kind": "cdgt"},
                "seed": seed, "metrics": {"overall": {"p_at_1": 0.5}}, "curves": {"buckets": buckets}}

    results = [run("recommended", 0, [0.1, 0.3]), run("recommended", 1, [0.3, 0.3]), run("omikuji", 0, [0.2, 0.4])]
    lines = long_tail_table(results, "deps", ["recommended", "omikuji", "bce"])
    assert "| training count | 2 | 3-4 |" in lines
    assert "| labels / test positives | 10 / 7 | 4 / 9 |" in lines
    assert "| recommended (2) | 20.0 / 50.0 (± 10.0 / 0.0) | 30.0 / 25.0 (± 0.0 / 0.0) |" in lines
    assert "| omikuji (1) | 20.0 / 50.0 | 40.0 / 25.0 |" in lines and not any("bce" in line for line in lines)
    assert long_tail_table(results, "bibtex", ["recommended"]) == []
