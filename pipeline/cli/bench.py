"""`cdgt bench quality`: CD-GTMLL, the paper's ablations and the peer libraries side by side on real data."""

from __future__ import annotations

import argparse
import re
import sys
import time
import traceback
from pathlib import Path

from cdgt.pipeline.cli.options import add_config_arguments, config_from_args

HELP = """\
Run named experiment grids, one JSON per (data set, method, seed) in OUTPUT/results/ (a run whose JSON exists is
skipped; --force re-runs), then write OUTPUT/REPORT.md (tables, the paper's claims with a verdict each, where we
win and lose against Omikuji and LibMultiLabel) and PNG plots in OUTPUT/plots/.

experiments (--experiments, comma-separated or `all`; default: the profile's):
{experiments}

profiles (--profile):
{profiles}

data sets: {datasets}, and -R variants NAME-R30 / NAME-R50
(built once from $CDGT_DATA_DIR, default ../shared/data, into --cache-dir).
methods: cdgt bce single_predictor no_curiosity focal asl rarity_bce paper, and the peers omikuji (Parabel),
omikuji_bonsai, libmultilabel (one-vs-rest), libmultilabel_tree; config overrides in brackets: cdgt[alpha=0.3],
cdgt[n_players=5,schedule=simultaneous], cdgt[head_hidden=512:256]. Every run goes in a fresh process of its own
and records its wall times and peak RSS.

examples:
  cdgt bench quality --profile quick
  cdgt bench quality --experiments main --datasets yeast,emotions,bibtex,corel5k --seeds 3
  cdgt bench quality --experiments sensitivity_alpha,sensitivity_beta --datasets bibtex
  cdgt bench quality --report-only
"""


def _help() -> str:
    from cdgt.bench.experiments import EXPERIMENTS, PROFILES
    from cdgt.pipeline.datasets import DATASETS

    exps = "\n".join(f"  {n:18s} {e.title}: {e.what} [{', '.join(e.datasets)}; {e.seeds} seeds]"
                     for n, e in EXPERIMENTS.items())
    profs = "\n".join(f"  {n:18s} {p.what}" for n, p in PROFILES.items())
    return HELP.format(experiments=exps, profiles=profs, datasets=" ".join(DATASETS))


