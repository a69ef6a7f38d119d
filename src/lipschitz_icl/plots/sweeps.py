"""Figures across runs (a sweep directory, its index, or a list of Runs): T against L/L*
with fits and the theory's slope, the phase diagram over (L/L*, eta), and the measured time
against the theory's flat-regime scale T_f. Each returns a Figure."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ..api import Run
from ..errors import UserInputError
from ..fits import PREDICTED_SLOPES, Fit, fit_loglog
from ..store import SUMMARY_FILE
from ..sweep import load_index
from ..theory import flat_time_scale
from .style import OUTCOME_COLORS, as_runs, colors, log_axis, new_figure

SweepLike = str | Path | pd.DataFrame | Iterable[Run | str | Path]
COLUMNS = ["L", "L_star", "lr", "K", "eps", "delta", "Delta", "T_1", "T_eps", "status", "regime", "seed"]
TIMES = {"T_eps": "T$_\\epsilon$ (loss $\\leq$ eps)", "T_1": "T$_1$ (end of fast phase)"}


def _summary_of(stored: object, run_dir: str | None) -> dict:
    """A run's summary: stored in the index (JSON text), else its run directory's summary.json."""
    try:
        if isinstance(stored, str):
            return json.loads(stored)
        return json.loads((Path(run_dir) / SUMMARY_FILE).read_text()) if run_dir else {}
    except (OSError, ValueError):
        return {}  # a failed or pending run may have no summary: its settings are unknown


def _from_index(index: pd.DataFrame) -> pd.DataFrame:
    """COLUMNS from an index table: eta, K, eps and delta from each run's summary (the ``summary`` column of
    ``load_index(dir, stored_json=True)``, else its run directory's summary.json), the rest from the index."""
    if "summary" not in index and index.attrs.get("sweep_dir"):  # a plain load_index table: its stored summaries
        by_hash = load_index(index.attrs["sweep_dir"], stored_json=True).set_index("config_hash")["summary"]
        index = index.assign(summary=index["config_hash"].map(by_hash))
    stored = index["summary"] if "summary" in index else [None] * len(index)
    dirs = index["run_dir"] if "run_dir" in index else [None] * len(index)
    summaries = [_summary_of(j, d) for j, d in zip(stored, dirs, strict=True)]
    frame = pd.DataFrame({col: [s.get(col) for s in summaries] for col in ("lr", "K", "eps", "delta")})
    for col in ("L", "L_star", "Delta", "T_1", "T_eps", "status", "regime", "seed"):
        frame[col] = index[col].to_numpy()
    return frame


def sweep_frame(source: SweepLike) -> pd.DataFrame:
    """One row per run with the columns the sweep figures use (COLUMNS) and ``L_over_Lstar``.

    ``source``: a sweep directory (its index.sqlite, with each run's summary for eta, K and eps, which
    the index's runs table does not hold), its ``load_index`` table, a DataFrame already holding COLUMNS, or Runs."""
    if isinstance(source, pd.DataFrame) and "config_hash" in source and not set(COLUMNS) <= set(source.columns):
        frame = _from_index(source)  # a load_index table: the settings from each run's summary
    elif isinstance(source, pd.DataFrame):
        frame = source.copy()
    elif isinstance(source, (str, Path)):
        frame = _from_index(load_index(source, stored_json=True))
    else:
        frame = pd.DataFrame([{col: r.summary.get(col) for col in COLUMNS} for r in as_runs(source)])
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise UserInputError(f"the runs table lacks {', '.join(missing)} (needs: {', '.join(COLUMNS)})")
    numeric = [c for c in COLUMNS if c not in ("status", "regime", "seed")]
    frame[numeric] = frame[numeric].apply(pd.to_numeric, errors="coerce").astype(np.float64)
    frame["L_over_Lstar"] = frame["L"] / frame["L_star"]  # L / L*, L* = 1/(Delta delta)
    return frame


def _fit_line(ax: Axes, x: np.ndarray, fit: Fit, label: str, **style) -> None:
    xs = np.geomspace(x.min(), x.max(), 50)
    ax.plot(xs, np.exp(fit.intercept) * xs**fit.slope, label=label, **style)


def _theory_line(ax: Axes, x: np.ndarray, y: np.ndarray, slope: float, label: str) -> None:
    """A reference line of the given log-log slope through the geometric mean of the points
    (the theory fixes the slope, not the constant)."""
    lx, ly = np.log(x).mean(), np.log(y).mean()
    xs = np.geomspace(x.min(), x.max(), 50)
    ax.plot(xs, np.exp(ly + slope * (np.log(xs) - lx)), color="gray", ls="--", lw=1, label=label)


def _fit_label(name: str, fit: Fit) -> str:
    return f"fit {name}: slope {fit.slope:.2f} [{fit.lo:.2f}, {fit.hi:.2f}] (n={fit.n})"


