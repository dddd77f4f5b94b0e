"""`cdgt bench quality`: the quick profile end to end, resumability, aggregation against numpy, verdict logic."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import scipy.sparse as sp

from cdgt.bench.aggregate import aggregate
from cdgt.bench.methods import PEERS, resolve, split_names
from cdgt.bench.report import write_report
from cdgt.bench.runner import load_results, write_json
from cdgt.bench.verdicts import all_verdicts, claim_alpha, claim_beats_baselines, claim_disagreement, verdict_text
from cdgt_keras.config import CDGTConfig

METRICS = ("micro_f1", "macro_f1", "rare_f1", "map", "p_at_1", "p_at_3", "p_at_5", "ndcg_at_1", "ndcg_at_3",
           "ndcg_at_5", "psp_at_1", "psp_at_3", "psp_at_5")


def fake_result(dataset: str, method: str, seed: int, **overall: float) -> dict:
    """A result dict shaped like the runner's, with chosen overall metrics (0.5 elsewhere)."""
    values = {k: overall.get(k, 0.5) for k in METRICS}
    return {
        "schema": 1, "dataset": {"name": dataset, "sources": [{"path": "x", "sha256": "0" * 64}], "num_labels": 5},
        "method": {"name": method, "row": method, "kind": "cdgt", "label": method}, "seed": seed, "config": {},
        "metrics": {"overall": values, "head": dict(values), "tail": dict(values)},
        "timing": {"train_seconds": 10.0 + seed, "inference_seconds": 1.0, "epoch_seconds": [5.0, 2.0, 2.0]},
        "curves": {"tail_pr": {"threshold": [0.5], "precision": [1.0], "recall": [0.5]},
                   "long_tail": {"bin": [1, 2], "mean_train_count": [9.0, 1.0], "f1": [0.6, 0.2]}},
        "environment": {"machine": {"cpu": "test", "cores": 2, "ram_gib": 1}, "packages": {}},
    }


def table_of(scores: dict[tuple[str, str], list[float]], key: str = "micro_f1"):
    return aggregate([fake_result(d, m, s, **{key: v}) for (d, m), vs in scores.items() for s, v in enumerate(vs)])


# ------------------------------------------------------------------------------------------------ aggregation
def test_aggregate_matches_numpy():
    rng = np.random.default_rng(0)
    values = {(d, m): rng.random(3) for d in ("yeast", "bibtex") for m in ("cdgt", "bce")}
    results = [fake_result(d, m, s, micro_f1=float(v[s]), rare_f1=float(1 - v[s]))
               for (d, m), v in values.items() for s in range(3)]
    table = aggregate(results)
    for key, v in values.items():
        summary = table[key]
        assert summary.n == 3 and summary.seeds == (0, 1, 2)
        assert summary.mean["overall/micro_f1"] == pytest.approx(np.mean(v))
        assert summary.std["overall/micro_f1"] == pytest.approx(np.std(v))
        assert summary.mean["overall/rare_f1"] == pytest.approx(np.mean(1 - v))
        assert summary.mean["timing/train_seconds"] == pytest.approx(11.0)
        assert summary.mean["timing/epoch_seconds"] == pytest.approx(2.0)  # the first (tracing) epoch left out


def test_aggregate_prefers_the_run_name_with_most_seeds():
    results = [fake_result("yeast", "cdgt", s, micro_f1=0.1) for s in range(3)]
    short = fake_result("yeast", "cdgt", 0, micro_f1=0.9)
    short["method"] = {"name": "cdgt[epochs=2]", "row": "cdgt"}
    summary = aggregate([*results, short])[("yeast", "cdgt")]
    assert summary.method == "cdgt" and summary.mean["overall/micro_f1"] == pytest.approx(0.1)


# ------------------------------------------------------------------------------------------------ verdicts
def test_verdict_text():
    assert verdict_text([True, True, True]) == "holds"
    assert verdict_text([False]) == "does not hold (holds on 0 of 1)"
    assert verdict_text([]) == "not measured"


