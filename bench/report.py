"""bench/REPORT.md from the result JSON files: verdicts, tables (each naming the command that reproduces it),
wins and losses against the peers, plots, and what is missing.

Example:
    >>> write_report(Path("bench"))  # doctest: +SKIP
    [PosixPath('bench/REPORT.md'), ...]
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from cdgt.bench import plots
from cdgt.bench.aggregate import Summary, aggregate, runs_of
from cdgt.bench.experiments import EXPERIMENTS, TEXT_COLUMNS, expand
from cdgt.bench.learner_report import LEARNER_COLUMNS, section_learner
from cdgt.bench.methods import PEERS
from cdgt.bench.paired import section_paired
from cdgt.bench.research import section_research
from cdgt.bench.runner import load_results
from cdgt.bench.verdicts import all_verdicts, md_table, overhead_rows, pct
from cdgt_keras.metrics import HEADLINE_METRICS

SHIPPED = ("recommended", "recommended_text")  # the command line's defaults: on raw text, the second
TEXT_PEERS = tuple(f"{peer}[{TEXT_COLUMNS}]" for peer in PEERS)  # the peers on recommended_text's columns

Table = dict[tuple[str, str], Summary]
DECISIONS = [("Micro-F1", "overall/micro_f1"), ("Macro-F1", "overall/macro_f1"), ("Rare-F1", "overall/rare_f1"),
             ("head F1", "head/micro_f1"), ("tail macro-F1", "tail/macro_f1"), ("mAP", "overall/map")]
RANKING = [(f"{m}@{k}", f"overall/{key}_at_{k}") for m, key in (("P", "p"), ("nDCG", "ndcg"), ("PSP", "psp"))
           for k in (1, 3, 5)]
PEAK_RSS = ("peak RSS MiB", "memory/peak_rss_mib")  # the run's peak RSS (cdgt.bench.memory)
COST = [("train s", "timing/train_seconds"), PEAK_RSS, ("infer s", "timing/inference_seconds"),
        ("epochs", "timing/epochs_run")]
LOWER_IS_BETTER = ("timing/", "memory/")


def _cell(summary: Summary | None, key: str) -> str:
    if summary is None or key not in summary.mean or math.isnan(summary.mean[key]):
        return "-"
    m, s = summary.get(key)
    if key.startswith("timing/"):
        return f"{m:.0f}" if key.endswith("epochs_run") else f"{m:.1f} ± {s:.1f}"
    if key.startswith("memory/"):
        return f"{m:.0f} ± {s:.0f}"
    return pct(m, s)


def method_table(table: Table, dataset: str, rows: list[str], columns: list[tuple[str, str]]) -> list[str]:
    """One row per method of `dataset`, one column per (title, metric key)."""
    return md_table(["method", *(c for c, _ in columns)],
                    [[r, *(_cell(table[(dataset, r)], k) for _, k in columns)] for r in rows])


def _command(experiment: str, datasets: list[str], seeds: int, methods: list[str] | None = None) -> str:
    extra = f" --methods '{','.join(methods)}'" if methods else ""
    return (f"Reproduce: `cdgt bench quality --experiments {experiment} --datasets {','.join(datasets)} "
            f"--seeds {seeds}{extra}`")


def _present(table: Table, experiment: str) -> tuple[list[str], list[str]]:
    exp = EXPERIMENTS[experiment]
    rows = [resolve_row(m) for m in exp.methods]
    own = [r for r in rows if experiment == "main" or r not in {resolve_row(m) for m in EXPERIMENTS["main"].methods}]
    names = sorted({d for d, _ in table})
    if experiment == "rare":  # the -R variants and the base sets that have one
        keep = [d for d in names if "-R" in d or any(n.startswith(d + "-R") for n in names)]
    else:  # a data set shows up where it has a row of this experiment's own
        keep = [d for d in names if "-R" not in d and any((d, r) in table for r in own)]
    return [d for d in dict.fromkeys([*exp.datasets, *names]) if d in keep], rows


def resolve_row(name: str) -> str:
    from cdgt.bench.methods import resolve

    return resolve(name).name


def _seeds(table: Table, datasets: list[str], rows: list[str]) -> int:
    return min((table[(d, r)].n for d in datasets for r in rows if (d, r) in table), default=0)


def long_tail_table(results: list[dict[str, Any]], dataset: str, rows: list[str]) -> list[str]:
    """Quality by label-frequency bucket (cdgt.bench.measures.frequency_buckets) of each row's runs: per bucket
    of training counts, micro-F1 at the row's tuned thresholds / R@5 (the share of the bucket's test positives
    ranked in their example's top 5), percent, mean over seeds (± the std where seeds differ). Rows whose runs
    predate the buckets are left out; no lines when none has them."""
    curves = {r: [run["curves"]["buckets"] for run in runs_of(results, dataset, r)
                  if "buckets" in run.get("curves", {})] for r in rows}
    curves = {r: c for r, c in curves.items() if c}
    if not curves:
        return []
    first = next(iter(curves.values()))[0]
    names = first["train_count"]
    out = []
    for r, runs in curves.items():
        cells = []
        for i in range(len(names)):
            f1, recall = (np.array([100 * c[key][i] for c in runs]) for key in ("f1", "recall_at_k"))
            spread = f" (± {f1.std():.1f} / {recall.std():.1f})" if len(runs) > 1 else ""
            cells.append(f"{f1.mean():.1f} / {recall.mean():.1f}{spread}")
        out.append([f"{r} ({len(runs)})", *cells])
    sizes = ["labels / test positives", *(f"{lab:,} / {pos:,}" for lab, pos in
                                          zip(first["labels"], first["test_positives"]))]
    return ["", f"Long tail: micro-F1 / R@{first['k']} by the labels' training count (percent, mean over seeds; "
            f"R@{first['k']}: the share of the bucket's test positives ranked in their example's top {first['k']}):",
            "", *md_table(["training count", *names], [sizes, *out])]


def section_main(table: Table, results: list[dict[str, Any]] | None = None) -> list[str]:
    datasets, rows = _present(table, "main")
    lines = ["## Main comparison", "", "Percent, mean ± std (population std) over the seeds shown; thresholds "
             "tuned on validation for every method (per label, SPEC §4; `recommended`: its own shrunk rule, the "
             "labels with 20 or more validation positives on the pooled threshold); "
             "head/tail = top/bottom 20 % of labels."]
    for d in datasets:
        present = [r for r in rows if (d, r) in table]
        seeds = sorted({table[(d, r)].n for r in present})
        lines += ["", f"### {d} (seeds per row: {', '.join(map(str, seeds))})", "",
                  _command("main", [d], max(seeds)), ""]
        lines += [*method_table(table, d, present, DECISIONS + COST), "",
                  *method_table(table, d, present, RANKING), *long_tail_table(results or [], d, present)]
    return lines


def section_summary(table: Table) -> list[str]:
    """Per data set, the best row on each headline metric among the main comparison's rows (mean over seeds)."""
    datasets, rows = _present(table, "main")
    keys = [(label, f"overall/{name}") for name, label in HEADLINE_METRICS.items()]
    out = []
    for d in datasets:
        cells = [d]
        for _, key in keys:
            present = [r for r in rows if (d, r) in table and not math.isnan(table[(d, r)].mean.get(key, math.nan))]
            best = max(present, key=lambda r: table[(d, r)].mean[key]) if present else None
            value = table[(d, best)].mean[key] if best else 0.0
            cells.append(f"{best} {pct(value)}" if value > 0 else "- (all 0)")
        for ours in (*SHIPPED, "cdgt"):
            summary = table.get((d, ours))
            cells.append(" / ".join(_cell(summary, k).split(" ±")[0] for _, k in keys) if summary else "-")
        out.append(cells)
    names = " / ".join(HEADLINE_METRICS.values())
    head = ["data", *(f"best {n}" for n, _ in keys), f"recommended (shipped) {names}",
            f"recommended_text (shipped on text, <= 4,096 labels) {names}", f"cdgt (paper's form) {names}"]
    return ["## Summary: the best method per data set", "", *md_table(head, out), ""] if out else []


