"""Scaling fits across runs: least-squares slope of log y against log x with a 95 % interval.

The flat-regime bound T_f = K log(K/eps) / (eta delta^2 L^2 Delta^2) predicts slopes of
log T against log L, log eta and log Delta (PREDICTED_SLOPES); in K it predicts K log K,
which is not a power law, so K has no entry.

Intervals: with seeds, one fit per seed and a Student-t interval over the per-seed slopes
(when at least two seeds each have two distinct x); otherwise the OLS standard error of the
pooled fit with a t quantile on n - 2 degrees of freedom. The t quantile is computed here (no
scipy): the regularised incomplete beta function by its continued fraction, then bisection.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

PREDICTED_SLOPES = {"L": -2, "lr": -1, "Delta": -2}  # d log T / d log x from T_f


@dataclass(frozen=True)
class Fit:
    slope: float
    intercept: float
    lo: float  # 95 % interval of the slope (nan when it cannot be estimated)
    hi: float
    n: int  # points used (positive, finite x and y)
    r2: float
    method: str = "ols"  # "ols" (pooled, OLS standard error) or "seeds" (t-interval over per-seed slopes)
    n_seeds: int = 0
    dropped: int = 0  # points left out: non-positive or non-finite x or y

    def contains(self, value: float) -> bool:
        """Whether the interval holds ``value`` (False when the interval is undefined)."""
        return bool(self.lo <= value <= self.hi)

    def as_dict(self) -> dict:
        return asdict(self)


# --------------------------------------------------------------------------- Student t


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    ln = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(ln) * _betacf(a, b, x) / a
    return 1.0 - math.exp(ln) * _betacf(b, a, 1 - x) / b


def t_cdf(t: float, df: float) -> float:
    """CDF of Student's t with df degrees of freedom."""
    tail = 0.5 * betainc(df / 2, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(q: float, df: float) -> float:
    """Inverse CDF of Student's t (bisection on t_cdf); t_quantile(0.975, 10) = 2.228..."""
    if not 0 < q < 1 or df <= 0:
        raise ValueError("need 0 < q < 1 and df > 0")
    if q < 0.5:
        return -t_quantile(1 - q, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < q:
        hi *= 2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if t_cdf(mid, df) < q else (lo, mid)
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


# --------------------------------------------------------------------------- fits


def _ols(lx: np.ndarray, ly: np.ndarray) -> tuple[float, float, float, float]:
    """(slope, intercept, standard error of the slope, r2) of ly on lx."""
    n = lx.size
    xm, ym = lx.mean(), ly.mean()
    sxx = float(((lx - xm) ** 2).sum())
    if n < 2 or sxx == 0:
        return math.nan, math.nan, math.nan, math.nan
    slope = float(((lx - xm) * (ly - ym)).sum()) / sxx
    intercept = float(ym - slope * xm)
    resid = ly - (intercept + slope * lx)
    sst = float(((ly - ym) ** 2).sum())
    r2 = 1.0 - float((resid**2).sum()) / sst if sst > 0 else 1.0
    se = math.sqrt(float((resid**2).sum()) / (n - 2) / sxx) if n > 2 else math.nan
    return slope, intercept, se, r2


def fit_loglog(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    seeds: Sequence | np.ndarray | None = None,
    level: float = 0.95,
) -> Fit:
    """Least-squares slope of log y on log x with a ``level`` interval (see the module doc)."""
    xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if xa.shape != ya.shape:
        raise ValueError(f"x and y differ in length ({xa.size} vs {ya.size})")
    ok = np.isfinite(xa) & np.isfinite(ya) & (xa > 0) & (ya > 0)
    lx, ly = np.log(xa[ok]), np.log(ya[ok])
    dropped = int((~ok).sum())
    slope, intercept, se, r2 = _ols(lx, ly)
    q = 0.5 + level / 2
    if seeds is not None:
        sa = np.asarray(seeds)[ok]
        per_seed = []
        for s in pd.unique(sa):
            m = sa == s
            if np.unique(lx[m]).size >= 2:
                per_seed.append(_ols(lx[m], ly[m])[:2])
        if len(per_seed) >= 2:
            slopes = np.array([p[0] for p in per_seed])
            b, a = float(slopes.mean()), float(np.mean([p[1] for p in per_seed]))
            half = t_quantile(q, len(slopes) - 1) * float(slopes.std(ddof=1)) / math.sqrt(len(slopes))
            resid, sst = ly - (a + b * lx), float(((ly - ly.mean()) ** 2).sum())
            r2s = 1.0 - float((resid**2).sum()) / sst if sst > 0 else 1.0
            return Fit(b, a, b - half, b + half, int(lx.size), r2s, "seeds", len(slopes), dropped)
    if math.isfinite(se) and lx.size > 2:
        half = t_quantile(q, lx.size - 2) * se
        lo, hi = slope - half, slope + half
    else:
        lo = hi = math.nan
    return Fit(slope, intercept, lo, hi, int(lx.size), r2, "ols", 0, dropped)


def scaling_table(df: pd.DataFrame, x_col: str, y_col: str, seed_col: str | None = None) -> Fit:
    """fit_loglog on two columns of a table (one row per run), intervals over ``seed_col``."""
    for col in (x_col, y_col, seed_col):
        if col is not None and col not in df.columns:
            raise KeyError(f"column {col!r} not in the table (columns: {', '.join(map(str, df.columns))})")
    seeds = df[seed_col].to_numpy() if seed_col else None
    return fit_loglog(
        pd.to_numeric(df[x_col], errors="coerce").to_numpy(np.float64),
        pd.to_numeric(df[y_col], errors="coerce").to_numpy(np.float64),
        seeds,
    )