def test_beats_baselines_holds_only_on_every_data_set():
    wins = table_of({("a", "cdgt"): [0.6, 0.62], ("a", "bce"): [0.5, 0.52], ("a", "omikuji"): [0.55, 0.55],
                     ("b", "cdgt"): [0.7, 0.7], ("b", "rarity_bce"): [0.6, 0.6]})
    v = claim_beats_baselines(wins, "overall/micro_f1", "Micro-F1", "paper")
    assert v.verdict == "holds" and "omikuji 55.00" in v.ours and "a: 61.00 ± 1.00" in v.ours
    loses = table_of({("a", "cdgt"): [0.6], ("a", "bce"): [0.5], ("b", "cdgt"): [0.5], ("b", "libmultilabel"): [0.8]})
    v = claim_beats_baselines(loses, "overall/micro_f1", "Micro-F1", "p")
    assert v.verdict == "does not hold (holds on 1 of 2)" and "b: 50.00 ± 0.00 vs libmultilabel 80.00" in v.ours


def test_alpha_claim_reads_the_argmax():
    scores = {("c", "cdgt[alpha=0.0]"): [0.1], ("c", "cdgt[alpha=0.3]"): [0.3], ("c", "cdgt"): [0.2],
              ("c", "cdgt[alpha=1.0]"): [0.05]}
    assert claim_alpha(table_of(scores, "rare_f1")).verdict == "holds"
    scores[("c", "cdgt[alpha=1.0]")] = [0.9]
    v = claim_alpha(table_of(scores, "rare_f1"))
    assert v.verdict.startswith("does not hold") and "best alpha 1.0" in v.ours


def test_disagreement_claim_leaves_out_data_without_overlap_labels():
    def run(dataset: str, head: list[float], tail: list[float]) -> dict:
        result = fake_result(dataset, "cdgt", 0)
        result["history"] = {"kl_head": head, "kl_tail": tail}
        return result

    # yeast's players share no label (every KL 0): nothing to disagree on, so it is not counted either way.
    v = claim_disagreement([run("yeast", [0.0, 0.0], [0.0, 0.0]), run("coco", [0.2, 0.1], [0.5, 0.3])])
    assert v.verdict == "holds" and "yeast" not in v.ours
    assert "coco: KL tail 0.400 vs head 0.150; tail first 0.500 -> last 0.300" in v.ours
    v = claim_disagreement([run("coco", [0.2, 0.1], [0.1, 0.3])])  # the tail's KL rises: the claim fails
    assert v.verdict == "does not hold (holds on 0 of 1)"
    assert claim_disagreement([run("yeast", [0.0], [0.0])]).verdict == "not measured"


def test_every_claim_has_a_verdict_without_results():
    verdicts = all_verdicts({}, [])
    assert len(verdicts) >= 10 and {v.verdict for v in verdicts} == {"not measured"}


# ------------------------------------------------------------------------------------------------ methods, report
def test_method_names_are_canonical():
    assert resolve("cdgt[alpha=0.5]").name == "cdgt"  # the default value: the same run
    assert resolve(SHIPPED).name == "recommended"  # exactly the preset's config: the preset's name
    assert resolve("cdgt[beta=0.1,alpha=0.3]").name == "cdgt[alpha=0.3,beta=0.1]"
    assert resolve("cdgt[head_hidden=512:256]").config(seed=2).head_hidden == (512, 256)
    assert resolve("rarity_bce").config().n_players == 1
    assert split_names("cdgt,cdgt[a=1,b=2],omikuji") == ["cdgt", "cdgt[a=1,b=2]", "omikuji"]
    with pytest.raises(ValueError, match="unknown method"):
        resolve("nope")
    with pytest.raises(ValueError, match="alpha"):
        resolve("cdgt[alpha=-1]")


