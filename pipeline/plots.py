"""Figures drawn in more than one place: `cdgt data stats` saves the label-frequency curve as a PNG and the
trainer's TensorBoard shows the same figure (pipeline/callbacks.py). matplotlib loads on first use, on the Agg
backend (no display), so importing this module stays light.

Example:
    >>> fig = frequency_curve(np.array([1, 9, 0, 3]), n_head=1, n_tail=1, title="M = 10, L = 4")
    >>> fig.axes[0].get_title(), [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    ('M = 10, L = 4', ['head (1)', 'tail (1)'])
    >>> pyplot().close(fig)
"""

from __future__ import annotations

from typing import Any

import numpy as np


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def frequency_curve(counts: np.ndarray, n_head: int, n_tail: int, title: str = "",
                    figsize: tuple[float, float] = (5, 3.5)) -> Any:
    """Log-log training count against frequency rank (a count of 0 drawn at 0.5), the `n_head` most frequent labels
    shaded as head and the `n_tail` least frequent as tail; returns the figure."""
    ordered = np.sort(np.asarray(counts, dtype=np.float64))[::-1]
    fig, ax = pyplot().subplots(figsize=figsize)
    ax.loglog(np.arange(1, ordered.size + 1), np.maximum(ordered, 0.5), lw=1.5)
    if n_head:
        ax.axvspan(1, n_head, alpha=0.15, color="tab:green", label=f"head ({n_head})")
    if n_tail:
        ax.axvspan(max(1, ordered.size - n_tail + 1), ordered.size, alpha=0.15, color="tab:red",
                   label=f"tail ({n_tail})")
    ax.set_xlabel("label rank (by training frequency)")
    ax.set_ylabel("training positives (0 drawn at 0.5)")
    if title:
        ax.set_title(title)
    if n_head or n_tail:
        ax.legend()
    fig.tight_layout()
    return fig
