"""What the tail labels' own memory weights can buy at most on a test split.

(Round 49 of bench/learner_notes.md.) Trains METHOD on a data set (debtags unless `--dataset`) for one seed as the
bench does (`fit_model`, which settles the memories and picks the tail's weights), then scores the test split under
every tail weight combination on {0, 0.2, ..., 1.0} per memory layer: test P@1, P@5, Rare-F1 and the tail labels'
summed F1 (thresholds tuned on validation with that combination, as the evaluation tunes them), and validation's
in-sample figures, into OUT (JSON). `--table` prints, against the picked weights, the best Macro-F1 within the P@k guard
on test, the best without it, and the weights validation's tail F1 picks without the guard.

Usage (from the repository, CDGT_DATA_DIR set; about 2-5 minutes a seed on 2 cores):
    python -m cdgt.bench.tail_ceiling 0 /tmp/ceiling_s0.json 'recommended'
    python -m cdgt.bench.tail_ceiling 0 /tmp/bibtex_s0.json 'recommended' --dataset bibtex
    python -m cdgt.bench.tail_ceiling --table /tmp/ceiling_s*.json
"""

from __future__ import annotations

import argparse
import glob
import itertools
import json
import time

import numpy as np
import scipy.sparse as sp

GRID = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]


def measure(seed: int, out: str, method_name: str, dataset: str = "debtags") -> None:
    from cdgt.bench.datasets import load_dataset
    from cdgt.bench.methods import resolve
    from cdgt_keras.inputs import batch_scorer
    from cdgt_keras.tail_memory import TailView, decided_counts
    from cdgt_keras.thresholds import config_rule
    from cdgt_keras.training import fit_model

    method = resolve(method_name)
    config = method.config(seed)
    data = load_dataset(dataset, features=method.config())
    train, val, test = (data.splits[s] for s in ("train", "validation", "test"))
    started = time.time()
    model, _, _ = fit_model(config, train, val)
    print(f"trained in {time.time() - started:.0f} s", flush=True)
    tables = [t for t in (getattr(model, "centroids", None), getattr(model, "label_text", None)) if t is not None]
    layers = [layer for layer, _ in model.vote_layers()] + tables
    shared = [float(layer.weight.numpy()) for layer in layers]
    picked = [float(layer.tail_weight.numpy()) for layer in layers]
    fused = batch_scorer(model.fused_probs)
    scorers = [batch_scorer(lambda x, v=v, s=s: v(model.neighbour_query(x, s))) for v, s in model.vote_layers()]
    scorers += [batch_scorer(t) for t in tables]
    tail = np.flatnonzero(model.tail_mask.numpy())

    def chunks(split, rows=1024):
        def gen():
            for s in range(0, split.features.shape[0], rows):
                x = split.features[s:s + rows]
                parts = [sc(x, 256) for sc in scorers]
                yield (fused(x, 256), [p.toarray() if sp.issparse(p) else np.asarray(p) for p in parts],
                       sp.csr_matrix(split.labels[s:s + rows]))
        return gen

    v, t = TailView.of(chunks(val), shared, tail), TailView.of(chunks(test), shared, tail)
    rule = config_rule(config)

    def decided(counts, taus):
        tp, pred, pos = decided_counts(counts, taus)
        return tp, pred, pos, float(np.where(pos + pred > 0, 2 * tp / np.maximum(pos + pred, 1), 0.0).sum())

    def figures(w):
        vs, ts = v.scores(w), t.scores(w)
        val_counts = v.tail_counts(vs)
        taus = v.tail_thresholds([val_counts], [0], rule)
        _, _, _, val_sum = decided(val_counts, taus)
        tp, pred, pos, test_sum = decided(t.tail_counts(ts), taus)
        return {"val_rare_f1": v.rare_f1(vs, rule), "val_tail_f1_sum": val_sum, "val_p": v.precisions(vs),
                "test_p1": t.precision(ts, 1), "test_p5": t.precision(ts, 5),
                "test_rare_f1": float(2 * tp.sum() / max(pos.sum() + pred.sum(), 1)), "test_tail_f1_sum": test_sum}

    result = {"method": method_name, "dataset": dataset, "seed": seed, "names": [layer.name for layer in layers],
              "shared": shared, "picked": picked, "num_labels": int(model.num_labels),
              "shared_figures": figures(shared),
              "picked_figures": figures(picked if picked[0] >= 0 else shared),
              "grid": [{"w": list(w), **figures(list(w))} for w in itertools.product(GRID, repeat=len(layers))]}
    with open(out, "w") as f:
        json.dump(result, f)
    print(f"wrote {out} in {time.time() - started:.0f} s")


def table(paths: list[str]) -> str:
    """Markdown: per seed, the picked weights' figures and three alternatives' changes against them."""
    lines = ["| seed | picked: P@1 / P@5 / Rare-F1 | best Macro-F1 within the guard on test | best Macro-F1 on test, "
             "no guard | picked on validation tail F1, no guard |", "|---|---|---|---|---|"]
    for path in sorted(paths):
        r = json.load(open(path))
        n, grid, pk = r["num_labels"], r["grid"], r["picked_figures"]

        def cell(x, pk=pk, n=n):
            w = "[" + ", ".join(f"{v:g}" for v in x["w"]) + "]"
            return (f"{w} {100 * (x['test_p1'] - pk['test_p1']):+.2f} / {100 * (x['test_p5'] - pk['test_p5']):+.2f}"
                    f" / {100 * (x['test_rare_f1'] - pk['test_rare_f1']):+.2f}"
                    f" / {100 * (x['test_tail_f1_sum'] - pk['test_tail_f1_sum']) / n:+.2f}")

        guarded = [x for x in grid if x["test_p1"] >= pk["test_p1"] - 1e-9 and x["test_p5"] >= pk["test_p5"] - 1e-9]
        seed = r.get("seed", path.rsplit("_s", 1)[-1].split(".")[0])  # files of round 49 name it only
        lines.append(f"| {seed} | {100 * pk['test_p1']:.2f} / {100 * pk['test_p5']:.2f} / "
                     f"{100 * pk['test_rare_f1']:.2f} | {cell(max(guarded, key=lambda x: x['test_tail_f1_sum']))} | "
                     f"{cell(max(grid, key=lambda x: x['test_tail_f1_sum']))} | "
                     f"{cell(max(grid, key=lambda x: (x['val_tail_f1_sum'], -sum(x['w']))))} |")
    lines.append("(each cell: weights [votes, encoder votes, centroids, texts], then P@1 / P@5 / Rare-F1 / Macro-F1 "
                 "minus the picked weights'; Macro-F1: the tail labels' share, the other labels' decisions held)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m cdgt.bench.tail_ceiling", description=__doc__.split("\n\n")[0])
    parser.add_argument("seed", nargs="?", type=int, help="the training seed")
    parser.add_argument("out", nargs="?", help="the JSON file to write")
    parser.add_argument("method", nargs="?", default="recommended", help="a bench method (default: recommended)")
    parser.add_argument("--dataset", default="debtags", help="a bench data set (default: debtags)")
    parser.add_argument("--table", nargs="+", metavar="PATTERN", help="print the table of these files instead")
    args = parser.parse_args(argv)
    if args.table:
        print(table([p for pattern in args.table for p in glob.glob(pattern)]))
    elif args.seed is None or args.out is None:
        parser.error("give SEED and OUT (or --table PATTERN ...)")
    else:
        measure(args.seed, args.out, args.method, args.dataset)


if __name__ == "__main__":
    main()