SHIPPED = ("cdgt[alpha=2,beta=0,correctness=log_positives,rarity=inverse_sqrt,thresholds=shrunk,dropout=0.5,"
           "early_stopping_metric=p_at_5,encoder_hidden=512,head_hidden=,lr_schedule=cosine,epochs=10,"
           "learning_rate=0.006,min_steps_per_epoch=100,prior_bias=true,neighbours=30,neighbour_space=both,"
           "centroid_features=300,tail_memory=own,label_text=true,label_documents=true,validation_objective=false,"
           "adam_epsilon=5.98e-5,adam_epsilon_per_label=true,warmup_fraction=0.05,memory_list_cap=5000,"
           "threshold_shared_positives=20,label_epoch_growth=0.1]")


def test_the_shipped_preset_is_the_learner_grids_finalist():
    # the learner grid measured each tail tool under explicit overrides on the preset shipped before (1024 units);
    # the shipped preset is its row with prior biases and 512 units, stopping early on P@5, so its explicit
    # spelling resolves to the preset's name and shares its runs; round 5 added the neighbour votes, round 7 the
    # label centroids, round 11 the votes in the encoder's space beside the input's, round 12 the tail's own
    # weights, round 16 the label texts, round 17 left the objective's evaluation on validation out, round 18 added the
    # label documents, round 20 Adam's epsilon per label, round 21 the warm-up, round 23 the memories' list cap, round
    # 32 the frequent labels' shared threshold, round 34 the epochs grown with the label count; every row before
    # round 28 ran on text features without the parts of compound identifiers, every `recommended` row before round
    # 32 with each label's own threshold, and every one before round 34 with `epochs` at any label count
    from cdgt.bench.experiments import _LEARNER_F27, LEARNER, _on_f27

    finalist = resolve(_on_f27(next(r for r in _LEARNER_F27 if r.endswith("prior_bias=true,encoder_hidden=512]"))))
    assert finalist.name.startswith("cdgt[") and LEARNER.index("recommended") > LEARNER.index(finalist.name)
    # Keras' epsilon, before round 20
    eps7 = "adam_epsilon=1e-07,adam_epsilon_per_label=false,memory_list_cap=0"
    f27 = "label_epoch_growth=0.0,text_identifier_parts=false,threshold_shared_positives=0"
    eps7 = f"{eps7},{f27},warmup_fraction=0.0"
    assert resolve(f"recommended[{eps7},centroid_features=0,label_text=false,neighbours=0]").name in LEARNER
    assert resolve(f"recommended[{eps7},label_text=false]").name in LEARNER  # round 12's preset
    assert resolve(f"recommended[{eps7}]").name in LEARNER  # round 18's preset
    assert resolve(f"recommended[memory_list_cap=0,{f27},warmup_fraction=0.0]").name in LEARNER  # round 20's preset
    assert resolve(f"recommended[memory_list_cap=0,{f27}]").name in LEARNER  # round 21's preset
    assert LEARNER[LEARNER.index("recommended") - 3] == f"recommended[{f27}]"  # round 23's
    assert LEARNER[LEARNER.index("recommended") - 2] == \
        "recommended[label_epoch_growth=0.0,threshold_shared_positives=0]"  # round 28's
    assert LEARNER[LEARNER.index("recommended") - 1] == "recommended[label_epoch_growth=0.0]"  # round 32's
    shipped = CDGTConfig.preset("recommended")
    assert shipped == finalist.config().replace(early_stopping_metric="p_at_5", neighbours=30,
                                                  neighbour_space="both", centroid_features=300,
                                                  tail_memory="own", label_text=True, label_documents=True,
                                                  validation_objective=False, adam_epsilon=5.98e-5,
                                                  adam_epsilon_per_label=True, warmup_fraction=0.05,
                                                  memory_list_cap=5000, text_identifier_parts=True,
                                                  threshold_shared_positives=20, label_epoch_growth=0.1)
    explicit = SHIPPED
    assert resolve(explicit).name == "recommended" and resolve(explicit).overrides == ()
    assert resolve("recommended").config(seed=0) == shipped
    # one override away from the preset is not the preset
    assert resolve(explicit.replace("alpha=2", "alpha=1")).name.startswith("cdgt[")


