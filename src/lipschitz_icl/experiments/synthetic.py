"""Synthetic attention curves for controls (``experiments.controls``): data on which a claim about the shape of
min_k Attn_k(t) is false (one smooth law: a power law, a logistic, a ramp) or true (a fast rise, then a creep at a
rate ten times slower), laid out as a run's tidy metrics table so that a claim's own reading (``analysis``,
``phases``) runs on it unchanged. Every curve is deterministic: controls need no seed."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from ..analysis import first_step, phase_rates
from ..phases import read_phases
from .controls import Controls, case, controls_from

LAST_STEP = 50_000  # the curves' length in steps
DENSE = 200  # every step recorded up to here (as the trainer records every step up to T_1), then every LOG_EVERY
LOG_EVERY = 10
CAP = 1 - 1e-9  # Attn never reaches 1 (-log(1 - Attn) stays finite)


def curve_steps(last: int = LAST_STEP) -> np.ndarray:
    """The recorded steps of a synthetic run: every step to DENSE, then every LOG_EVERY, up to ``last``."""
    return np.unique(np.concatenate([np.arange(0, DENSE + 1), np.arange(DENSE, last + 1, LOG_EVERY)]))


def power_law(t: np.ndarray, exponent: float = 0.5, scale: float = 1.0) -> np.ndarray:
    """1 - Attn = (1 + t / scale)^(-exponent): one smooth law from 0 to 1, no change of regime."""
    return np.minimum(1.0 - (1.0 + t / scale) ** (-exponent), CAP)


def logistic(t: np.ndarray, start: float = 0.1, rate: float = 2e-3) -> np.ndarray:
    """Attn = 1 / (1 + (1/start - 1) e^(-rate t)): one S-shaped law from ``start``."""
    return np.minimum(1.0 / (1.0 + (1.0 / start - 1.0) * np.exp(-rate * t)), CAP)


def ramp(t: np.ndarray, end: float = LAST_STEP) -> np.ndarray:
    """Attn = t / end: a straight line to 1 at ``end``."""
    return np.minimum(t / end, 0.999)


def single_rate(t: np.ndarray, rate: float = 5e-3) -> np.ndarray:
    """-log(1 - Attn) = rate t: one exponential approach to 1, the same rate throughout."""
    return np.minimum(1.0 - np.exp(-rate * t), CAP)


def two_rates(t: np.ndarray, fast: float = 0.02, slow_factor: float = 10.0, t1: float | None = None) -> np.ndarray:
    """-log(1 - Attn) rises at ``fast`` per step up to ``t1`` (default: where Attn = 0.6), then ``slow_factor`` times
    more slowly: a fast phase, then a creep."""
    t1 = -np.log(0.4) / fast if t1 is None else t1
    r = np.where(t <= t1, fast * t, fast * t1 + fast / slow_factor * (t - t1))
    return np.minimum(1.0 - np.exp(-r), CAP)


def curve_metrics(steps: np.ndarray, attn: np.ndarray) -> pd.DataFrame:
    """A run's tidy metrics table (step, metric, k, n, value) holding ``attn_min`` only."""
    return pd.DataFrame({"step": steps.astype(np.int64), "metric": "attn_min", "k": np.nan, "n": np.nan,
                         "value": attn.astype(np.float64)})


def n_phases_of_curve(steps: np.ndarray, attn: np.ndarray, t1_level: float = 0.5) -> int:
    """The analysis' ``n_phases`` of one synthetic curve (T_1: its first step at or above ``t1_level``)."""
    return int(phase_rates(curve_metrics(steps, attn), first_step(steps, attn, t1_level))["n_phases"])


SCALES = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)  # six synthetic runs: one curve at six time scales (t -> t / scale)


def share_two_phases(curve, scales: tuple[float, ...] = SCALES) -> tuple[float, float]:
    """The share of ``curve(t / scale)`` over ``scales`` that ``phases.read_phases`` reads as 2 phases, counting the
    ones it cannot read (censored, unresolved) as 1 phase and as 2: (low, high)."""
    t = curve_steps()
    reads = [read_phases(t, curve(t / s)).n_phases for s in scales]
    two, open_ = sum(n == 2 for n in reads), sum(n is None for n in reads)
    return two / len(reads), (two + open_) / len(reads)


def phases_of_curve(attn_of_t) -> tuple[int | None, str]:
    """``read_phases`` of one curve on the synthetic steps: (n_phases, why)."""
    t = curve_steps()
    reading = read_phases(t, attn_of_t(t))
    return reading.n_phases, reading.why


PHASE_CASES = {  # the controls of a two-phase claim: name -> (curve of t, what it is); nulls, then the planted case
    "null": (lambda t: power_law(t, scale=16.0), "a single power law 1 - Attn = (1 + t/16)^(-1/2): one law slowing "
             "down from the start"),
    "null_logistic": (lambda t: logistic(t, rate=2e-2), "a logistic from Attn = 0.1 (one S-shaped law)"),
    "null_exponential": (single_rate, "a single exponential approach (one rate throughout)"),
    "planted": (two_rates, "-log(1 - Attn) rising steadily at 0.02 per step to Attn = 0.6, then 10x more slowly"),
}


def share_controls(rule: Callable[[float, float], tuple[bool, bool]], key: str, runs: str) -> Controls:
    """The controls of a claim decided by the share of two-phase runs: ``rule(low, high)`` on six synthetic runs of
    each PHASE_CASES curve at the time scales SCALES, the bounds recorded under ``key``; ``runs`` says what a run
    is ("runs", "converged runs")."""
    def read(curve, how: str):
        lo, hi = share_two_phases(curve)
        return case(*rule(lo, hi), {key: [lo, hi]}, f"six {runs}, each {how}, at time scales 0.5-16x")

    return controls_from(PHASE_CASES, read)