def section_peers(table: Table) -> list[str]:
    lines = ["## Against Omikuji and LibMultiLabel", "",
             "A metric is a win when our mean is higher (lower for time), a loss otherwise; "
             "(~) marks a difference within the larger std; exact ties (e.g. both 0) are left out. Both sides' "
             "decisions (F1 metrics) are compared under the shipped preset's threshold rule (`recommended`: shrunk, "
             "with the labels of 20 or more validation positives on the pooled threshold; every run is scored under "
             "it too; a run made before that rule existed has no F1 to compare). On raw text of up to 4,096 labels "
             "(debtags) the shipped default is `recommended_text`, compared with each peer as it ships (TF-IDF) "
             f"and on its own columns (`{TEXT_COLUMNS}`: the sentence embedding before the TF-IDF).", ""]
    datasets = sorted({d for d, r in table if r in PEERS})
    lines += [_command("main", datasets, 3, [*SHIPPED, "rarity_bce", *PEERS, *TEXT_PEERS]), ""]
    rows = []
    for d in datasets:
        for ours, rule in (("recommended", "shipped"), ("recommended_text", "shipped"), ("rarity_bce", "per_label")):
            for peer in (*PEERS, *(TEXT_PEERS if ours == "recommended_text" else ())):
                if (d, ours) in table and (d, peer) in table:
                    wins, losses = _compare(table[(d, ours)], table[(d, peer)], f"{rule}:")
                    rows.append([d, ours, peer, rule, ", ".join(wins) or "-", ", ".join(losses) or "-"])
    header = ["data", "ours", "peer", "thresholds", "we win on", "we lose on"]
    return lines + (md_table(header, rows) if rows else ["No peer runs."])