def test_results_under_an_older_name_group_with_the_canonical_name(tmp_path):
    old = SHIPPED.replace("alpha=2,", "alpha=2.0,")  # a spelling of the preset's config: grouped under its name
    write_json(tmp_path / "a.json", fake_result("d", old, 0, micro_f1=0.4))
    write_json(tmp_path / "b.json", fake_result("d", "recommended", 1, micro_f1=0.6))
    results = load_results(tmp_path)
    assert [r["method"]["name"] for r in results] == ["recommended", "recommended"]
    assert results[0]["method"]["ran_as"] == old
    summary = aggregate(results)[("d", "recommended")]
    assert summary.seeds == (0, 1) and summary.mean["overall/micro_f1"] == pytest.approx(0.5)


def test_research_criteria():
    from cdgt.bench.research import clears, deltas

    good = {"overall/rare_f1": 0.02, "overall/macro_f1": 0.01, "overall/psp_at_5": 0.02, "overall/micro_f1": -0.005,
            "overall/p_at_1": 0.0}
    assert clears(good)
    assert not clears({**good, "overall/rare_f1": 0.019}) and not clears({**good, "overall/p_at_1": -0.006})
    table = aggregate([fake_result("d", "rarity_bce", 0, rare_f1=0.1), fake_result("d", "x", 0, rare_f1=0.15)])
    assert deltas(table, "d", "x")["overall/rare_f1"] == pytest.approx(0.05)


def test_report_from_fabricated_results(tmp_path):
    for d in ("yeast", "bibtex"):
        for m, v in (("cdgt", 0.6), ("bce", 0.5), ("omikuji", 0.55)):
            for s in range(3):
                write_json(tmp_path / "results" / f"{d}__{m}__s{s}.json", fake_result(d, m, s, micro_f1=v + s / 100))
    paths = write_report(tmp_path)
    text = (tmp_path / "REPORT.md").read_text()
    assert "| claim | paper | ours | verdict |" in text and "**holds**" in text
    assert "### yeast (seeds per row: 3)" in text and "| cdgt | 61.00 ± 0.82 |" in text
    assert "cdgt bench quality --experiments main --datasets yeast --seeds 3" in text
    assert "## Against Omikuji and LibMultiLabel" in text and "## What is missing" in text
    assert any(p.suffix == ".png" for p in paths)


