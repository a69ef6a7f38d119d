"""Dynamics analysis of one run, from its tidy metrics table (step, metric, k, n, value).

Definitions (symbols as in docs/DESIGN.md; every step is a recorded step of the table):

    T_1        first step with min_k Attn_k >= t1_level (default 1/2): end of the fast phase.
               Resolution: train.log_every, refined to the trainer's exact step when the run's
               summary.json holds a T_1 inside the recorded bracket.
    T_eps      first step with loss <= eps (eps: the run's train.eps unless given); refined to the
               trainer's exact step like T_1. The trainer records every step until T_1 (for the first
               stopping.DENSE_STEPS steps) and the step T_1 itself, so T_1 is normally a recorded step.
    T_half     per feature k, the trainer's exact first step at which 1 - Attn_k is half its
               initial value (summary.json); from the recorded steps when the summary lacks it.
    rate       growth rate of the attention over a phase, on the scale where an exponential
               approach to 1 is a straight line: with r(t) = -log(1 - min_k Attn_k(t)),
               rate = (r(t_end) - r(t_start)) / (t_end - t_start), per step.
               rate_fast over [0, T_1], rate_slow over [T_1, last step], T_1 taken as the last
               recorded step at or before it.
    n_phases   2 when rate_fast > phase_factor * rate_slow (default factor 3), else 1. A single
               exponential approach to 1 has rate_fast = rate_slow, hence one phase. When T_1 is
               never reached, or comes before the second recorded step (e.g. K = 2 with level
               1/2, where Attn_k is about 1/2 at Q = 0), only one phase is seen: n_phases = 1.
    oscillations  direction changes of each Attn_{k->n} (n != k) after T_1, counted with
               hysteresis: a turn counts only once the series has moved back by more than
               osc_tol from its running extreme. Summed over all pairs (k, n).
    osc_amplitude  largest swing between consecutive turning points of any pair (with a single
               turn: the smaller of the two legs that meet at it).
    loss_monotone  the recorded loss never rises (beyond 1e-12 relative, float noise).
    verdict    'converged' when the final min_k Attn_k >= 1 - eps_attn and the final unseen-
               function error (test_error) <= eps; 'not converged' otherwise.
    geometry   when the run recorded them (eval.geometry): the last recorded value of each of
               geometry.GEOMETRY_METRICS (||Q||, the eigenvalues of sym(Q), window, n_eff,
               attn_distance); absent otherwise. With continuous inputs there is no Attn_k, so
               T_1, the rates and the oscillations are None or empty and the verdict is
               'not converged' (it needs Attn_k).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .geometry import GEOMETRY_METRICS
from .recorder import pandas

if TYPE_CHECKING:
    import pandas as pd  # imported when a frame is first made (recorder.pandas)

PHASE_FACTOR = 3.0  # n_phases = 2 when rate_fast > PHASE_FACTOR * rate_slow


# --------------------------------------------------------------------------- primitives


def first_step(steps: Sequence[int] | np.ndarray, values: Sequence[float] | np.ndarray, level: float,
               above: bool = True) -> int | None:
    """First step whose value is >= level (above=True) or <= level (above=False); None if never."""
    s = np.asarray(steps)
    v = np.asarray(values, dtype=np.float64)
    hit = v >= level if above else v <= level
    idx = np.flatnonzero(hit & np.isfinite(v))
    return int(s[idx[0]]) if idx.size else None


def turning_points(values: np.ndarray, tol: float) -> np.ndarray:
    """Indices of the turning points of a series, counted with hysteresis beyond tol.

    Once the series has moved by more than tol it has a direction; a turn is counted when it
    retreats by more than tol from its running extreme in that direction; the turning point is
    where that extreme was reached. Non-finite values are skipped.
    """
    return np.asarray(_pivots(values, tol)[0][1:], dtype=np.int64)


def _pivots(values: np.ndarray, tol: float) -> tuple[list[int], int]:
    """(indices of the first leg's start and of each turning point, index of the running extreme)."""
    v = np.asarray(values, dtype=np.float64)
    idx = np.flatnonzero(np.isfinite(v))
    if idx.size < 2:
        return [], -1
    direction = 0
    i0 = int(idx[0])
    hi_i = lo_i = ext_i = i0
    pivots: list[int] = []
    for i in idx[1:]:
        x = v[i]
        if direction == 0:
            hi_i = i if x > v[hi_i] else hi_i
            lo_i = i if x < v[lo_i] else lo_i
            if x - v[lo_i] > tol:
                direction, ext_i = 1, i
                pivots.append(int(lo_i))
            elif v[hi_i] - x > tol:
                direction, ext_i = -1, i
                pivots.append(int(hi_i))
        elif direction > 0:
            if x > v[ext_i]:
                ext_i = i
            elif v[ext_i] - x > tol:
                pivots.append(int(ext_i))
                direction, ext_i = -1, i
        else:
            if x < v[ext_i]:
                ext_i = i
            elif x - v[ext_i] > tol:
                pivots.append(int(ext_i))
                direction, ext_i = 1, i
    return pivots, int(ext_i)


def count_oscillations(values: np.ndarray, tol: float) -> tuple[int, float]:
    """Direction changes of a series beyond tol (hysteresis, see ``turning_points``), and their
    amplitude: the largest swing between consecutive turning points (one turn: the smaller of
    its two legs; no turn: 0)."""
    v = np.asarray(values, dtype=np.float64)
    pivots, ext_i = _pivots(v, tol)
    turns = max(len(pivots) - 1, 0)
    if turns == 0:
        return 0, 0.0
    legs = np.abs(np.diff(v[[*pivots, ext_i]]))  # legs[0]: start -> turn 1, legs[-1]: last turn -> end
    if turns == 1:
        return 1, float(min(legs[0], legs[1]))
    return turns, float(legs[1:-1].max())


def _log_gap(a: float) -> float:
    """r = -log(1 - Attn): linear in t for an exponential approach to 1."""
    return -math.log(max(1.0 - a, 1e-300))


def phase_rate(steps: np.ndarray, attn: np.ndarray, t0: int, t1: int) -> float | None:
    """(r(t1) - r(t0)) / (t1 - t0) with r = -log(1 - Attn), per step; None for an empty phase."""
    s = np.asarray(steps)
    a = np.asarray(attn, dtype=np.float64)
    if t1 <= t0:
        return None
    i0 = np.searchsorted(s, t0, side="right") - 1  # last recorded step <= t0
    i1 = np.searchsorted(s, t1, side="right") - 1
    if i0 < 0 or i1 <= i0 or not (np.isfinite(a[i0]) and np.isfinite(a[i1])):
        return None
    return (_log_gap(a[i1]) - _log_gap(a[i0])) / float(s[i1] - s[i0])


def n_phases_of(rate_fast: float | None, rate_slow: float | None, factor: float = PHASE_FACTOR) -> int:
    """2 when the fast phase outpaces the slow one by more than ``factor``, else 1."""
    if rate_fast is None or rate_slow is None:
        return 1
    if rate_slow <= 0:
        return 2 if rate_fast > 0 else 1
    return 2 if rate_fast > factor * rate_slow else 1


def creep_decelerates(steps: np.ndarray, attn: np.ndarray, T_1: int, windows: int = 4) -> bool:
    """Whether r(t) = -log(1 - Attn) rises ever more slowly after T_1: its mean slope over ``windows``
    geometric windows of [T_1, last step] never increases. Then the slow rate over [T_1, t] falls as t
    grows, so a run stopped early that shows two phases would still show them if run longer."""
    s = np.asarray(steps, dtype=np.int64)
    a = np.asarray(attn, dtype=np.float64)
    keep = s >= T_1
    s, a = s[keep], a[keep]
    if s.size < windows + 1:
        return False
    edges = np.unique(np.geomspace(max(s[0], 1), s[-1], windows + 1).round().astype(np.int64))
    rates = [phase_rate(s, a, int(t0), int(t1)) for t0, t1 in zip(edges[:-1], edges[1:], strict=True)]
    rates = [x for x in rates if x is not None]
    return len(rates) >= 2 and all(b <= r0 * (1 + 1e-9) for r0, b in zip(rates[:-1], rates[1:], strict=True))


# --------------------------------------------------------------------------- table access


def scalar(metrics: pd.DataFrame, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of a scalar metric, sorted by step."""
    rows = metrics[metrics["metric"] == metric].sort_values("step")
    return rows["step"].to_numpy(np.int64), rows["value"].to_numpy(np.float64)


def per_feature(metrics: pd.DataFrame, metric: str) -> pd.DataFrame:
    """A per-feature metric as a step x k (or step x (k, n)) table."""
    rows = metrics[metrics["metric"] == metric]
    if rows.empty:
        return pandas().DataFrame()
    cols = ["k"] if rows["n"].isna().all() else ["k", "n"]
    return rows.pivot_table(index="step", columns=cols, values="value").sort_index()


def min_attention(metrics: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(steps, min_k Attn_k), from attn_min or else from attn_self."""
    steps, vals = scalar(metrics, "attn_min")
    if steps.size:
        return steps, vals
    table = per_feature(metrics, "attn_self")
    if table.empty:
        return np.zeros(0, np.int64), np.zeros(0)
    return table.index.to_numpy(np.int64), table.min(axis=1).to_numpy(np.float64)


def phase_rates(metrics: pd.DataFrame, T_1: int | None, factor: float = PHASE_FACTOR) -> dict[str, Any]:
    """Growth rates of the attention before and after T_1 (see the module doc for ``rate``).

    rate_fast / rate_slow use min_k Attn_k; ``per_k`` gives each feature's (fast, slow) rates
    around the same T_1. Also returns ``ratio`` = rate_fast / rate_slow and ``n_phases``.
    """
    steps, amin = min_attention(metrics)
    out: dict[str, Any] = {"rate_fast": None, "rate_slow": None, "ratio": None, "n_phases": 1, "per_k": {}}
    if steps.size == 0:
        return out
    first, last = int(steps[0]), int(steps[-1])
    t1 = last if T_1 is None else T_1
    fast = phase_rate(steps, amin, first, t1)
    slow = phase_rate(steps, amin, t1, last) if T_1 is not None else None
    out.update(rate_fast=fast, rate_slow=slow, n_phases=n_phases_of(fast, slow, factor) if T_1 else 1)
    if fast is not None and slow is not None and slow > 0:
        out["ratio"] = fast / slow
    table = per_feature(metrics, "attn_self")
    if not table.empty:
        s = table.index.to_numpy(np.int64)
        for k in table.columns:
            a = table[k].to_numpy(np.float64)
            out["per_k"][int(k)] = (phase_rate(s, a, first, t1), phase_rate(s, a, t1, last) if T_1 else None)
    return out


def count_phases(steps: np.ndarray, attn: np.ndarray, factor: float = PHASE_FACTOR, windows: int = 8) -> int:
    """Phases of one attention curve, finer than ``n_phases``: the recorded steps are cut into
    ``windows`` geometric windows, the rate of -log(1 - Attn) is taken in each, and a new phase
    starts wherever the rate moves by more than ``factor`` from the current phase's rate."""
    s = np.asarray(steps, dtype=np.float64)
    a = np.asarray(attn, dtype=np.float64)
    if s.size < 3:
        return 1
    edges = np.unique(np.geomspace(max(s[0], 1.0), s[-1], windows + 1).round())
    edges[0] = s[0]
    rates = [phase_rate(s.astype(np.int64), a, int(t0), int(t1)) for t0, t1 in zip(edges[:-1], edges[1:], strict=True)]
    rates = [r for r in rates if r is not None and r > 0]
    if not rates:
        return 1
    phases, current = 1, rates[0]
    for r in rates[1:]:
        if r > factor * current or r < current / factor:
            phases, current = phases + 1, r
    return phases


# --------------------------------------------------------------------------- the analysis


def _refine(T_metrics: int | None, T_exact: Any, steps: np.ndarray) -> int | None:
    """Use the trainer's exact step when it lies in the recorded bracket (prev step, T_metrics]."""
    if T_metrics is None or T_exact is None:
        return T_metrics
    i = int(np.searchsorted(steps, T_metrics))
    prev = int(steps[i - 1]) if i > 0 else -1
    return int(T_exact) if prev < int(T_exact) <= T_metrics else T_metrics


def half_times(metrics: pd.DataFrame) -> list[int | None]:
    """Per feature k, the first recorded step at which 1 - Attn_k is at most half its first value
    (the trainer's exact T_half is in summary.json; this is the fallback from the table)."""
    table = per_feature(metrics, "attn_self")
    steps = table.index.to_numpy(np.int64)
    out: list[int | None] = []
    for k in table.columns:
        gap = 1.0 - table[k].to_numpy(np.float64)
        out.append(first_step(steps, gap, 0.5 * gap[0], above=False) if gap.size else None)
    return out


def _last(values: np.ndarray) -> float | None:
    v = values[np.isfinite(values)]
    return float(v[-1]) if v.size else None


def _final(values: np.ndarray) -> float | None:
    """The last recorded value, None when it is not finite (an infinite window: no decay with distance)."""
    return float(values[-1]) if values.size and np.isfinite(values[-1]) else None


def oscillation_stats(metrics: pd.DataFrame, T_1: int | None, tol: float) -> dict[str, Any]:
    """Direction changes of every Attn_{k->n} after T_1 (none when T_1 was never reached)."""
    table = per_feature(metrics, "attn_cross")
    count, amp, pairs, per_pair = 0, 0.0, 0, {}
    if T_1 is not None and not table.empty:
        after = table[table.index >= T_1]
        for col in after.columns:
            c, a = count_oscillations(after[col].to_numpy(np.float64), tol)
            if c:
                per_pair[f"{int(col[0])}->{int(col[1])}"] = c
            count, amp, pairs = count + c, max(amp, a), pairs + (c > 0)
    return {"oscillations": count, "osc_amplitude": amp, "oscillating_pairs": pairs, "osc_per_pair": per_pair}


def analyze(
    metrics: pd.DataFrame,
    summary: dict | None = None,
    eps: float | None = None,
    t1_level: float = 0.5,
    eps_attn: float = 0.1,
    osc_tol: float = 1e-4,
    phase_factor: float = PHASE_FACTOR,
) -> dict[str, Any]:
    """The phase analysis of one run (definitions in the module doc). JSON-ready.

    ``eps`` defaults to the summary's eps (the run's train.eps), else 1e-3.
    """
    summary = summary or {}
    if eps is None:
        eps = float(summary.get("eps") or 1e-3)
    steps, amin = min_attention(metrics)
    loss_steps, loss = scalar(metrics, "loss")
    _, test = scalar(metrics, "test_error")
    T_1 = _refine(first_step(steps, amin, t1_level), summary.get("T_1"), steps)
    T_eps = _refine(first_step(loss_steps, loss, eps, above=False), summary.get("T_eps"), loss_steps)
    rates = phase_rates(metrics, T_1, phase_factor)
    T_half = summary.get("T_half") or half_times(metrics)
    finite = loss[np.isfinite(loss)]
    rises = np.diff(finite) > 1e-12 * np.maximum(np.abs(finite[:-1]), 1e-300)
    final_min_attn, final_test = _last(amin), _last(test)
    converged = (
        final_min_attn is not None and final_min_attn >= 1 - eps_attn and final_test is not None and final_test <= eps
    )
    geometry = {m: _final(scalar(metrics, m)[1]) for m in GEOMETRY_METRICS if (metrics["metric"] == m).any()}
    return {
        "T_1": T_1,
        "T_eps": T_eps,
        "T_half": list(T_half),
        "t1_level": t1_level,
        "eps": eps,
        "eps_attn": eps_attn,
        "rate_fast": rates["rate_fast"],
        "rate_slow": rates["rate_slow"],
        "rate_ratio": rates["ratio"],
        "n_phases": rates["n_phases"],
        "phase_factor": phase_factor,
        "rates_per_k": {str(k): list(v) for k, v in rates["per_k"].items()},
        **oscillation_stats(metrics, T_1, osc_tol),
        "osc_tol": osc_tol,
        "loss_monotone": bool(not rises.any()),
        "loss_rises": int(rises.sum()),
        "steps": int(loss_steps[-1]) if loss_steps.size else None,
        "final_loss": _last(loss),
        "final_min_attn": final_min_attn,
        "final_test_error": final_test,
        "status": summary.get("status"),
        "verdict": "converged" if converged else "not converged",
        **({"geometry": geometry} if geometry else {}),
    }


def run_eps(config: Any, metrics: pd.DataFrame) -> float:
    """The absolute eps a run stopped at: train.eps, times the initial loss when eps_mode=relative."""
    eps = float(config.train.eps)
    if config.train.eps_mode == "relative":
        _, loss = scalar(metrics, "loss")
        eps *= float(loss[0]) if loss.size else 1.0
    return eps


def analyze_run_object(run: Any, osc_tol: float = 1e-4) -> dict[str, Any]:
    """``analyze`` with a run's own settings (an api.Run: config, summary, metrics)."""
    cfg = run.config
    return analyze(run.metrics, run.summary, eps=run_eps(cfg, run.metrics), t1_level=cfg.analysis.t1_level,
                   eps_attn=cfg.analysis.eps_attn, osc_tol=osc_tol)
