"""``reproduce paper`` (c): convergence times against L from L*/4 to 10 L*, and against eta,
Delta and K in the flat regime. Tests P5 of the paper and B1 of the companion write-up (so it
runs in both the paper and the blog suite); the threshold itself (P4, B3) is threshold.py's.

T_1 is the end of the fast phase and T_eps the first step with loss <= eps (relative to the
initial loss), both from the run's summary; fits are log-log with 95% intervals over seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ... import plots
from ...api import Run
from ...config import Config
from ...experiments.claims import ClaimResult, claim
from ...experiments.delta import combined, power_law_reading
from ...experiments.evidence import run_settings
from ...experiments.figures import captioned
from ...experiments.measure import L_star_of, breakpoint_loglog, fit_dict, safe_fit, slope_matches
from ...experiments.registry import experiment
from ...experiments.runner import Context, censored_runs, paper_base, rel_runs, run_group, with_budget, with_overrides
from ...experiments.uncertainty import bootstrap_loglog_slope
from ...fits import Fit
from .delta_axis import (
    DELTA_AXIS_POINT,
    DELTA_CLASSES,
    DELTA_CV_AGREES,
    DELTA_CV_DISAGREES,
    DeltaAxis,
    delta_axis,
    delta_axis_check,
)
from .scaling_delta import DELTA_RULE_P5, DeltaReadings, delta_readings
from .threshold_delta import undecided_readings

AXIS_MARGIN, AXIS_CAP = 10.0, 25  # budgets: 10x the theory's time on the flat axes; never above 25x the size's budget

CRITERION_P5 = (
    "In the flat regime (L < L*), log-log slopes of T_eps (relative eps; every run's budget is 3x (L axis) or "
    f"{AXIS_MARGIN:g}x (the other axes, at most {AXIS_CAP}x the size's budget) the theory's time scale for its "
    "setting, so censored runs are counted, never dropped silently): against L (predicted -2), eta (-1), Delta "
    "(-2, under the three Delta readings below) and K log(K/eps) (+1); and the delta axis: "
    f"T_1 eta L^2 delta^2 Delta^2 across the classes {', '.join(DELTA_CLASSES)} at L = L*/2 (predicted equal: "
    f"coefficient of variation <= {DELTA_CV_AGREES}, disagrees above {DELTA_CV_DISAGREES}), at the base geometry "
    f"and at Delta = {DELTA_AXIS_POINT:g} under each Delta reading, combined over the readings by delta.combine "
    "(symmetric features make every rotation-invariant class one shape: those readings are forced). The L and eta "
    "slopes "
    "are fixed by the eta L^2 invariance (reported, not part of the verdict). The K axis is a deterministic curve: "
    "it agrees when its local slopes lie within 0.3 of its exact slope (a power law) and that slope within 0.3 of "
    "+1, and disagrees when it is no power law or its slope lies further. Supported if the Delta readings "
    "combine to supported, the K axis agrees and the delta axis agrees; not supported if the Delta readings "
    "combine to not supported, or the K or the delta axis disagrees. An axis with a censored run decides nothing.")
FORCED_P5 = ("slopes in L (-2) and eta (-1): f = L g makes gradient descent depend on (eta, L) only through "
             "eta L^2, so T = s(eps) / (eta L^2) at small steps whatever the data")
CRITERION_B1 = (
    "Slope of T_1 (fast phase) against L predicted -1; slope of T_eps - T_1 (slow phase) predicted -2, "
    "over all L that converge. Supported if both intervals contain the prediction (or within 0.3); not "
    "supported if either excludes it by more than 0.3.")
FORCED_B1 = (
    "At a fixed eta every L follows one trajectory in s = eta L^2 t (f = L g), and T_1 and the relative T_eps "
    "are scale-free, so both slopes are -2 wherever the steps are small: the fast phase's -1 cannot hold.")
# values of K for the K log(K/eps) axis of P5, with N = 50: a query's feature is missing from its context with
# probability (1 - 1/K)^N, which floors the relative loss near that value (K = 8: 1.3e-3, above the full size's
# eps_rel = 1e-3, so K = 8 could never converge; K = 6: 1.1e-4)
KS = [2, 3, 4, 5, 6]


@dataclass
class LSweep:
    """The sweep over L: its runs, per run L, seed, T_1 and T_eps, the fits and the breakpoint L_b."""
    runs: list[Run]
    L: list[float]
    T1: list[int | None]
    Teps: list[int | None]
    fits: dict[str, Fit | None]
    breakpoint: float | None
    figure: str


@dataclass
class FlatAxes:
    """The flat-regime sweeps over eta, Delta and K, and their fits of T_eps."""
    runs: list[Run]
    fit_eta: Fit | None
    K_runs: list[Run]
    L_flat: float
    figure: str
    censored: dict[str, list[str]]  # axis -> names of its runs that missed their target
    delta: DeltaAxis  # the delta axis: T_1 eta L^2 delta^2 Delta^2 across classes
    Delta: DeltaReadings  # the Delta axis under the three readings of the one Delta protocol


STATEMENTS = {  # the claims this file tests, word for word as the report and docs/CLAIMS.md give them
    "P5": "Flat regime: convergence time of order K log(K/eps) / (eta delta^2 L^2 Delta^2), i.e. slopes -2 in L, "
    "-2 in Delta, -1 in eta, about K log K in K.",
    "B1": "Fast phase lasts about 1/(eta L) steps; slow phase about 1/(eta L^2).",
}


CAPTIONS = {  # figure stem -> what is plotted, what to look for, what would contradict the claim
    "scaling_L": (
        "T_1 (left) and T_eps (right) against L, log-log, one point per run and seed; black: lines fitted below "
        "(solid) and above (dashed) L*, with their slopes and intervals; red dotted: the theory's slope -2; grey: L*. "
        "P5: look for the points below L* on a line of slope -2. B1: look for T_1 on a slope of -1 (fast phase about "
        "1/(eta L)) and the slow phase on -2. A fitted slope below L* whose interval excludes -2 contradicts P5; a T_1 "
        "slope near -2 rather than -1 contradicts B1 (forced here by f = L g)."),
    "scaling_eta_Delta_K": (
        "Flat regime: T_eps against eta (left), Delta (middle) and K log(K/eps) (right), log-log; red dotted: the "
        "theory's slopes -1, -2 and +1, anchored at the first point. Look for the measured points running parallel "
        "to the red lines. A systematic departure of slope (T_eps not falling with Delta, say, or growing faster "
        "than K log(K/eps)) contradicts P5's time scale K log(K/eps) / (eta delta^2 L^2 Delta^2)."),
}


@experiment("P5", "B1", suites=("paper", "blog"), statements=STATEMENTS)
@captioned(CAPTIONS)
def exp_scaling(ctx: Context) -> list[ClaimResult]:
    """(c) T_1 and T_eps against L from L*/4 to 10 L* (and against eta, Delta, K in the flat regime). Every run
    of the L axis is one trajectory in rescaled time (the invariance), so L*/4 shows the flat side as well as
    L*/10 would, at 1/6 of the steps (T ~ 1/L^2: L*/10 needs ~570 000 steps at the full size)."""
    cfg = paper_base(ctx, "train.eps_mode=relative", f"train.eps={ctx.sizes.eps_rel}")
    L_star = L_star_of(cfg)  # L* = 1 / (Delta delta)
    sweep = _sweep_L(ctx, cfg, L_star)
    flat = _sweep_flat_axes(ctx, cfg, L_star)
    return [_claim_p5(ctx, sweep, flat), _claim_b1(ctx, sweep)]


def _sweep_L(ctx: Context, cfg: Config, L_star: float) -> LSweep:
    S = ctx.sizes
    Ls = list(np.geomspace(L_star / 4, 10 * L_star, S.n_L))
    configs = [with_budget(with_overrides(cfg, [f"task.L={L:.6g}", f"seed={ctx.seed + s}", f"name=L{L:.3g}-s{s}"]),
                           S.eps_rel, cap=AXIS_CAP * S.budget) for L in Ls for s in range(S.seeds)]
    runs = run_group(ctx, "scaling-L", configs, "(c) T against L")
    xL = [r.config.task.L for r in runs]
    seeds = [r.config.seed for r in runs]
    T1 = [r.summary["T_1"] for r in runs]
    Te = [r.summary["T_eps"] for r in runs]
    below = [i for i, L in enumerate(xL) if L < L_star]
    above = [i for i, L in enumerate(xL) if L > L_star]

    def sub(idx, ys):
        return safe_fit([xL[i] for i in idx], [ys[i] for i in idx], [seeds[i] for i in idx])

    fits = {"T1_below": sub(below, T1), "T1_above": sub(above, T1), "Teps_below": sub(below, Te),
            "Teps_above": sub(above, Te)}
    conv = [i for i in range(len(runs)) if Te[i] is not None and T1[i] is not None]
    fits["T1_all"] = safe_fit([xL[i] for i in conv], [T1[i] for i in conv], [seeds[i] for i in conv])
    slow = [Te[i] - T1[i] if Te[i] is not None and T1[i] is not None and Te[i] > T1[i] else None
            for i in range(len(runs))]
    fits["slow_all"] = safe_fit(xL, slow, seeds)
    figure = _scaling_figure(ctx, xL, T1, Te, L_star, fits, "scaling_L")
    L_b = breakpoint_loglog(np.array([xL[i] for i in conv]), np.array([Te[i] for i in conv], dtype=float)) \
        if len(conv) >= 5 else None
    return LSweep(runs, xL, T1, Te, fits, L_b, figure)


def _sweep_flat_axes(ctx: Context, cfg: Config, L_star: float) -> FlatAxes:
    """The other axes of P5, in the flat regime."""
    L_flat = 0.5 * L_star
    flat = with_overrides(cfg, [f"task.L={L_flat:.6g}"])
    etas = [0.5, 1.0, 2.0, 4.0]
    r_eta = _axis_sweep(ctx, flat, "scaling-eta", "(c) T against eta", "train.lr", etas, lambda v: f"eta{v:g}")
    dr = delta_readings(ctx, AXIS_CAP * ctx.sizes.budget, AXIS_MARGIN)
    flat_K = with_overrides(cfg, ["features.d=8", "task.L=1.0"])  # d = 8: L* = 2 for every K
    r_K = _axis_sweep(ctx, flat_K, "scaling-K", "(c) T against K", "features.K", KS, lambda v: f"K{v}")
    eps = ctx.sizes.eps_rel
    fit_eta = safe_fit([r.config.train.lr for r in r_eta], [r.summary["T_eps"] for r in r_eta])
    figure = _axes_figure(ctx, r_eta, dr, r_K, KS, eps)
    censored = {"eta": censored_runs(r_eta), "Delta": dr.censored, "KlogK": censored_runs(r_K)}
    return FlatAxes(r_eta + dr.runs + r_K, fit_eta, r_K, L_flat, figure, censored, delta_axis(ctx), dr)


def _claim_p5(ctx: Context, sweep: LSweep, flat: FlatAxes) -> ClaimResult:
    fit_L = sweep.fits["Teps_below"]
    below = [r for r in sweep.runs if r.config.task.L < sweep_L_star(sweep)]
    censored = {"L": censored_runs(below), **flat.censored, "delta": flat.delta.censored}
    K_x = [k * math.log(k / ctx.sizes.eps_rel) for k in KS]
    K_axis = k_axis_rule(K_x, [r.summary["T_eps"] for r in flat.K_runs], len(censored["KlogK"]))
    Delta_ok, Delta_bad, Delta_forced = combined(flat.Delta.readings)
    delta_ok, delta_bad, delta_forced = delta_axis_check(flat.delta)
    checks = {"Delta": (Delta_ok, Delta_bad), "KlogK": (K_axis["verdict"] == "supported",
                                                       K_axis["verdict"] == "not supported"),
              "delta": (delta_ok, delta_bad)}
    stat = {**fit_dict(fit_L, "L"), **fit_dict(flat.fit_eta, "eta"),
            "Delta_readings": {r: {k: v[k] for k in ("verdict", "forced_by", "distinct_settings", "slope",
                                                     "local_slopes")} for r, v in flat.Delta.readings.items()},
            "Delta_lo": None, "Delta_hi": None, "KlogK_lo": None, "KlogK_hi": None,  # no residual intervals
            "KlogK_slope": K_axis["slope"], "KlogK_local_slopes": K_axis["local_slopes"],
            "KlogK_is_power_law": K_axis["is_power_law"], "L_flat_for_other_axes": flat.L_flat,
            "forced_slopes": {"L": True, "eta": True, "KlogK": False, "delta": bool(delta_forced),
                              **{f"Delta_{r}": bool(v["forced_by"]) for r, v in flat.Delta.readings.items()}},
            "L_eta_agree": {"L": slope_matches(fit_L, -2)[0], "eta": slope_matches(flat.fit_eta, -1)[0]},
            "delta_axis_T1_eta_L2_delta2_Delta2": flat.delta.values, "delta_axis_cv": flat.delta.cv,
            "delta_axis_readings": {r: {k: v[k] for k in ("verdict", "forced_by", "distinct_settings", "cv_base",
                                                          "cv_moved")} for r, v in flat.delta.readings.items()},
            "censored_by_axis": {k: len(v) for k, v in censored.items()}, "censored_runs": censored,
            "checks": {k: {"agrees": a, "disagrees": b} for k, (a, b) in checks.items()},
            "Delta_note": UNIFORM_TILT_NOTE}
    why = {"Delta": undecided_readings(flat.Delta.readings), "KlogK": K_axis["undecided_because"],
           "delta": undecided_readings(flat.delta.readings)}
    undecided = [k for k, (a, b) in checks.items() if not a and not b]
    result = claim("P5", CRITERION_P5 + " " + DELTA_RULE_P5, stat, *p5_rule(checks), settings=flat.Delta.settings,
                   readings=flat.Delta.readings, figures=[sweep.figure, flat.figure],
                   runs=rel_runs(ctx, sweep.runs + flat.runs + flat.delta.runs),
                   forced=False, forced_reason=FORCED_P5, censored=sum(len(v) for v in censored.values()),
                   undecided_because="; ".join(f"{k}: {why[k]}" for k in undecided))
    if Delta_forced and Delta_bad:
        result.forced, result.forced_by = True, Delta_forced
        result.forced_reason = f"forced Delta readings contradict the Delta slope ({Delta_forced}); {FORCED_P5}"
    return result


def k_axis_rule(K_log_K_eps: list[float], T_eps: list[float | None], censored: int) -> dict:
    """P5's K axis: T_eps against K log(K/eps) as a deterministic curve (``delta.power_law_reading``, predicted
    slope +1 within 0.3): its "verdict" and the numbers behind it."""
    return power_law_reading(K_log_K_eps, T_eps, 1.0, 0.3, censored=censored)


def p5_rule(checks: dict[str, tuple[bool, bool]]) -> tuple[bool, bool]:
    """P5's (supported, refuted) from its axes' (agrees, disagrees): the Delta readings combined, the K axis and
    the delta axis. Supported if every axis agrees, refuted if one disagrees."""
    return all(a for a, _ in checks.values()), any(b for _, b in checks.values())


UNIFORM_TILT_NOTE = (
    "Tilting every v_k towards a common unit vector u (rows e_k + t u, normalised) is, on everything the loss "
    "sees, a rescaling by c = Delta / sqrt 2, and so is features.scale: the linear kernel scales as c^2 and the GD "
    "step M <- M - eta G grad_M G, G = V^T V, as c^2 c^2 c^2 = c^6, while delta^2 Delta^2 grows only as c^2: "
    "T ~ Delta^-6 under both readings, fixed by the geometry (forced). Rotating one pair (v_1 towards v_0) is "
    "not a rescaling: its slope is measured.")


def sweep_L_star(sweep: LSweep) -> float:
    """L* of the sweep's setting (every run's summary carries it)."""
    return float(sweep.runs[0].summary["L_star"])


def _censored_check(fit: Fit | None, predicted: float, n_censored: int, axis: str) -> tuple[bool, bool]:
    """slope_matches, except that an axis with censored runs decides nothing: their T is only bounded
    below by the budget, which can move a fitted slope either way across a sweep."""
    if n_censored:
        return False, False
    return slope_matches(fit, predicted)


def _claim_b1(ctx: Context, sweep: LSweep) -> ClaimResult:
    fast, slow = sweep.fits["T1_all"], sweep.fits["slow_all"]
    stat = {**fit_dict(fast, "fast_T1"), **fit_dict(slow, "slow_Teps_minus_T1")}
    seeds = [r.config.seed for r in sweep.runs]
    slow_T = [te - t1 if te is not None and t1 is not None else None
              for t1, te in zip(sweep.T1, sweep.Teps, strict=True)]
    interval = {"fast_T1_slope": bootstrap_loglog_slope(sweep.L, sweep.T1, seeds, seed=ctx.seed)[1],
                "slow_slope": bootstrap_loglog_slope(sweep.L, slow_T, seeds, seed=ctx.seed)[1]}
    return claim("B1", CRITERION_B1, stat, *b1_rule(fast, slow), figures=[sweep.figure],
                 runs=rel_runs(ctx, sweep.runs), forced=True, forced_reason=FORCED_B1, interval=interval,
                 interval_covers={name: "the seeds' count draws only: the L points of a seed are one shape under "
                                        "eta L^2, so the slope itself is fixed (forced)" for name in interval},
                 settings=run_settings(sweep.runs), censored=sum(t is None for t in sweep.Teps))


def b1_rule(fast: Fit | None, slow: Fit | None) -> tuple[bool, bool]:
    """B1's (supported, refuted) from the log-log fits of T_1 (fast phase, predicted slope -1) and T_eps - T_1
    (slow phase, -2) against L: supported if both match (``slope_matches``: the interval contains the prediction or
    the slope is within 0.3), refuted if either is off by more than 0.3 with its interval excluding it."""
    m1, m2 = slope_matches(fast, -1), slope_matches(slow, -2)
    return m1[0] and m2[0], m1[1] or m2[1]


def _scaling_figure(ctx, Ls, T1, Te, L_star, fits, stem) -> str:
    fig, axes = plots.figure(2, 1)
    for ax, T, name, key in ((axes[0][0], T1, "T_1", "T1"), (axes[0][1], Te, "T_eps", "Teps")):
        xs = [L for L, t in zip(Ls, T, strict=True) if t]
        ys = [t for t in T if t]
        ax.loglog(xs, ys, "o", ms=4, label="runs")
        for side, ls in (("below", "-"), ("above", "--")):
            f = fits.get(f"{key}_{side}")
            if f is not None:
                sel = [x for x in xs if (x < L_star) == (side == "below")]
                if sel:
                    xx = np.geomspace(min(sel), max(sel), 10)
                    ax.loglog(xx, np.exp(f.intercept) * xx**f.slope, ls, color="k",
                              label=f"{side} L*: slope {f.slope:.2f} [{f.lo:.2f}, {f.hi:.2f}]")
        ref = [x for x in xs if x < L_star]
        if ref:
            xx = np.geomspace(min(ref), max(ref), 10)
            y0 = np.median([t for x, t in zip(xs, ys, strict=True) if x == ref[0]])
            ax.loglog(xx, y0 * (xx / ref[0]) ** -2.0, ":", color="tab:red", label="theory: slope -2")
        ax.axvline(L_star, color="gray", ls=":", lw=1)
        ax.text(L_star, ax.get_ylim()[1], " L*", va="top", fontsize=8)
        ax.set(xlabel="L", ylabel=f"{name} (steps)", title=f"{name} against L")
        ax.legend(fontsize=6)
    return plots.save(fig, ctx.out, stem)


def _axis_sweep(ctx, cfg, group, label, key, values, names):
    """One run per value of ``key``, each with its budget in the theory's time scale (runner.with_budget)."""
    extra = ["features.kind=file", "features.K=null", "features.d=null"] if key == "features.path" else []
    configs = [with_budget(with_overrides(cfg, [*extra, f"{key}={v}", f"name={names(v)}"]), ctx.sizes.eps_rel,
                           cap=AXIS_CAP * ctx.sizes.budget, margin=AXIS_MARGIN) for v in values]
    return run_group(ctx, group, configs, label)