# ------------------------------------------------------------------------------------------------ end to end
@pytest.mark.data
def test_quick_profile_end_to_end_and_resumable(tmp_path, data_dir, monkeypatch, capfd):
    """Each run in a process of its own (its output reaches this one's file descriptors: capfd, not capsys)."""
    from cdgt.pipeline.cli import main

    monkeypatch.setenv("CDGT_DATA_DIR", str(data_dir))
    args = ["bench", "quality", "--profile", "quick", "--output", str(tmp_path / "out"),
            "--cache-dir", str(tmp_path / "cache")]
    assert main(args) == 0
    first = capfd.readouterr().out
    files = sorted((tmp_path / "out" / "results").glob("*.json"))
    assert len(files) >= 6, first  # 3 data sets x (cdgt, rarity_bce, and omikuji when installed)
    # a CD-GTMLL run shows each epoch as it ends (indented: the bench's own line per run starts with "[")
    assert re.search(r"^  .+ seed 0: epoch 2/2 in \d+\.\d s, validation P@5 \d+\.\d\d$", first, re.M), first
    for path in files:
        result = json.loads(path.read_text())
        assert result["schema"] == 1 and result["seed"] == 0
        assert {"overall", "head", "tail"} <= set(result["metrics"])
        assert {"micro_f1", "rare_f1", "p_at_5", "ndcg_at_3", "psp_at_1", "map"} <= set(result["metrics"]["overall"])
        assert result["timing"]["train_seconds"] > 0 and result["timing"]["inference_seconds"] >= 0
        assert all(len(s["sha256"]) == 64 for s in result["dataset"]["sources"])
        assert result["environment"]["machine"]["cores"] >= 1 and result["environment"]["packages"]["tensorflow"]
        if result["method"]["kind"] == "cdgt":
            assert result["config"]["epochs"] == 2 and result["history"]["kl_tail"]
            assert len(result["specialisation"]) == result["config"]["n_players"]
            # CI builds the fused kernel (tests/cdgt_keras/test_kernels.py); the record says what trained the encoder
            assert result["encoder_update"] == "fused" or result["encoder_update"].startswith("TensorFlow ops (")
        assert not math.isnan(result["metrics"]["overall"]["micro_f1"])
        # every run is also scored under each rule and under the shipped preset's own (like with like)
        assert set(result["metrics_by_thresholds"]) == {"global", "per_label", "grouped", "shrunk", "shipped"}
        # a fresh process per run: each starts from the same interpreter, libraries and data, not from the runs before
        assert result["memory"]["start_rss_mib"] < 2048
    report = (tmp_path / "out" / "REPORT.md").read_text()
    assert "| method | Micro-F1 |" in report and "| claim | paper | ours | verdict |" in report
    # every run keeps its test rows beside its result; `bench paired` reads them (after checking that they give
    # each result file's figures) and the report shows its intervals
    assert sorted(p.stem for p in (tmp_path / "out" / "rows").glob("*.npz")) == [p.stem for p in files]
    paired = ["bench", "paired", "--datasets", "yeast", "--ours", "cdgt[epochs=2]", "--peers",
              "rarity_bce[epochs=2]", "--seeds", "1",
              "--resamples", "50", "--output", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")]
    assert main(paired) == 0
    shown = capfd.readouterr().out
    interval = r"^  P@1 +[+-]\d+\.\d\d  \[ *[+-]\d+\.\d\d, *[+-]\d+\.\d\d\]  vs rarity_bce\[epochs=2\]$"
    assert re.search(interval, shown, re.M), shown
    out = json.loads((tmp_path / "out" / "paired" / "yeast__cdgt[epochs=2].json").read_text())
    ours = json.loads((tmp_path / "out" / "results" / "yeast__cdgt[epochs=2]__s0.json").read_text())
    assert out["best_peer"]["micro_f1"]["ours"] == pytest.approx(
        ours["metrics_by_thresholds"]["shipped"]["overall"]["micro_f1"], abs=1e-12)
    assert main(["bench", "quality", "--report-only", "--output", str(tmp_path / "out")]) == 0
    assert "| yeast | Rare-F1 | rarity_bce[epochs=2] |" in (tmp_path / "out" / "REPORT.md").read_text()
    capfd.readouterr()
    stamps = [p.stat().st_mtime_ns for p in files]
    assert main(args) == 0
    second = capfd.readouterr().out
    run_lines = [line for line in second.splitlines() if line.startswith("[")]
    assert run_lines and all(line.endswith(": skipped") for line in run_lines), second
    assert [p.stat().st_mtime_ns for p in files] == stamps


def test_a_run_in_its_own_process_raises_its_error_here(tmp_path, data_dir, monkeypatch):
    from cdgt.bench.runner import RunSpec, run_isolated

    monkeypatch.setenv("CDGT_DATA_DIR", str(data_dir))
    spec = RunSpec("no-such-set", resolve("cdgt"), seed=0)  # found missing only when the run loads its data
    with pytest.raises(ValueError, match="unknown data set 'no-such-set'"):
        run_isolated(spec, tmp_path / "results", cache_dir=tmp_path / "cache")
    assert not list((tmp_path / "results").glob("*.json"))  # a failed run leaves no result


def test_a_failed_run_names_where_an_error_with_no_message_was_raised():
    """LibMultiLabel's tree raises graphblas' bare InvalidValue on some seeds of corel5k; the status line must say
    where, not "FAILED (InvalidValue: )". The error is sent as a spawned run sends it (multiprocessing's pool)."""
    from multiprocessing.pool import ExceptionWithTraceback

    from cdgt.pipeline.cli.bench import failure_status

    class InvalidValue(Exception):
        pass

    def export_centroids() -> None:
        raise InvalidValue()

    with pytest.raises(InvalidValue) as raised:
        export_centroids()
    local = raised.value
    with pytest.raises(InvalidValue) as sent:
        export_centroids()
    rebuild, args = ExceptionWithTraceback(sent.value, sent.value.__traceback__).__reduce__()
    received = rebuild(*args)  # what the parent process raises: the child's traceback as its cause's text
    received.__traceback__ = None  # the parent's own traceback ends in the pool, not where the error was raised
    assert type(received.__cause__).__name__ == "RemoteTraceback"
    status = failure_status(received)
    assert re.fullmatch(r"FAILED \(\S+InvalidValue, with no message, at bench/test_bench_quality\.py:\d+ in "
                        r"export_centroids\)", status), status
    assert failure_status(local) == status
    assert failure_status(ValueError("unknown data set 'x'")) == "FAILED (ValueError: unknown data set 'x')"


def test_a_terminated_bench_ends_its_spawned_run_too(tmp_path):
    """SIGTERM to the process waiting on a spawned run (run_isolated's wait) ends the run's process as well."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "wait.py"
    script.write_text(
        "import multiprocessing, os, time\n"
        "from cdgt.bench.runner import exit_on_sigterm\n"
        "if __name__ == '__main__':\n"
        "    with exit_on_sigterm(), multiprocessing.get_context('spawn').Pool(1) as pool:\n"
        "        print(pool.apply(os.getpid), flush=True)\n"
        "        pool.apply(time.sleep, (120,))\n")
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    time.sleep(0.5)  # the worker is in its sleep
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(timeout=60) == 128 + signal.SIGTERM
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL)
        raise AssertionError(f"the spawned run (pid {child}) outlived its terminated parent")


# ------------------------------------------------------------------------------------------------ threshold rules
def test_threshold_rules_score_against_sklearn():
    from sklearn.metrics import f1_score

    from cdgt.bench.threshold_rules import parse_rule, score_rules
    from cdgt_keras.thresholds import apply_thresholds, tune_thresholds

    rng = np.random.default_rng(0)
    y_val, y_test = ((rng.random((n, 12)) < np.linspace(0.03, 0.5, 12)).astype(int) for n in (150, 120))
    p_val, p_test = (np.clip(0.4 * y + 0.6 * rng.random(y.shape), 0, 1) for y in (y_val, y_test))
    tail = np.array([0, 1, 2])
    out = score_rules(p_val, y_val, p_test, y_test, tail, ("per_label:5", "shrunk:10", "global", "shrunk:10@30"))
    pred = apply_thresholds(p_test, tune_thresholds(p_val, y_val, mode="shrunk", prior_positives=10))
    assert out["shrunk:10"]["micro_f1"] == pytest.approx(f1_score(y_test, pred, average="micro"))
    assert out["shrunk:10"]["macro_f1"] == pytest.approx(f1_score(y_test, pred, average="macro", zero_division=0))
    assert out["shrunk:10"]["rare_f1"] == pytest.approx(f1_score(y_test[:, tail], pred[:, tail], average="micro"))
    pred = apply_thresholds(p_test, tune_thresholds(p_val, y_val, mode="global"))
    assert out["global"]["micro_f1"] == pytest.approx(f1_score(y_test, pred, average="micro"))
    pred = apply_thresholds(p_test, tune_thresholds(p_val, y_val, mode="shrunk", prior_positives=10,
                                                    shared_positives=30))
    assert out["shrunk:10@30"]["micro_f1"] == pytest.approx(f1_score(y_test, pred, average="micro"))
    assert out["shrunk:10@30"]["micro_f1"] != out["shrunk:10"]["micro_f1"]  # the frequent labels' taus moved
    assert parse_rule("per_label:20") == ("per_label", {"min_positives": 20})
    assert parse_rule("global") == ("global", {})
    with pytest.raises(ValueError, match="unknown threshold rule"):
        parse_rule("best:3")
    with pytest.raises(ValueError, match="must be numbers"):
        parse_rule("shrunk:10@many")


def test_bench_thresholds_command_trains_scores_and_reuses(tmp_path, capsys):
    from cdgt.pipeline.cli import main

    args = ["bench", "thresholds", "--datasets", "synthetic", "--seeds", "1", "--epochs", "2", "--rules",
            "per_label:5,shrunk:10", "--output", str(tmp_path)]
    assert main(args) == 0
    written = list((tmp_path / "thresholds").glob("synthetic__recommended*__s0.json"))
    assert len(written) == 1
    first = capsys.readouterr().out
    assert "| `shrunk:10` |" in first and "synthetic Micro / Macro / Rare" in first
    stamp = written[0].stat().st_mtime_ns
    assert main(args) == 0 and written[0].stat().st_mtime_ns == stamp  # reused, not retrained
    assert capsys.readouterr().out.splitlines()[-2:] == first.splitlines()[-2:]


# ------------------------------------------------------------------------------------------------ shared data
def _unsorted_csr() -> sp.csr_matrix:
    """A float32 csr whose rows list their columns out of order (as TF-IDF output does)."""
    x = sp.csr_matrix((np.array([0.5, 0.25, 1.0, 2.0], np.float32), np.array([3, 1, 2, 0]), np.array([0, 2, 4])),
                      shape=(2, 4))
    assert not x.has_sorted_indices
    return x


def test_peer_input_conversion_leaves_the_shared_features_alone():
    """Regression: a float64 conversion copied only `data`; sorting then permuted the caller's `indices` under its
    unsorted values, so every later run of the process trained on scrambled text features."""
    from cdgt.bench.peers import _csr

    x = _unsorted_csr()
    before = x.toarray()
    converted = _csr(x)
    assert converted.has_sorted_indices and (converted.toarray() == before).all()
    assert (x.toarray() == before).all() and x.indices.tolist() == [3, 1, 2, 0]


def test_cached_bench_data_is_read_only():
    from cdgt.bench.datasets import freeze

    x, labels = _unsorted_csr(), np.eye(2, dtype=np.uint8)
    freeze(x)
    freeze(labels)
    with pytest.raises(ValueError, match="read-only"):
        x.sort_indices()
    with pytest.raises(ValueError, match="read-only"):
        labels[0, 0] = 0


def test_the_main_comparison_runs_the_text_preset_and_its_columns_on_text_sets_only():
    """`recommended_text` and the peers on its columns are rows of debtags' and deps' comparison; on a set without
    raw text there is nothing for them to embed, so the main experiment does not schedule them there."""
    from cdgt.bench.experiments import EXPERIMENTS, TEXT_COLUMNS, expand

    rows = {d: {spec.row for spec in expand(EXPERIMENTS["main"], datasets=[d], seeds=1)} for d in ("debtags", "bibtex")}
    text_rows = {"recommended_text", *(f"{p}[{TEXT_COLUMNS}]" for p in PEERS)}
    assert text_rows <= rows["debtags"]
    assert not text_rows & rows["bibtex"] and {"recommended", *PEERS} <= rows["bibtex"]


def test_a_recommended_row_with_exactly_the_text_profile_is_the_text_preset():
    profile = ("alpha=1.0,logit_adjustment=2.0,logit_adjustment_prior=propensity,rerank_slack=0.003,"
               "tail_decisions=own,text_embedding=all-MiniLM-L6-v2,text_embedding_lead_tokens=32,wide=all,"
               "wide_input=embedding,wide_learning_rate=0.02,encoder_hidden=384,min_steps_per_epoch=0")
    assert resolve(f"recommended[{profile}]").name == "recommended_text"
    assert resolve(f"recommended[{profile.replace('alpha=1.0', 'alpha=2.0')}]").name != "recommended_text"
    assert resolve("recommended_text[alpha=2.0]").name == "recommended_text[alpha=2.0]"