def time_vs_lipschitz(source: SweepLike, time: str = "T_eps") -> Figure:
    """``time`` (T_eps or T_1) of every run against L/L* on log-log axes, with least-squares
    fits (95 % interval over seeds) in the flat regime (L < L*, solid) and the sharp one
    (L > L*, dash-dotted), one colour per step size eta, and the theory's flat-regime slope
    d log T / d log L = -2 (from T_f) as a dashed line.

    What to look at: whether the flat-regime fit's interval holds -2, and whether the slope
    changes at L/L* = 1 (the dotted vertical line). Each marker is one run; runs that never
    reached ``time`` are left out and counted in the title."""
    if time not in TIMES:
        raise UserInputError(f"time must be one of {', '.join(TIMES)}, got {time!r}")
    frame = sweep_frame(source)
    ok = frame[np.isfinite(frame[time]) & (frame[time] > 0) & np.isfinite(frame["L_over_Lstar"])]
    fig, axes = new_figure(1, 1)
    ax = axes[0, 0]
    etas = sorted(ok["lr"].dropna().unique())
    for eta, color in zip(etas, colors(len(etas)), strict=True):
        runs = ok[ok["lr"] == eta]
        ax.plot(runs["L_over_Lstar"], runs[time], "o", color=color, ms=4, label=f"runs, $\\eta$ = {eta:g}")
        flat, sharp = runs[runs.L_over_Lstar < 1], runs[runs.L_over_Lstar > 1]
        for name, part, style in (("flat", flat, "-"), ("sharp", sharp, "-.")):
            x = part["L_over_Lstar"].to_numpy()
            if np.unique(x).size >= 2:
                fit = fit_loglog(x, part[time].to_numpy(), part["seed"].to_numpy())
                _fit_line(ax, x, fit, _fit_label(name, fit), color=color, ls=style)
    if len(ok) >= 2:
        _theory_line(ax, ok["L_over_Lstar"].to_numpy(), ok[time].to_numpy(), PREDICTED_SLOPES["L"],
                     f"theory (flat): slope {PREDICTED_SLOPES['L']}")
    ax.axvline(1.0, color="gray", ls=":", lw=1, label="L = L* = 1/($\\Delta\\delta$)")
    log_axis(ax, "x")
    log_axis(ax, "y")
    ax.set(xlabel="L / L*", ylabel=TIMES[time], title=f"{len(ok)} runs ({len(frame) - len(ok)} never reached it)")
    ax.legend(fontsize=7)
    return fig


def phase_diagram(source: SweepLike) -> Figure:
    """Every (L/L*, eta) point of a sweep coloured by its outcome (converged, budget spent,
    diverged, failed); with several seeds at a point, the most frequent outcome, its share
    written beside the marker.

    What to look at: the boundary between converged and diverged runs (the largest stable
    step shrinks as L grows, roughly eta_max ~ L^-2), and where the step budget runs out in
    the flat regime (L < L*, left of the dotted line)."""
    frame = sweep_frame(source).dropna(subset=["L_over_Lstar", "lr"])
    if frame.empty:
        raise UserInputError("no run has both L/L* and eta (lr) recorded")
    cells = frame.groupby([frame["L"].round(12), frame["lr"].round(12)])
    fig, axes = new_figure(1, 1)
    ax = axes[0, 0]
    for _, cell in cells:
        counts = cell["status"].value_counts()
        outcome, share = str(counts.index[0]), counts.iloc[0] / len(cell)
        x, y = float(cell["L_over_Lstar"].mean()), float(cell["lr"].iloc[0])
        ax.plot(x, y, "s", ms=9, color=OUTCOME_COLORS.get(outcome, "black"))
        if share < 1:
            ax.annotate(f"{share:.0%}", (x, y), textcoords="offset points", xytext=(6, 4), fontsize=6)
    ax.axvline(1.0, color="gray", ls=":", lw=1)
    present = [s for s in OUTCOME_COLORS if s in set(frame["status"])]
    handles = [Line2D([], [], marker="s", ls="", color=OUTCOME_COLORS[s], label=s) for s in present]
    handles.append(Line2D([], [], color="gray", ls=":", label="L = L*"))
    log_axis(ax, "x")
    log_axis(ax, "y")
    ax.set(xlabel="L / L*", ylabel="step size $\\eta$", title=f"outcomes of {len(frame)} runs")
    ax.legend(handles=handles, fontsize=7)
    return fig


def time_vs_theory(source: SweepLike, time: str = "T_eps") -> Figure:
    """Measured ``time`` against the theory's flat-regime scale
    T_f = K log(K/eps) / (eta delta^2 L^2 Delta^2), coloured by regime, with a fitted slope and
    a dashed slope-1 line through the points (T_f has an unknown constant, so only the slope
    and the spread about it mean something).

    What to look at: flat-regime runs on a line of slope 1 say T scales as T_f; sharp-regime
    runs above it are slower than the flat-regime bound."""
    if time not in TIMES:
        raise UserInputError(f"time must be one of {', '.join(TIMES)}, got {time!r}")
    frame = sweep_frame(source)
    frame["T_f"] = [
        flat_time_scale(int(r.K), r.eps, r.lr, r.delta, r.L, r.Delta) if r[["K", "eps", "lr", "delta", "L", "Delta"]]
        .notna().all() else np.nan
        for _, r in frame.iterrows()
    ]
    ok = frame[np.isfinite(frame["T_f"]) & np.isfinite(frame[time]) & (frame[time] > 0)]
    fig, axes = new_figure(1, 1)
    ax = axes[0, 0]
    for regime, part in ok.groupby("regime"):
        color = {"flat": "tab:blue", "sharp": "tab:red"}.get(str(regime), "tab:purple")
        ax.plot(part["T_f"], part[time], "o", ms=4, color=color, label=f"{regime} ({len(part)})")
    if np.unique(ok["T_f"]).size >= 2:
        fit = fit_loglog(ok["T_f"].to_numpy(), ok[time].to_numpy(), ok["seed"].to_numpy())
        _fit_line(ax, ok["T_f"].to_numpy(), fit, _fit_label("all", fit), color="black", lw=1)
        _theory_line(ax, ok["T_f"].to_numpy(), ok[time].to_numpy(), 1.0, "slope 1 (T $\\propto$ T$_f$)")
    log_axis(ax, "x")
    log_axis(ax, "y")
    ax.set(xlabel="theory T$_f$ (scale, constant unknown)", ylabel=TIMES[time],
           title=f"{len(ok)} runs ({len(frame) - len(ok)} left out: no {time} or no T_f)")
    ax.legend(fontsize=7)
    return fig
