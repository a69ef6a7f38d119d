"""Measurements the experiments share: on configs (L*), on runs (api.Run) and their step-indexed
metric series, and log-log fits of the measured times."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..analysis import first_step
from ..api import Run
from ..config import Config
from ..fits import Fit, fit_loglog
from ..problem import build_problem
from ..theory import theory_of


def L_star_of(cfg: Config) -> float:
    """The threshold L* = 1 / (Delta delta) of the config's setting (theory.theory_of)."""
    return theory_of(build_problem(cfg)).L_star


def crossing_step(series: pd.Series, level: float, above: bool = True) -> int | None:
    """First recorded step at which a step-indexed series reaches level (>= when above, else <=)."""
    return first_step(series.index.to_numpy(), series.to_numpy(), level, above)


def tail_mean(series: pd.Series, frac: float = 0.2) -> float:
    """Mean of the last ``frac`` of the recorded values (smooths minibatch noise)."""
    vals = series.dropna().to_numpy()
    if vals.size == 0:
        return math.nan
    return float(vals[-max(1, int(round(frac * vals.size))):].mean())


def phase_ratio(attn_min: pd.Series, K: int, hi: float = 0.9) -> tuple[float, int | None, int | None, int | None]:
    """(rho, T_start, T_half, T_hi): rho = (T_hi - T_half) / (T_half - T_start), the slow creep from
    1/2 to ``hi`` over the fast rise to 1/2; T_start is the first step 10% of the way from 1/K to 1/2
    (so a plateau before the rise is not counted as the fast phase). rho is nan when a level is
    not reached."""
    start_level = 1 / K + 0.1 * (0.5 - 1 / K)
    t_s, t_h, t_9 = (crossing_step(attn_min, start_level), crossing_step(attn_min, 0.5),
                     crossing_step(attn_min, hi))
    if t_s is None or t_h is None or t_9 is None:
        return math.nan, t_s, t_h, t_9
    return (t_9 - t_h) / max(t_h - t_s, 1), t_s, t_h, t_9


def loss_times(run: Run, eps_list: list[float], relative: bool = False) -> dict[float, int | None]:
    """First recorded step with loss <= eps (times the initial loss when relative), per eps."""
    loss = run.series("loss")
    steps, vals = loss.index.to_numpy(), loss.to_numpy()
    scale = vals[0] if relative else 1.0
    return {eps: first_step(steps, vals, eps * scale, above=False) for eps in eps_list}


def crossing_times(run: Run, eps_list: list[float]) -> dict[float, float | None]:
    """When the loss crosses eps, in fractional steps: log-loss interpolated linearly between the last
    recorded step above eps and the first at or below it (exact to the step when every step is
    recorded; no tie between runs that cross within the same step). None when never reached."""
    loss = run.series("loss")
    steps, vals = loss.index.to_numpy(dtype=float), loss.to_numpy(dtype=float)
    out: dict[float, float | None] = {}
    for eps in eps_list:
        hit = np.flatnonzero(vals <= eps)
        if not len(hit):
            out[eps] = None
        elif hit[0] == 0:
            out[eps] = 0.0
        else:
            j = hit[0]
            a, b = math.log(vals[j - 1]), math.log(max(vals[j], 1e-300))
            frac = (a - math.log(eps)) / (a - b) if a > b else 1.0
            out[eps] = float(steps[j - 1] + frac * (steps[j] - steps[j - 1]))
    return out


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

def loglog_slope(x: list[float], y: list[float]) -> tuple[float, float]:
    """Least-squares slope of log y on log x and its standard error (nan when undetermined)."""
    pts = [(a, b) for a, b in zip(x, y, strict=True) if a and b and a > 0 and b > 0 and math.isfinite(b)]
    if len(pts) < 2:
        return math.nan, math.nan
    lx, ly = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    A = np.column_stack([np.ones_like(lx), lx])
    coef, *_ = np.linalg.lstsq(A, ly, rcond=None)
    if len(pts) == 2:
        return float(coef[1]), math.nan
    resid = ly - A @ coef
    s2 = float(resid @ resid) / (len(pts) - 2)
    se = math.sqrt(s2 / float(((lx - lx.mean()) ** 2).sum()))
    return float(coef[1]), se

def score_move_ratio(run: Run) -> float | None:
    """P2's R = mean_{k != n} |B_{k,n}(T_1) - B_{k,n}(0)| / mean_k |A_k(T_1) - A_k(0)|: how far the
    irrelevant scores B_{k,n} = v_n^T Q v_k move over the fast phase [0, T_1] against the target scores
    A_k = v_k^T Q v_k. None when T_1 was not reached or A did not move. With orthonormal features R >= 1/(K - 1),
    with equality when a row's B all move one way (the linear class): each row of the softmax gradient sums
    to zero, so a row's B move by -(its A's move) in sum. The geometry fixes R there, not the data."""
    T1 = run.summary["T_1"]
    if T1 is None:
        return None
    A, B = run.per_feature("A"), run.per_feature("B")
    dA = float((A.loc[T1] - A.iloc[0]).abs().to_numpy().mean())
    dB = float((B.loc[T1] - B.iloc[0]).abs().to_numpy().mean())
    return dB / dA if dA > 0 else None

def falling_crossing(x: list[float], y: list[float], level: float) -> float | None:
    """The x at which y first falls below ``level``, linearly interpolated between grid points
    (x increasing); x[0] when y starts below it, None when y never falls below it on the grid."""
    for i, (xi, yi) in enumerate(zip(x, y, strict=True)):
        if math.isfinite(yi) and yi < level:
            if i == 0:
                return float(xi)
            x0, y0 = x[i - 1], y[i - 1]
            return float(x0 + (y0 - level) / (y0 - yi) * (xi - x0))
    return None