def _compare(a: Summary, b: Summary, rule: str = "") -> tuple[list[str], list[str]]:
    """Wins and losses of `a` against `b`; decision metrics read under `rule` ("shipped:"), rankings as they are."""
    wins, losses = [], []
    decisions = [(name, rule + key) for name, key in DECISIONS]
    for name, key in [*decisions, *RANKING, ("train time", "timing/train_seconds"),
                      ("inference time", "timing/inference_seconds"), ("peak RSS", PEAK_RSS[1])]:
        (ma, sa), (mb, sb) = a.get(key), b.get(key)
        if math.isnan(ma) or math.isnan(mb) or ma == mb:  # not measured, or a tie (e.g. both 0)
            continue
        better = ma < mb if key.startswith(LOWER_IS_BETTER) else ma > mb
        label = name + (" (~)" if abs(ma - mb) <= max(sa, sb) else "")
        (wins if better else losses).append(label)
    return wins, losses


def section_grid(table: Table, experiment: str, key: str) -> list[str]:
    exp = EXPERIMENTS[experiment]
    points = {float(m.split("=")[1].rstrip("]")): resolve_row(m) for m in exp.methods}
    datasets = sorted({d for d, r in table if r in points.values() and r != "cdgt"})
    if not datasets:
        return []
    lines = [f"### {exp.title}", "", _command(experiment, datasets, _seeds(table, datasets, list(points.values()))),
             "", "Rare-F1 / Micro-F1 (percent, mean over seeds):", ""]
    rows = [[d, *(f"{_cell(table.get((d, r)), 'overall/rare_f1').split(' ±')[0]} / "
                  f"{_cell(table.get((d, r)), 'overall/micro_f1').split(' ±')[0]}" for r in points.values())]
            for d in datasets]
    return lines + md_table(["data", *(f"{key}={_num(x)}" for x in points)], rows) + [""]


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and x >= 1 else str(x)


def section_rows(table: Table, experiment: str, columns: list[tuple[str, str]]) -> list[str]:
    datasets, rows = _present(table, experiment)
    exp = EXPERIMENTS[experiment]
    lines = [f"## {exp.title}", "", exp.what + ".", ""]
    for d in datasets:
        present = [r for r in rows if (d, r) in table]
        lines += [f"### {d}", "", _command(experiment, [d], _seeds(table, [d], present)), ""]
        lines += [*method_table(table, d, present, columns), ""]
    return lines


