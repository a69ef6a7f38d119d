"""Uncertainty the verdicts can rest on: seeded bootstrap intervals over seeds or settings, and
equivalence margins stated in a criterion before the run.

Every interval here is deterministic (its resampling generator is seeded) and is a percentile
bootstrap over independent units (seeds, or the settings of a sweep), never a Monte-Carlo-only
standard error. An equivalence test asks whether a whole interval lies inside a stated margin
(``within_margin``): "equal slopes" means within +-margin, not "intervals overlap".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

LEVEL = 0.95
RESAMPLES = 2000


def _finite(values: Sequence[float | None]) -> np.ndarray:
    arr = np.array([v for v in values if v is not None], dtype=float)
    return arr[np.isfinite(arr)]


def bootstrap_interval(values: Sequence[float | None], statistic: Callable[[np.ndarray], float] = np.mean,
                       seed: int = 0, level: float = LEVEL, resamples: int = RESAMPLES) -> list[float]:
    """Percentile bootstrap interval [low, high] of ``statistic`` over independent values (None
    and non-finite values dropped). One value gives [v, v] (no spread measured); none gives nans."""
    arr = _finite(values)
    if arr.size == 0:
        return [math.nan, math.nan]
    if arr.size == 1 or np.all(arr == arr[0]):
        v = float(statistic(arr))
        return [v, v]
    res = stats.bootstrap((arr,), statistic, n_resamples=resamples, confidence_level=level, method="percentile",
                          rng=np.random.default_rng(seed), vectorized=False)
    return [float(res.confidence_interval.low), float(res.confidence_interval.high)]


def loglog_fit_slope(x: np.ndarray, y: np.ndarray) -> float:
    """Least-squares slope of log y on log x; nan with fewer than two distinct x."""
    lx, ly = np.log(x), np.log(y)
    if np.unique(lx).size < 2:
        return math.nan
    return float(np.polyfit(lx, ly, 1)[0])


def bootstrap_loglog_slope(
    x: Sequence[float], y: Sequence[float | None], groups: Sequence[int] | None = None,
    seed: int = 0, level: float = LEVEL, resamples: int = RESAMPLES,
) -> tuple[float, list[float]]:
    """(slope, [low, high]): the log-log slope of y on x and its percentile bootstrap interval.

    Resampled by ``groups`` (e.g. the config seed of each point: a whole seed's curve at a time)
    when given and there are at least two groups, else by points (pairs). Points with a missing,
    non-positive or non-finite y are dropped (count them as censored where they are). Resamples
    with fewer than two distinct x are skipped."""
    keep = [i for i, v in enumerate(y) if v is not None and math.isfinite(v) and v > 0 and x[i] > 0]
    xs = np.array([x[i] for i in keep], dtype=float)
    ys = np.array([y[i] for i in keep], dtype=float)
    slope = loglog_fit_slope(xs, ys) if xs.size else math.nan
    if not math.isfinite(slope) or xs.size < 3:
        return slope, [math.nan, math.nan]
    units = np.array([groups[i] for i in keep]) if groups is not None else np.arange(xs.size)
    labels = np.unique(units)
    if labels.size < 2:
        units, labels = np.arange(xs.size), np.arange(xs.size)
    members = [np.flatnonzero(units == u) for u in labels]
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(resamples):
        idx = np.concatenate([members[j] for j in rng.integers(0, labels.size, labels.size)])
        s = loglog_fit_slope(xs[idx], ys[idx])
        if math.isfinite(s):
            draws.append(s)
    if not draws:
        return slope, [math.nan, math.nan]
    tail = (1 - level) / 2 * 100
    return slope, [float(np.percentile(draws, tail)), float(np.percentile(draws, 100 - tail))]


@dataclass(frozen=True)
class Margin:
    """An equivalence margin fixed in a criterion: the statistic equals ``target`` when its whole
    interval lies within target +- ``margin``, and differs when its whole interval lies outside."""
    target: float
    margin: float

    def decide(self, interval: Sequence[float]) -> tuple[bool, bool]:
        """(equivalent, different); both False when the interval straddles an edge or is undefined."""
        lo, hi = float(interval[0]), float(interval[1])
        if not (math.isfinite(lo) and math.isfinite(hi)):
            return False, False
        inside = self.target - self.margin <= lo and hi <= self.target + self.margin
        outside = lo > self.target + self.margin or hi < self.target - self.margin
        return inside, outside

    def describe(self) -> str:
        return f"{self.target:g} +- {self.margin:g}"


def ratio_spread(values: Sequence[float | None]) -> float:
    """max / min of the positive finite values (1 means all equal; nan with fewer than two)."""
    arr = _finite(values)
    arr = arr[arr > 0]
    return float(arr.max() / arr.min()) if arr.size >= 2 else math.nan


def interval_dict(**intervals: Sequence[float]) -> dict[str, list[float]]:
    """``ClaimResult.interval`` from name=[low, high] pairs (plain floats)."""
    return {name: [float(iv[0]), float(iv[1])] for name, iv in intervals.items()}