def register(subparsers: argparse._SubParsersAction) -> None:
    bench = subparsers.add_parser("bench", help="benchmarks: `cdgt bench quality` (methods side by side), "
                                  "`cdgt bench paired` (differences with intervals), `cdgt bench serving` "
                                  "(latency), `cdgt bench thresholds` (decision rules)",
                                  description="Benchmarks of CD-GTMLL.")
    commands = bench.add_subparsers(dest="bench_command", metavar="SUBCOMMAND")
    bench.set_defaults(func=lambda _args: bench.print_help() or 2)
    quality = commands.add_parser("quality", help="quality and cost side by side; writes REPORT.md",
                                  description=_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    quality.add_argument("--profile", choices=("full", "quick"), default="full",
                         help="full (default): the experiments' own settings; quick: a few minutes, for CI")
    quality.add_argument("--experiments", metavar="NAMES", help="comma-separated experiment names, or all")
    quality.add_argument("--datasets", metavar="NAMES", help="comma-separated data sets (replaces the experiments')")
    quality.add_argument("--methods", metavar="NAMES", help="comma-separated methods (replaces the experiments')")
    quality.add_argument("--seeds", type=int, metavar="N", help="seeds 0..N-1 (default: 3, quick: 1)")
    quality.add_argument("--epochs", type=int, metavar="N", help="max epochs of every CD-GTMLL run (default 20)")
    quality.add_argument("--output", type=Path, metavar="DIR",
                         help="where results/, REPORT.md and plots/ go (default: bench; quick: runs/bench-quick)")
    quality.add_argument("--cache-dir", type=Path, metavar="DIR", help="built data sets (default runs/bench-data)")
    quality.add_argument("--force", action="store_true", help="re-run runs whose JSON already exists")
    quality.add_argument("--report-only", action="store_true", help="only regenerate REPORT.md and plots")
    quality.add_argument("--dry-run", action="store_true", help="list the runs and whether they exist; run nothing")
    quality.set_defaults(func=run)
    serving = commands.add_parser("serving", help="in-process latency (batch 1) and throughput (batch 64)",
                                  description=SERVING_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    serving.add_argument("model_dirs", nargs="+", type=Path, metavar="MODEL_DIR",
                         help="<base>/<name> (highest version) or a version directory, from `cdgt export`")
    serving.add_argument("--requests", type=int, default=300, help="batch-1 calls timed (default 300)")
    serving.add_argument("--batch", type=int, default=64, help="the throughput batch size (default 64)")
    serving.add_argument("--batches", type=int, default=40, help="batches timed (default 40)")
    serving.add_argument("--input", type=Path, metavar="FILE",
                         help="inputs, one per line: text, or JSON rows in a .jsonl file (default: synthetic)")
    serving.add_argument("--json", type=Path, metavar="FILE", help="also write the figures and machine as JSON")
    serving.set_defaults(func=run_serving)
    rules = commands.add_parser("thresholds", help="decision rules on the same probabilities (Micro/Macro/Rare-F1)",
                                description=THRESHOLDS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    rules.add_argument("--datasets", metavar="NAMES", default="yeast,emotions,bibtex,corel5k,delicious,debtags",
                       help="comma-separated data sets (default: the six visible ones it was chosen on)")
    rules.add_argument("--method", default="recommended", help="the model whose probabilities are scored")
    rules.add_argument("--seeds", type=int, default=2, metavar="N", help="seeds 0..N-1 (default 2)")
    rules.add_argument("--rules", metavar="RULES",
                       help="comma-separated mode[:k][@h] (k: min_positives, or prior_positives for shrunk; "
                       "@h: the labels with h or more validation positives take the global threshold; default: the "
                       "study's nine)")
    rules.add_argument("--epochs", type=int, metavar="N", help="max epochs (default: the method's, 20)")
    rules.add_argument("--output", type=Path, default=Path("bench"), metavar="DIR",
                       help="results go to DIR/thresholds/ (default bench)")
    rules.set_defaults(func=run_thresholds)
    feats = commands.add_parser(
        "features", help="which text choices measure best (a peer or CD-GTMLL trained on each featurization)",
        description="Featurize a text data set under each setting of the text options (n-grams, minimum document "
                    "frequency, sublinear tf, identifier parts, vocabulary size), train a peer (or a CD-GTMLL "
                    "method) on each and print the test metrics; one JSON per setting in OUTPUT/features/ (a rerun "
                    "reuses them).")
    feats.add_argument("--dataset", default="debtags", metavar="NAME", help="a text data set (default debtags)")
    feats.add_argument("--peer", default="omikuji", metavar="METHOD",
                       help="omikuji (default), libmultilabel, or a CD-GTMLL method such as recommended or "
                            "cdgt[alpha=0.3]")
    feats.add_argument("--output", type=Path, default=Path("bench"), metavar="DIR", help="default bench")
    feats.set_defaults(func=run_features)
    pair = commands.add_parser("paired", help="ours minus each peer with a paired bootstrap interval over test rows",
                               description=PAIRED_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    pair.add_argument("--datasets", default="debtags,bibtex,delicious", metavar="NAMES",
                      help="comma-separated data sets (default debtags,bibtex,delicious)")
    pair.add_argument("--ours", default="recommended", metavar="METHOD", help="default recommended")
    pair.add_argument("--peers", default="omikuji,omikuji_bonsai,libmultilabel,libmultilabel_tree", metavar="NAMES",
                      help="comma-separated peers (default: all four)")
    pair.add_argument("--seeds", type=int, default=3, metavar="N", help="seeds 0..N-1 on every side (default 3)")
    pair.add_argument("--resamples", type=int, default=1000, metavar="N", help="bootstrap draws (default 1000)")
    pair.add_argument("--output", type=Path, default=Path("bench"), metavar="DIR",
                      help="reads DIR/results and DIR/rows, writes DIR/paired (default bench)")
    pair.add_argument("--cache-dir", type=Path, metavar="DIR", help="built data sets (default runs/bench-data)")
    pair.set_defaults(func=run_paired)
    prof = commands.add_parser(
        "profile", help="where a training step's time goes (forward, backward, updates; sparse vs dense road)",
        description="Time the forward pass, forward + backward and the full training step per batch of a data "
                    "set's training split, on the sparse road (SparseDense + the encoder's optimizer, what cdgt "
                    "trains with) and on Keras' dense road (Dense + Adam), and print seconds per batch and per epoch.")
    prof.add_argument("--dataset", default="debtags", metavar="NAME", help="a bench data set (default debtags)")
    add_config_arguments(prof, by_data=False)  # --config, --preset, --set: the one road into CDGTConfig
    prof.add_argument("--batches", type=int, default=30, metavar="N", help="batches timed per road (default 30)")
    prof.add_argument("--json", type=Path, metavar="FILE", help="also write the figures as JSON")
    prof.set_defaults(func=run_profile)


SERVING_HELP = """\
Time the `predict` signature of exported models in-process (tf.saved_model.load; raw input in, numpy out; the
preprocessing inside the graph counted): p50/p99 latency at batch 1 and throughput at batch 64. Prints the
figures and the machine.

examples:
  cdgt export runs/debtags --output runs/serving --name debtags
  cdgt bench serving runs/serving/debtags runs/serving/synthetic --json runs/bench-serving.json
"""


THRESHOLDS_HELP = """\
Train one model per (data set, seed) and score its test split under each decision rule, thresholds tuned on the
same validation probabilities: per_label:k (each label its own F1-best threshold when it has k or more
validation positives), global, grouped:k, and shrunk:k (each label's F1 curve shrunk toward the pooled one by k
pseudo-positives). Prints Micro / Macro / Rare-F1 per data set and their mean; one JSON per run in
OUTPUT/thresholds/ (a rerun reuses them).

examples:
  cdgt bench thresholds                                   # the study behind the shipped default's shrunk:10
  cdgt bench thresholds --datasets bibtex --method rarity_bce --rules per_label:5,shrunk:10
"""


def run_thresholds(args: argparse.Namespace) -> int:
    from cdgt.bench.methods import split_names
    from cdgt.bench.threshold_rules import RULES, parse_rule, run_one, table

    rules = tuple(split_names(args.rules)) if args.rules else RULES
    try:
        for rule in rules:
            parse_rule(rule)
    except ValueError as err:
        print(f"cdgt bench thresholds: {err}", file=sys.stderr)
        return 2
    datasets = split_names(args.datasets)
    results = []
    for i, (dataset, seed) in enumerate([(d, s) for d in datasets for s in range(args.seeds)], 1):
        started = time.monotonic()
        results.append(run_one(dataset, args.method, seed, args.output / "thresholds", rules, args.epochs))
        print(f"[{i}/{len(datasets) * args.seeds}] {dataset} seed {seed}: {time.monotonic() - started:.1f} s",
              flush=True)
    print(f"\n{args.method}, mean over {args.seeds} seed(s); percent\n")
    print(table(results, rules))
    return 0


def run_features(args: argparse.Namespace) -> int:
    from cdgt.bench.features import format_rows, run_grid

    rows = run_grid(args.dataset, args.peer, args.output)
    print(f"{args.dataset}, {args.peer}, test split (percent):")
    print("\n".join(format_rows(rows)))
    return 0


PAIRED_HELP = """\
Compare the runs of `cdgt bench quality` on the same test rows: for each data set, ours minus each peer on P@1,
P@5, PSP@5 and (under the shipped threshold rule) Micro-, Macro- and Rare-F1, each side averaged over its seeds,
with a 95% interval from 1000 paired bootstrap draws of the test rows (the test split's own sampling noise, which
the seeds' spread does not show). Needs the runs' kept rows (OUTPUT/rows/, written by every run since they were
added; rerun older runs with --force) and the data set. Checks that the rows give each result file's figures,
prints a table and writes OUTPUT/paired/DATASET__OURS.json, which REPORT.md reads.

example:
  cdgt bench quality --experiments main --datasets debtags --seeds 3 \\
      --methods recommended,omikuji,omikuji_bonsai,libmultilabel,libmultilabel_tree
  cdgt bench paired --datasets debtags
"""


def run_paired(args: argparse.Namespace) -> int:
    from cdgt.bench.methods import split_names
    from cdgt.bench.paired import METRICS, compare, paired_path
    from cdgt.bench.runner import write_json

    if args.resamples < 1:
        raise SystemExit(f"cdgt bench paired: --resamples must be at least 1, got {args.resamples}")
    peers = split_names(args.peers)
    for dataset in [d for d in args.datasets.split(",") if d]:
        out = compare(args.output, dataset, args.ours, peers, range(args.seeds), resamples=args.resamples,
                      cache_dir=args.cache_dir)
        out["command"] = " ".join(["cdgt", *sys.argv[1:]])
        path = paired_path(args.output, dataset, args.ours)
        write_json(path, out)
        print(f"{dataset}: {args.ours} minus the best peer per metric, {out['test_rows']} test rows, seeds "
              f"0-{args.seeds - 1} (percent; 95% paired bootstrap interval):")
        for label, key in METRICS:
            b = out["best_peer"][key]
            print(f"  {label:9s} {100 * b['difference']:+6.2f}  [{100 * b['low']:+6.2f}, {100 * b['high']:+6.2f}]"
                  f"  vs {b['peer_name']}")
        print(f"wrote {path}")
    return 0


def run_profile(args: argparse.Namespace) -> int:
    import json

    from cdgt.bench.environment import environment
    from cdgt.bench.profile import profile_steps

    config = config_from_args(args)
    rows = profile_steps(args.dataset, config, batches=args.batches)
    box = environment()["machine"]
    print(f"{args.dataset}: input width {rows[0]['input_width']:,}, {rows[0]['nnz_per_example'] or 0:.0f} non-zeros "
          f"per example, batch {config.batch_size}, {rows[0]['batches_per_epoch']} batches per epoch; "
          f"{box.get('cores', '?')} cores")
    for row in rows:
        print(f"{row['road']}: forward {1e3 * row['forward']:.0f} ms, backward {1e3 * row['backward']:.0f} ms, "
              f"updates {1e3 * row['updates']:.0f} ms, step {1e3 * row['train_step']:.0f} ms per batch; "
              f"{row['epoch_seconds']:.1f} s per epoch")
    print(f"dense road / sparse road, per step: {rows[1]['train_step'] / rows[0]['train_step']:.2f}x")
    if args.json:
        args.json.write_text(json.dumps({"machine": box, "config": config.to_dict(), "rows": rows}, indent=1) + "\n")
    return 0


def run_serving(args: argparse.Namespace) -> int:
    import json

    from cdgt.bench.serving import bench_model, format_result, machine

    box = machine()
    print(f"machine: {box['cpu']}, {box['cores']} cores, {box['ram_gib']} GiB RAM; {box['platform']}; "
          f"tensorflow {box['tensorflow']}; commit {str(box['git_commit'])[:8]}")
    results = []
    for model_dir in args.model_dirs:
        inputs = None
        if args.input:
            from cdgt.serving.requests import parse_line

            kind = "dense" if args.input.suffix == ".jsonl" else "text"  # JSON lines: dense or sparse rows
            lines = [line for line in args.input.read_text(encoding="utf-8").splitlines() if line.strip()]
            inputs = [parse_line(line, kind) for line in lines]
        result = bench_model(model_dir, requests=args.requests, batch=args.batch, batches=args.batches,
                             inputs=inputs)
        results.append(result)
        print(format_result(result, args.batch), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"machine": box, "results": results}, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0


def plan(args: argparse.Namespace) -> list:
    """The de-duplicated RunSpecs the arguments ask for."""
    from cdgt.bench.experiments import EXPERIMENTS, PROFILES, expand
    from cdgt.bench.methods import split_names

    profile = PROFILES[args.profile]
    names = profile.experiments if not args.experiments else (
        tuple(EXPERIMENTS) if args.experiments == "all" else tuple(split_names(args.experiments)))
    unknown = [n for n in names if n not in EXPERIMENTS]
    if unknown:
        raise ValueError(f"unknown experiment(s) {unknown}; choose from {sorted(EXPERIMENTS)}")
    datasets = split_names(args.datasets) if args.datasets else profile.datasets
    methods = split_names(args.methods) if args.methods else profile.methods
    if datasets:
        from cdgt.bench.datasets import parse_name

        for name in datasets:
            parse_name(name)
    specs, seen = [], set()
    for name in names:
        for spec in expand(EXPERIMENTS[name], datasets=datasets, methods=methods,
                           seeds=args.seeds or profile.seeds, epochs=args.epochs or profile.epochs):
            if spec.path(Path()) not in seen:
                seen.add(spec.path(Path()))
                specs.append(spec)
    return specs


def failure_status(err: BaseException) -> str:
    """A failed run's one-line status: the error's type and message and, when the message is empty (some libraries
    raise bare error codes), the file, line and function that raised it. A run in its own process sends its
    traceback as the text of the error's cause (multiprocessing's RemoteTraceback); a local error carries its own.

    Example:
        >>> failure_status(ValueError("unknown data set 'x'"))
        "FAILED (ValueError: unknown data set 'x')"
        >>> failure_status(KeyError())
        'FAILED (KeyError: raised with no message)'
    """
    kind = type(err).__name__ if type(err).__module__ == "builtins" else f"{type(err).__module__}.{type(err).__name__}"
    if str(err):
        return f"FAILED ({kind}: {err})"
    where = str(err.__cause__ or "") or "".join(traceback.format_tb(err.__traceback__))
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', where)
    if not frames:
        return f"FAILED ({kind}: raised with no message)"
    path, line, function = frames[-1]
    return f"FAILED ({kind}, with no message, at {'/'.join(Path(path).parts[-2:])}:{line} in {function})"


def run(args: argparse.Namespace) -> int:
    output = args.output or Path("runs/bench-quick" if args.profile == "quick" else "bench")
    results = output / "results"
    failed = 0
    if not args.report_only:
        from cdgt.bench.runner import run_isolated as run_one

        specs = plan(args)
        for i, spec in enumerate(specs, start=1):
            head = f"[{i}/{len(specs)}] {spec.dataset} {spec.method.name} seed {spec.seed}"
            if args.dry_run:
                print(f"{head}: {'exists' if spec.path(results).is_file() else 'to run'}")
                continue
            started = time.perf_counter()
            try:
                status = run_one(spec, results, cache_dir=args.cache_dir, force=args.force)
            except Exception as err:  # one failed run must not stop a benchmark of hours; it is reported
                failed += 1
                status = failure_status(err)
            print(f"{head}: {status}" + (f" in {time.perf_counter() - started:.1f} s" if status == "done" else ""),
                  flush=True)
        if args.dry_run:
            return 0
    from cdgt.bench.report import write_report

    paths = write_report(output)
    print(f"wrote {', '.join(str(p) for p in paths)}")
    if failed:
        print(f"{failed} run(s) failed; see the lines above", file=sys.stderr)
    return 1 if failed else 0