def section_specialisation(results: list[dict[str, Any]]) -> list[str]:
    lines = ["## Player specialisation (the paper's form, `cdgt`, N=3)", "",
             "Each player's micro-F1 on L_i ∩ L_H and L_i ∩ L_T at the tuned thresholds, and its rank among the "
             "players covering such labels (1 = best), mean over seeds.", ""]
    datasets = sorted({r["dataset"]["name"] for r in results if r["method"].get("row") == "cdgt"})
    lines += [_command("specialisation", datasets, 3, ["cdgt"]), ""]
    rows = []
    for d in sorted({r["dataset"]["name"] for r in results}):
        runs = [r for r in runs_of(results, d, "cdgt") if r.get("specialisation")]
        for i in range(len(runs[0]["specialisation"]) if runs else 0):
            ps = [r["specialisation"][i] for r in runs]
            rows.append([d, f"P{i + 1}", str(ps[0]["labels"]), *(_mean_field(ps, f"{k}_{f}", f == "f1")
                         for k in ("head", "tail") for f in ("labels", "f1", "rank"))])
    header = ["data", "player", "labels", "head labels", "head F1", "head rank", "tail labels", "tail F1", "tail rank"]
    return lines + (md_table(header, rows) if rows else ["No runs."]) + [""]


def _mean_field(players: list[dict[str, Any]], key: str, percent: bool) -> str:
    values = [p[key] for p in players if p.get(key) is not None]
    if not values:
        return "-"
    return f"{100 * np.mean(values):.2f}" if percent else f"{np.mean(values):.1f}"


def section_disagreement(results: list[dict[str, Any]]) -> list[str]:
    lines = ["## Disagreement and the potential over training", "",
             "Training-set means per epoch (kl_head, kl_tail, potential as logged by the train step); "
             "seed-averaged. Data sets whose players share no label (rho · L / N < 2) show zeros.", ""]
    datasets = sorted({r["dataset"]["name"] for r in results if r.get("history", {}).get("kl_tail")})
    lines += [_command("disagreement", datasets, 3), ""]
    rows = []
    for d in sorted({r["dataset"]["name"] for r in results}):
        for row in ("cdgt", "cdgt[disagreement=js]", "cdgt[beta_schedule=anneal]"):
            runs = [r for r in runs_of(results, d, row) if r.get("history", {}).get("kl_tail")]
            if runs:
                h = {k: [r["history"][k] for r in runs] for k in ("kl_head", "kl_tail", "potential")}
                rows.append([d, row, f"{np.mean([len(v) for v in h['kl_tail']]):.1f}",
                             *(f"{np.mean([v[0] for v in h[k]]):.3f} -> {np.mean([v[-1] for v in h[k]]):.3f}"
                               for k in ("kl_head", "kl_tail", "potential"))])
    header = ["data", "method", "epochs", "KL head first -> last", "KL tail first -> last", "Phi first -> last"]
    return lines + (md_table(header, rows) if rows else ["No runs."]) + [""]


def section_overhead(table: Table) -> list[str]:
    rows_by = overhead_rows(table)
    lines = ["## Overhead", "", EXPERIMENTS["overhead"].what + "; seconds per epoch excludes the first epoch "
             "(graph tracing).", "", _command("overhead", list(EXPERIMENTS["overhead"].datasets), 1), ""]
    rows = []
    for (schedule, n), s in sorted(rows_by.items()):
        base = rows_by.get((schedule, 1))
        rows.append([schedule, str(n), f"{s.mean['timing/epoch_seconds']:.2f}", _ratio(s, base, "epoch_seconds"),
                     f"{s.mean['timing/inference_seconds']:.3f}", _ratio(s, base, "inference_seconds")])
    return lines + (md_table(["schedule", "N", "s/epoch", "vs N=1", "inference s (test)", "vs N=1"], rows)
                    if rows else ["No runs."]) + [""]


def _ratio(s: Summary, base: Summary | None, key: str) -> str:
    return f"{s.mean['timing/' + key] / base.mean['timing/' + key]:.2f}x" if base else "-"


