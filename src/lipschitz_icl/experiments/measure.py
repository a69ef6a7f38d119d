"""Measurements the experiments share, on runs (api.Run) and their metric series."""

from __future__ import annotations

import math

import numpy as np

from ..analysis import first_step
from ..api import Run
from ..fits import Fit, fit_loglog


def loss_times(run: Run, eps_list: list[float], relative: bool = False) -> dict[float, int | None]:
    """First recorded step with loss <= eps (times the initial loss when relative), per eps."""
    loss = run.series("loss")
    steps, vals = loss.index.to_numpy(), loss.to_numpy()
    scale = vals[0] if relative else 1.0
    return {eps: first_step(steps, vals, eps * scale, above=False) for eps in eps_list}


def safe_fit(x: list[float], y: list[float | None], seeds: list[int] | None = None) -> Fit | None:
    """A log-log fit over the points whose y was measured (censored points dropped)."""
    keep = [i for i, v in enumerate(y) if v is not None and v > 0 and math.isfinite(v)]
    if len({x[i] for i in keep}) < 2:
        return None
    xs = np.array([x[i] for i in keep], dtype=float)
    ys = np.array([y[i] for i in keep], dtype=float)
    sd = None if seeds is None else np.array([seeds[i] for i in keep])
    return fit_loglog(xs, ys, seeds=sd)


def fit_dict(fit: Fit | None, prefix: str) -> dict[str, float | None]:
    if fit is None:
        return {f"{prefix}_slope": None, f"{prefix}_lo": None, f"{prefix}_hi": None, f"{prefix}_n": 0}
    return {f"{prefix}_slope": fit.slope, f"{prefix}_lo": fit.lo, f"{prefix}_hi": fit.hi, f"{prefix}_n": fit.n}


def slope_matches(fit: Fit | None, predicted: float, tol: float = 0.3) -> tuple[bool, bool]:
    """(agrees, disagrees): agrees when the 95% interval contains the prediction or the slope is
    within tol of it; disagrees when the interval excludes it and the slope is more than tol off."""
    if fit is None or not math.isfinite(fit.lo) or not math.isfinite(fit.hi):
        return False, False
    inside = fit.lo <= predicted <= fit.hi
    close = abs(fit.slope - predicted) <= tol
    return inside or close, (not inside) and not close


def breakpoint_loglog(x: np.ndarray, y: np.ndarray) -> float | None:
    """The x at which a continuous two-segment line in log-log space fits best (None if < 5 points)."""
    order = np.argsort(x)
    lx, ly = np.log(x[order]), np.log(y[order])
    if len(lx) < 5:
        return None
    best, best_sse = None, math.inf
    for b in np.unique(lx)[1:-1]:
        A = np.column_stack([np.ones_like(lx), lx, np.maximum(lx - b, 0.0)])
        coef, *_ = np.linalg.lstsq(A, ly, rcond=None)
        sse = float(np.sum((A @ coef - ly) ** 2))
        if sse < best_sse:
            best, best_sse = b, sse
    return float(np.exp(best)) if best is not None else None


def intervals_overlap(a: Fit | None, b: Fit | None) -> bool | None:
    if a is None or b is None:
        return None
    return not (a.hi < b.lo or b.hi < a.lo)
