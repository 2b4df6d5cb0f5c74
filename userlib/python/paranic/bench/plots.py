"""What the benchmarks' plots share: matplotlib without a display, the style of a
log-scale axis (bars at 0, 1, ... with their labels, or lines), and the figure's
title and file."""

from __future__ import annotations

import sys
from typing import Any, Callable, Sequence


def pyplot() -> Any:
    """matplotlib.pyplot drawing into files only (the Agg backend: no display needed)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def log_axis(ax: Any, ylabel: str, title: str, *, ticks: Sequence[str] | None = None,
             tick_size: float | None = None, legend_size: float | None = None, grid_axis: str = "y") -> None:
    """A log-scale y axis with its label and title and a grid on ``grid_axis``;
    ``ticks``: the labels of bars at x = 0, 1, ...; ``legend_size``: draw the legend."""
    if ticks is not None:
        ax.set_xticks(list(range(len(ticks))))
        ax.set_xticklabels(list(ticks), fontsize=tick_size)
    ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, axis=grid_axis, which="both", alpha=0.3)
    if legend_size:
        ax.legend(fontsize=legend_size)


def save(fig: Any, path: str, title: str, title_size: float = 9) -> None:
    """The figure's title, a tight layout, written to ``path`` (110 dpi) and closed."""
    import matplotlib.pyplot as plt

    fig.suptitle(title, fontsize=title_size)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(draw: Callable[[list[dict], str], None], rows: list[dict], path: str, what: str) -> int:
    """``--plot PATH`` of a bench command: ``draw(rows, path)``; 0, or 1 with the reason
    when there is nothing to plot (``what``: the command, for the message)."""
    try:
        draw(rows, path)
    except ValueError as e:
        print(f"{what}: no plot: {e}", file=sys.stderr)
        return 1
    print(f"plot written to {path}", file=sys.stderr)
    return 0