def section_missing(table: Table) -> list[str]:
    lines = ["## What is missing", "", "Runs each experiment defines (its own data sets, methods, seeds) that have no "
             "result here:", ""]
    for name, exp in EXPERIMENTS.items():
        missing = [s for s in expand(exp) if (s.dataset, s.row) not in table or s.seed not in table[(s.dataset,
                                                                                                    s.row)].seeds]
        by_data = sorted({s.dataset for s in missing})
        lines.append(f"- `{name}`: {len(missing)} of {len(expand(exp))} runs missing"
                     + (f" (data sets: {', '.join(by_data)})" if by_data else ""))
    return [*lines, ""]


def _label(result: dict[str, Any]) -> str:
    """The row's description as the code describes it now (a result file keeps the label it ran with)."""
    from cdgt.bench.methods import resolve

    row = result["method"].get("row", result["method"]["name"])
    try:
        return resolve(row).label
    except ValueError:
        return result["method"].get("label", "")


def machines_line(results: list[dict[str, Any]]) -> str:
    """The machines the runs ran on, with how many runs each (most first): results gathered over several sessions
    come from more than one machine, and a time is comparable only with one measured on the same machine.

        >>> run = lambda cpu: {"environment": {"machine": {"cpu": cpu, "cores": 2, "ram_gib": 23.5}}}
        >>> machines_line([run("Intel Xeon"), run("AMD EPYC"), run("Intel Xeon")])
        'Machines: Intel Xeon, 2 cores, 23.5 GiB RAM (2 runs); AMD EPYC, 2 cores, 23.5 GiB RAM (1 run); no GPU.'
    """
    counts: dict[str, int] = {}
    for r in results:
        m = r.get("environment", {}).get("machine", {})
        name = f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores, {m.get('ram_gib', '?')} GiB RAM"
        counts[name] = counts.get(name, 0) + 1
    parts = [f"{name} ({n} run{'s' if n != 1 else ''})" for name, n in sorted(counts.items(), key=lambda kv: -kv[1])]
    return f"Machines: {'; '.join(parts) or '?'}; no GPU."


def _header(results: list[dict[str, Any]]) -> list[str]:
    env = results[0]["environment"] if results else {}
    packages = ", ".join(f"{k} {v}" for k, v in env.get("packages", {}).items() if v)
    data_rows = {}
    for r in results:
        ds = r["dataset"]
        data_rows[ds["name"]] = [ds["name"], str(ds.get("num_train", "")), str(ds.get("num_validation", "")),
                                 str(ds.get("num_test", "")), str(ds.get("num_labels", "")),
                                 ", ".join(s["sha256"][:12] for s in ds.get("sources", [])), ds.get("note", "")]
    intro = ["# Quality benchmark: CD-GTMLL vs the paper's ablations, loss baselines, Omikuji and LibMultiLabel", "",
             "Generated by `cdgt bench quality` from the JSON files in `results/` (one per data set, method, seed); "
             "do not edit by hand: `cdgt bench quality --report-only` rewrites it.", "",
             f"{machines_line(results)} "
             f"The first run's Python {env.get('python', '?')}; {packages}; commit {str(env.get('git_commit'))[:10]} "
             f"(each result file records its own). {len(results)} runs.", "", "### Data", ""]
    header = ["data", "train", "validation", "test", "labels", "source sha256 (first 12)", "note"]
    rows = sorted({r["method"].get("row", r["method"]["name"]): _label(r) for r in results}.items())
    notes = ["", "### Methods", "", "Same splits and features for every method: cdgt_keras.featurizer, fitted on "
             "train, the features `cdgt train`, the TFX Transform and the exported model use (text: TF-IDF of "
             "identifier-keeping unigrams + bigrams, min document frequency 2, at most 100k terms, sublinear tf, "
             "smoothed idf, L2 rows; dense: z-score; sparse: as stored). "
             "CD-GTMLL variants are `CDGTConfig` presets / overrides (each its own epochs, learning-rate schedule and "
             "early-stopping metric, patience 3, best weights restored). Omikuji: its defaults = Parabel's settings "
             "(3 trees, balanced 2-means, leaves <= 100 labels, beam 10); `omikuji_bonsai`: Bonsai's settings "
             "(unbalanced 100-means, depth 3); scores of labels the beam does not reach are 0. LibMultiLabel: "
             "one-vs-rest LIBLINEAR `-s 2 -B 1 -e 0.0001`, decision values through a sigmoid; "
             "`libmultilabel_tree`: its tree model (degree 100, depth <= 10, beam 10). "
             "Peak RSS: the benchmark process's peak resident memory during the run's training, scoring and "
             "evaluation (the kernel's high-water mark, reset at the run's start; it includes what the process "
             "already held: interpreter, TensorFlow, loaded data; each result file keeps that start figure too). "
             "Thresholds of every method tuned on validation by cdgt_keras.thresholds (per label, >= 5 validation "
             "positives, else global; `recommended` and rows that set `thresholds=` use their own rule).",
             ""]
    return [*intro, *md_table(header, [data_rows[k] for k in sorted(data_rows)]), *notes,
            *md_table(["row", "what"], [[f"`{k}`", v] for k, v in rows]), ""]


