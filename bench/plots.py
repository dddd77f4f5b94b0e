"""PNG plots of the benchmark: sensitivity curves, tail precision-recall, long-tail F1, disagreement over training.

Each function takes the loaded results and writes one PNG per data set (or grid); it returns the paths written.

Example:
    >>> paths = tail_pr_plots(results, Path("bench/plots"), rows=("cdgt", "rarity_bce"))  # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cdgt.bench.aggregate import Summary, runs_of
from cdgt.pipeline.plots import pyplot


def _save(fig: Any, path: Path, layout: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if layout:
        fig.tight_layout()
    fig.savefig(path, dpi=100)
    pyplot().close(fig)
    return path


def sensitivity_plot(table: dict[tuple[str, str], Summary], key: str, points: dict[float, str],
                     out: Path) -> Path | None:
    """Rare-F1 and micro-F1 (mean ± std over seeds) against one hyper-parameter, one line per data set."""
    datasets = sorted({d for d, r in table if r in points.values() and r != "cdgt"})
    if not datasets:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for ax, (metric, name) in zip(axes, (("overall/rare_f1", "Rare-F1"), ("overall/micro_f1", "Micro-F1"))):
        for d in datasets:
            xs = [x for x, r in points.items() if (d, r) in table]
            ms = [100 * table[(d, points[x])].mean[metric] for x in xs]
            ss = [100 * table[(d, points[x])].std[metric] for x in xs]
            ax.errorbar(xs, ms, yerr=ss, marker="o", capsize=3, label=d)
        ax.set_xlabel(key)
        ax.set_ylabel(f"{name} (%)")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"sensitivity to {key}")
    return _save(fig, out / f"sensitivity_{key}.png")


def tail_pr_plots(results: list[dict[str, Any]], out: Path, rows: tuple[str, ...]) -> list[Path]:
    """Tail-label micro precision vs recall (seed 0 of each row), one PNG per data set."""
    return _per_dataset(results, out, rows, "tail_pr", _draw_pr)


def long_tail_plots(results: list[dict[str, Any]], out: Path, rows: tuple[str, ...]) -> list[Path]:
    """Micro-F1 per label-frequency decile (head on the left), one PNG per data set."""
    return _per_dataset(results, out, rows, "long_tail", _draw_long_tail)


def _per_dataset(results, out, rows, name, draw) -> list[Path]:
    paths = []
    for d in sorted({r["dataset"]["name"] for r in results}):
        present = [(row, runs[0]) for row in rows if (runs := runs_of(results, d, row))]
        if len(present) < 2:
            continue
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(5.5, 4))
        for row, run in present:
            draw(ax, row, run["curves"][name])
        ax.set_title(f"{d}: {name.replace('_', ' ')}")
        ax.legend(fontsize=7)
        paths.append(_save(fig, out / f"{name}_{d}.png"))
    return paths


def _draw_pr(ax, row: str, curve: dict[str, list[float]]) -> None:
    ax.plot(curve["recall"], curve["precision"], label=row)
    ax.set_xlabel("recall (tail labels)")
    ax.set_ylabel("precision (tail labels)")


def _draw_long_tail(ax, row: str, curve: dict[str, list[float]]) -> None:
    ax.plot(curve["bin"], [100 * f for f in curve["f1"]], marker=".", label=row)
    ax.set_xlabel("label-frequency decile (1 = most frequent)")
    ax.set_ylabel("micro-F1 (%)")


def disagreement_plots(results: list[dict[str, Any]], out: Path, row: str = "cdgt") -> list[Path]:
    """KL on head and tail overlap labels and the potential Phi per epoch (training; seed 0), per data set."""
    paths = []
    for d in sorted({r["dataset"]["name"] for r in results}):
        runs = [r for r in runs_of(results, d, row) if r.get("history", {}).get("kl_tail")]
        if not runs or not any(runs[0]["history"]["kl_head"] + runs[0]["history"]["kl_tail"]):
            continue  # no overlap labels: nothing to draw
        h = runs[0]["history"]
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(5.5, 4))
        epochs = range(1, len(h["kl_tail"]) + 1)
        ax.plot(epochs, h["kl_head"], marker=".", label="KL head labels")
        ax.plot(epochs, h["kl_tail"], marker=".", label="KL tail labels")
        ax.set_xlabel("epoch")
        ax.set_ylabel("mean KL on overlap labels")
        twin = ax.twinx()
        twin.plot(epochs, h["potential"], color="black", ls="--", label="potential Phi")
        twin.set_ylabel("Phi")
        ax.legend(loc="upper left", fontsize=7)
        twin.legend(loc="upper right", fontsize=7)
        ax.set_title(f"{d}: {row}")
        paths.append(_save(fig, out / f"disagreement_{d}.png"))
    return paths


def learning_curves(results: list[dict[str, Any]], out: Path, rows: tuple[str, ...]) -> list[Path]:
    """Validation P@1 and PSP@5 per epoch (seed 0) of every CD-GTMLL row that recorded them, one PNG per data set."""
    paths = []
    for d in sorted({r["dataset"]["name"] for r in results}):
        present = [(row, runs[0]["history"]) for row in rows if (runs := runs_of(results, d, row))
                   and runs[0].get("history", {}).get("val_p_at_1")]
        if not present:
            continue
        plt = pyplot()
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.5 + 0.18 * len(present)))
        for row, history in present:
            for ax, key in zip(axes, ("val_p_at_1", "val_psp_at_5")):
                ax.plot(range(1, len(history[key]) + 1), [100 * v for v in history[key]], marker=".",
                        label=row if len(row) <= 110 else row[:107] + "...")
        for ax, title in zip(axes, ("validation P@1 (%)", "validation PSP@5 (%)")):
            ax.set_xlabel("epoch")
            ax.set_title(f"{d}: {title}")
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", fontsize=6, ncol=1, frameon=False)
        fig.tight_layout(rect=(0, 0.035 * len(present) + 0.02, 1, 1))  # the legend below both panels
        paths.append(_save(fig, out / f"learning_curves_{d}.png", layout=False))
    return paths
