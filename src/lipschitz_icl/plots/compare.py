"""Runs overlaid on shared axes, each labelled by the config keys in which the runs differ."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ..api import Run
from ..compare import differing_keys, run_labels
from ..errors import UserInputError
from .style import TEPS_STYLE, as_runs, colors, log_axis, new_figure, steps_marker_every

LOG_METRICS = {"loss", "test_error", "test_error_other", "grad_norm"}  # positive, over decades: log y


def scalar_metrics(run: Run) -> list[str]:
    """The metrics of a run recorded once per step (no feature index)."""
    rows = run.metrics[run.metrics["k"].isna()] if not run.metrics.empty else run.metrics
    return sorted(set(rows["metric"])) if len(rows) else []


def compare(runs: Iterable[Run | str | Path], metric: str = "loss", log_steps: bool = False) -> Figure:
    """``metric`` (a scalar metric: loss, test_error, attn_min, attn_mean, grad_norm, ...) of several runs
    against step on one pair of axes, each run labelled by the config keys that differ between them
    (``compare.differing_keys``: ``task.L=1, train.lr=0.5``) and its T_eps marked on its curve.

    What to look at: how the differing keys move the curve (a shift along step at the same shape is a
    rescaling of time, e.g. eta L^2; a change of shape is a different dynamics). ``log_steps`` puts step
    on a log axis (step 0 left out)."""
    items = as_runs(runs)
    if len(items) < 1:
        raise UserInputError("compare needs at least one run")
    common = set.intersection(*(set(scalar_metrics(r)) for r in items))
    if metric not in common:
        raise UserInputError(f"metric {metric!r} is not a scalar metric of every run (allowed: "
                             f"{', '.join(sorted(common)) or 'none in common'})")
    keys = differing_keys(items)
    fig, axes = new_figure(1, 1, width=6.4, height=4.2)
    ax = axes[0, 0]
    for run, label, color in zip(items, run_labels(items, keys), colors(len(items)), strict=True):
        series = run.series(metric)
        if log_steps:
            series = series[series.index > 0]
        ax.plot(series.index, series.to_numpy(), color=color, label=label, **steps_marker_every(len(series)))
        t_eps = run.summary.get("T_eps")
        if t_eps is not None and t_eps in series.index:
            ax.plot([t_eps], [series.loc[t_eps]], marker="|", ms=14, color=TEPS_STYLE["color"], ls="")
    if metric in LOG_METRICS and all((r.series(metric) > 0).all() for r in items):
        log_axis(ax, "y")
    if log_steps:
        log_axis(ax, "x")
    differ = ", ".join(keys) if keys else "nothing in their configs"
    ax.set(xlabel="step", ylabel=metric, title=f"{metric} of {len(items)} runs differing in {differ}")
    t_eps = Line2D([], [], marker="|", ms=12, ls="", color=TEPS_STYLE["color"],
                   label="T$_\\epsilon$ (loss $\\leq$ eps)")
    ax.legend(handles=[*ax.get_legend_handles_labels()[0], t_eps], fontsize=8)
    return fig
