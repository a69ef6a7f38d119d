"""LU1's and LU2's decision rules: pure functions of per-seed numbers (fixed before the runs were looked at), used by
the experiment and by the controls. Seeds are independent draws of the task pool and the pretraining prompts."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ...experiments.evidence import seed_interval

COVERS = "independent draws of the task pool and the n pretraining prompts (the ridge refit on each)"
GAP_TOL = 0.10  # LU1: mean |e_sim / e_theory - 1| over the grid at the largest d at most 10%
MEMO_BELOW = 0.5  # LU2: e_IDG / e_ICL at the smallest kappa below 0.5 (the pool is memorised)
LIMIT_TOL = 0.15  # LU2: e_ICL at the largest kappa within 15% of the kappa -> infinity theory
LOC_TOL = 0.20  # LU2: the half-way task diversity within 20% of the theory's at the largest d


def curve_gaps(sim: Sequence[float], theory: Sequence[float]) -> tuple[float, float]:
    """One seed's curve against the theory curve: (mean of e_sim / e_theory - 1, mean of its absolute value)."""
    rel = np.asarray(sim, dtype=float) / np.asarray(theory, dtype=float) - 1
    return float(rel.mean()), float(np.abs(rel).mean())


def intercepts(signed: dict[int, list[float]]) -> list[float]:
    """Per seed (paired by index across d), the intercept c of signed gap = c + b/d, least squares weighted by d^2
    (a seed's gap scatters with a standard deviation ~ 1/d): the gap extrapolated to d -> infinity."""
    dims = sorted(signed)
    root_w = np.asarray(dims, dtype=float)  # sqrt of the weights d^2
    x = np.column_stack([np.ones(len(dims)), 1.0 / np.asarray(dims, dtype=float)]) * root_w[:, None]
    n = min(len(signed[d]) for d in dims)
    return [float(np.linalg.lstsq(x, np.array([signed[d][i] for d in dims]) * root_w, rcond=None)[0][0])
            for i in range(n)]


def lu1_rule(signed: dict[int, list[float]], absolute: dict[int, list[float]]) -> tuple[bool, bool, dict]:
    """LU1's (supported, refuted, statistic). Per d, per seed: the signed and the absolute mean relative gap of the
    simulated e_ICL curve to the theory's (``curve_gaps``). Supported if the interval of the median absolute gap at
    the largest d lies below GAP_TOL and that of the per-seed ratio |gap|(d_max) / |gap|(d_min) below 1 (it shrinks
    as d grows). Not supported if the ratio's interval lies above 1 (the gap grows with d) or the interval of the
    signed gap extrapolated to d -> infinity (``intercepts``) lies wholly outside +-GAP_TOL (the simulations
    converge to another curve). A gap above GAP_TOL that still shrinks decides nothing (d too small)."""
    dmin, dmax = min(absolute), max(absolute)
    big, _, ok_big = seed_interval(absolute[dmax], COVERS)
    ratios = [b / a for a, b in zip(absolute[dmin], absolute[dmax], strict=False) if a > 0]
    ratio, _, ok_ratio = seed_interval(ratios, COVERS)
    limit, _, ok_limit = seed_interval(intercepts(signed), COVERS)
    enough = ok_big and ok_ratio and ok_limit and dmax > dmin
    sup = enough and big[1] < GAP_TOL and ratio[1] < 1
    ref = enough and (ratio[0] > 1 or limit[0] > GAP_TOL or limit[1] < -GAP_TOL)
    stat = {"abs_gap_interval": {str(d): seed_interval(v, COVERS)[0] for d, v in sorted(absolute.items())},
            "abs_gap_median": {str(d): float(np.median(v)) for d, v in sorted(absolute.items())},
            "signed_gap_median": {str(d): float(np.median(v)) for d, v in sorted(signed.items())},
            "shrink_ratio_interval": ratio, "extrapolated_gap_interval": limit, "d_min": dmin, "d_max": dmax,
            "tolerance": GAP_TOL, "enough": enough}
    return sup, ref, stat


def crossing(kappas: Sequence[float], curve: Sequence[float], level: float) -> float:
    """The first kappa where a falling e_ICL curve crosses ``level`` (linear in log kappa); nan if it never does."""
    k, e = np.log(np.asarray(kappas, dtype=float)), np.asarray(curve, dtype=float)
    for i in range(len(k) - 1):
        if e[i] >= level > e[i + 1]:
            return float(math.exp(k[i] + (e[i] - level) / (e[i] - e[i + 1]) * (k[i + 1] - k[i])))
    return math.nan


def lu2_rule(memo: list[float], limit_gap: list[float], location: dict[int, list[float]]) -> tuple[bool, bool, dict]:
    """LU2's (supported, refuted, statistic) from per-seed numbers: ``memo`` e_IDG / e_ICL at the smallest kappa,
    ``limit_gap`` e_ICL(kappa_max) / e_theory(kappa = inf) - 1 (both at the largest d), ``location`` d -> per seed
    kappa_1/2(sim) / kappa_1/2(theory) - 1 (nan: the curve never crosses the half-way level). Supported if memo's
    interval lies below MEMO_BELOW, limit_gap's within +-LIMIT_TOL and the location's at the largest d within
    +-LOC_TOL. Not supported if memo's lies above MEMO_BELOW (no memorisation), limit_gap's or the location's lies
    wholly outside its band, or at the largest d most seeds never cross (no transition)."""
    dmax = max(location)
    loc = location[dmax]
    crossed = [v for v in loc if math.isfinite(v)]
    ivs = {"memo": seed_interval(memo, COVERS), "limit_gap": seed_interval(limit_gap, COVERS),
           "location": seed_interval(crossed, COVERS)}
    enough = all(iv[2] for iv in ivs.values())
    (m_lo, m_hi), (g_lo, g_hi), (l_lo, l_hi) = (ivs[k][0] for k in ("memo", "limit_gap", "location"))
    no_transition = len(crossed) * 2 < len(loc)
    sup = enough and m_hi < MEMO_BELOW and -LIMIT_TOL < g_lo and g_hi < LIMIT_TOL and -LOC_TOL < l_lo and l_hi < LOC_TOL
    ref = no_transition or (enough and (m_lo > MEMO_BELOW or g_lo > LIMIT_TOL or g_hi < -LIMIT_TOL
                                        or l_lo > LOC_TOL or l_hi < -LOC_TOL))
    stat = {"intervals": {k: iv[0] for k, iv in ivs.items()}, "d_max": dmax, "seeds_crossing": len(crossed),
            "seeds": len(loc), "location_median_by_d": {str(d): float(np.nanmedian(v)) if any(map(math.isfinite, v))
                                                        else math.nan for d, v in sorted(location.items())},
            "tolerances": {"memo_below": MEMO_BELOW, "limit": LIMIT_TOL, "location": LOC_TOL}, "enough": enough}
    return sup, ref, stat