def write_report(output: Path) -> list[Path]:
    """Write OUTPUT/REPORT.md and OUTPUT/plots/*.png from OUTPUT/results/*.json; returns the paths written."""
    output = Path(output)
    results = load_results(output / "results")
    table = aggregate(results)
    plot_dir, written = output / "plots", []
    main_rows = (*SHIPPED, "cdgt", "bce", "rarity_bce", "no_curiosity", "focal", "asl", *PEERS)
    pngs = plots.tail_pr_plots(results, plot_dir, main_rows) + plots.long_tail_plots(results, plot_dir, main_rows)
    pngs += plots.disagreement_plots(results, plot_dir)
    ours = sorted({r["method"].get("row", r["method"]["name"]) for r in results if r["method"].get("kind") == "cdgt"})
    pngs += plots.learning_curves(results, plot_dir, tuple(ours))
    for exp, key in (("sensitivity_alpha", "alpha"), ("sensitivity_beta", "beta"), ("sensitivity_rho", "overlap"),
                     ("sensitivity_n", "n_players")):
        points = {float(m.split("=")[1].rstrip("]")): resolve_row(m) for m in EXPERIMENTS[exp].methods}
        if path := plots.sensitivity_plot(table, key, points, plot_dir):
            pngs.append(path)
    lines = [*_header(results), "## The paper's claims", "",
             "Each claim with the paper's figure and ours; a claim checked on several data sets holds only if it "
             "holds on each.", ""]
    verdicts = [[v.claim, v.paper, v.ours, f"**{v.verdict}**"] for v in all_verdicts(table, results)]
    lines += [*md_table(["claim", "paper", "ours", "verdict"], verdicts), ""]
    lines += [*section_summary(table), *section_main(table, results), "", *section_peers(table), ""]
    lines += section_paired(output)
    lines += section_rows(table, "learner", LEARNER_COLUMNS) + section_learner(output)
    lines += ["## Sensitivity", ""]
    for exp, key in (("sensitivity_alpha", "alpha"), ("sensitivity_beta", "beta"), ("sensitivity_rho", "rho"),
                     ("sensitivity_n", "N")):
        lines += section_grid(table, exp, key)
    lines += section_rows(table, "rare", DECISIONS) + section_specialisation(results)
    lines += section_disagreement(results) + section_overhead(table) + section_rows(table, "extras", DECISIONS)
    notes = output / "research_notes.md"  # hand-written findings of the research grid; the tables are generated
    lines += section_research(table, results, notes.read_text() if notes.is_file() else "")
    lines += ["## Plots", ""] + [f"- [{p.name}](plots/{p.name})" for p in pngs] + [""] + section_missing(table)
    output.mkdir(parents=True, exist_ok=True)
    (output / "REPORT.md").write_text("\n".join(lines) + "\n")
    written.append(output / "REPORT.md")
    return written + pngs
