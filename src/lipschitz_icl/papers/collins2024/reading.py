"""How a Collins claim reads a direction along an axis: per seed (a seed redraws the training prompts,
the functions and the test prompts), the log-log slope of a quantity against the axis and its worst
local slope (between successive values); intervals of their medians over the seeds; and the pooled
relation's lack-of-fit test (``evidence.power_law``), without which the slope is reported but not read.

A direction ("rises" or "falls" along the axis) is supported when the interval of the worst local slope
lies wholly on the claimed side of 0 (every step along the axis goes the claimed way, in most seeds),
and not supported when the interval of the slope, or of the worst local slope, lies wholly on the other
side (the trend, or one step of it, goes the other way)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ...experiments.evidence import power_law, seed_interval

COVERS = "seeds, each redrawing the training prompts, the functions and the test prompts"
UP, DOWN = +1, -1  # the claimed direction: rises / falls along the axis


def direction(frame: pd.DataFrame, quantity: str, sign: int) -> dict:
    """Read ``quantity`` against ``value`` in ``frame`` (one axis, one model; a row per (value, seed)) as a
    direction ``sign`` (UP or DOWN). Returns the statistic: slope (pooled fit), is_power_law and its reason,
    slope_read (the slope when the lack-of-fit test passes, else None), per-seed slopes and worst local
    slopes with their intervals, and the booleans supported / refuted / enough (>= MIN_SEEDS seeds)."""
    per_seed = [power_law(g["value"].tolist(), g[quantity].tolist()) for _, g in frame.groupby("seed")]
    slopes = [p.slope for p in per_seed]
    worst = [worst_local(p.local_slopes, sign) for p in per_seed]
    pooled = power_law(frame["value"].tolist(), frame[quantity].tolist())
    slope_iv, covers, enough = seed_interval(slopes, COVERS)
    worst_iv, _, _ = seed_interval(worst, COVERS)
    medians = frame.groupby("value")[quantity].median()
    return {
        "values": medians.index.tolist(), "medians": medians.tolist(), "slope": pooled.slope,
        "is_power_law": pooled.is_power_law, "power_law": pooled.reason,
        "slope_read": pooled.slope if pooled.is_power_law else None,
        "seed_slopes": slopes, "slope_interval": slope_iv, "worst_local_slopes": worst,
        "worst_local_interval": worst_iv, "interval_covers": covers, "enough": enough,
        "supported": enough and on_side(worst_iv, sign),
        "refuted": enough and (on_side(slope_iv, -sign) or on_side(worst_iv, -sign)),
    }


def worst_local(local_slopes: Sequence[float], sign: int) -> float:
    """The local slope furthest against the claimed direction (the smallest for UP, the largest for DOWN)."""
    if not local_slopes:
        return math.nan
    return float(min(local_slopes) if sign == UP else max(local_slopes))


def on_side(interval: Sequence[float], sign: int) -> bool:
    """Whether ``interval`` lies wholly above 0 (sign UP) or wholly below 0 (DOWN); False with a NaN end."""
    lo, hi = interval
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return False
    return lo > 0 if sign == UP else hi < 0


def runs_read(frame: pd.DataFrame) -> list[str]:
    """The run directories of ``frame``'s rows (each once, in order): the runs a claim rests on."""
    return [r for r in dict.fromkeys(frame["run_dir"]) if r]


def per_seed(frame: pd.DataFrame, column: str, reduce=np.max) -> list[float]:
    """One value per seed: ``reduce`` of ``column`` over that seed's rows."""
    return [float(reduce(g[column].to_numpy())) for _, g in frame.groupby("seed")]