def _axes_figure(ctx, r_eta, dr: DeltaReadings, r_K, Ks, eps) -> str:
    fig, axes = plots.figure(3, 1)
    panels = (
        (axes[0][0], {"measured T_eps": ([r.config.train.lr for r in r_eta], [r.summary["T_eps"] for r in r_eta])},
         "eta", -1.0),
        (axes[0][1], {name: (list(v["Delta"].values()), list(v["T_eps"].values()))
                      for name, v in dr.readings.items()}, "Delta", -2.0),
        (axes[0][2], {"measured T_eps": ([k * math.log(k / eps) for k in Ks], [r.summary["T_eps"] for r in r_K])},
         "K log(K/eps)", 1.0),
    )
    for ax, series, name, pred in panels:
        anchor = None
        for label, (xs, ys) in series.items():
            pts = sorted((x, y) for x, y in zip(xs, ys, strict=True) if y)
            if pts:
                px, py = zip(*pts, strict=True)
                ax.loglog(px, py, "o-", label=label, ms=4)
                anchor = anchor or (px, py)
        if anchor:
            px, py = anchor
            xx = np.geomspace(min(px), max(px), 10)
            ax.loglog(xx, py[-1] * (xx / px[-1]) ** pred, ":", color="tab:red", label=f"theory slope {pred:g}")
            ax.legend(fontsize=7)
        ax.set(xlabel=name, ylabel="T_eps", title=f"flat regime: T_eps vs {name}")
    return plots.save(fig, ctx.out, "scaling_eta_Delta_K")
