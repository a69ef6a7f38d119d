"""Shared pieces of the plotting API: a fresh Figure (no pyplot state, shown inline by Jupyter),
log axes whose tick labels never overlap, outcome colours, and the run/sweep inputs every function
accepts. Nothing here touches matplotlib's global state (backend, rcParams, pyplot's figures)."""

from __future__ import annotations

import io
import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogFormatterSciNotation, LogLocator, MaxNLocator, NullFormatter

from ..api import Run, load_run

PANEL_SIZE = (4.6, 3.4)  # inches per panel
DPI = 110  # dots per inch of every figure the toolkit makes, on screen and in its PNG files
GRID = {"visible": True, "alpha": 0.3}  # every panel's grid, set per axes (never through rcParams)
MAX_LOG_TICKS = 6  # labelled ticks on a log axis, at most
# how each run status is drawn (phase diagram, sweep scatter plots)
OUTCOME_COLORS = {
    "converged": "tab:green",
    "budget": "tab:orange",
    "diverged": "tab:red",
    "interrupted": "tab:purple",
    "failed": "tab:gray",
    "pending": "lightgray",
    "running": "lightgray",
}
T1_STYLE = {"color": "tab:blue", "ls": ":", "lw": 1.2}  # T_1: end of the fast phase
TEPS_STYLE = {"color": "tab:red", "ls": "--", "lw": 1.2}  # T_eps: first step with loss <= eps


class NotebookFigure(Figure):
    """A matplotlib Figure on its own Agg canvas, outside pyplot's figure manager, that Jupyter shows
    as a PNG when it is a cell's value (``_repr_png_``, or IPython's own Figure formatter where the
    inline backend registered one). Nothing stays open after a script or a report drops it, and the
    user's pyplot figures and backend are left as they are."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("dpi", DPI)
        super().__init__(*args, **kwargs)
        FigureCanvasAgg(self)

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        self.savefig(buf, format="png", dpi=self.dpi, bbox_inches="tight")
        return buf.getvalue()


def new_figure(ncols: int = 1, nrows: int = 1, *, width: float = PANEL_SIZE[0], height: float = PANEL_SIZE[1],
               layout: str | None = "constrained") -> tuple[NotebookFigure, np.ndarray]:
    """A NotebookFigure (``width`` x ``height`` inches per panel) and its (nrows, ncols) array of axes,
    each with the toolkit's grid; pyplot is never used, so nothing stays open in a global figure manager."""
    fig = NotebookFigure(figsize=(width * ncols, height * nrows), layout=layout)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for ax in axes.flat:
        ax.grid(**GRID)
    return fig, axes


def _decades(lo: float, hi: float) -> float:
    return math.log10(hi / lo) if lo > 0 and hi > lo else 0.0


def log_axis(ax: Axes, which: str = "y") -> None:
    """Put ``which`` ("x" or "y") on a log scale with at most MAX_LOG_TICKS labelled ticks.

    Over less than 0.7 decade the labelled ticks are evenly spaced round values (1.2, 1.4, ...);
    over less than two decades 1, 2, 5 x 10^k written plainly (0.5, 2, 200); otherwise powers
    of ten, thinned by LogLocator's numticks. Minor ticks are never labelled, so labels cannot
    crowd into each other (matplotlib's default labels minor ticks on short log ranges)."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    lo, hi = sorted(ax.get_xlim() if which == "x" else ax.get_ylim())
    _log_ticks(axis, lo, hi)


def _log_ticks(axis, lo: float, hi: float) -> None:
    """log_axis's locators and formatters for a log axis shown over [lo, hi]."""
    if _decades(lo, hi) < 0.7:  # too short for 1-2-5: evenly spaced round values (log ~ linear here)
        axis.set_major_locator(MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10]))
        axis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:g}"))
    elif _decades(lo, hi) < 2.0:
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0), numticks=MAX_LOG_TICKS))
        axis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:g}"))
    else:
        axis.set_major_locator(LogLocator(base=10, subs=(1.0,), numticks=MAX_LOG_TICKS))
        axis.set_major_formatter(LogFormatterSciNotation(base=10))
    axis.set_minor_locator(LogLocator(base=10, subs=np.arange(2, 10) * 1.0, numticks=12))
    axis.set_minor_formatter(NullFormatter())


def tidy_log_axes(fig: Figure) -> None:
    """Give every log axis of ``fig`` whose ticks were left to matplotlib the ticks of ``log_axis``
    (at most MAX_LOG_TICKS labels, minor ticks unlabelled), at its current limits. Axes with ticks
    set by hand (a FixedLocator, e.g. ``experiments.figures.plain_log_ticks``) are left alone."""
    for ax in fig.axes:
        for which, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            if axis.get_scale() == "log" and type(axis.get_major_locator()) is LogLocator:
                _log_ticks(axis, *sorted(ax.get_xlim() if which == "x" else ax.get_ylim()))


def colors(n: int) -> list:
    """n colours from viridis (the darkest 90 % of it, so none is too pale)."""
    cmap = colormaps["viridis"]
    return [cmap(i / max(1, n - 1) * 0.9) for i in range(n)]


def steps_marker_every(n_points: int) -> dict:
    """Line style for recorded series: every recorded point is a marker while the grid is
    coarse (few points), so straight segments between them are not read as plateaus."""
    return {"marker": "o", "ms": 2.5} if n_points <= 80 else {"marker": ".", "ms": 1.5}


def as_runs(runs: Run | str | Path | Iterable[Run | str | Path]) -> list[Run]:
    """One Run, a run directory, or a list of either, as a list of Runs."""
    items = [runs] if isinstance(runs, (Run, str, Path)) else list(runs)
    return [r if isinstance(r, Run) else load_run(r) for r in items]


def run_label(run: Run) -> str:
    """A short legend label: the run's directory name, else task and L."""
    if run.dir is not None:
        return Path(run.dir).name
    return f"{run.summary.get('task', run.config.task.kind)} L={run.summary.get('L', run.config.task.L):.3g}"
