"""The threshold readings on settings spanning Delta delta; P4's verdict summarises them."""

from __future__ import annotations

import math

import numpy as np

from ...experiments.claims import ClaimResult, claim
from ...experiments.figures import captioned
from ...experiments.registry import experiment
from ...experiments.runner import Context, paper_base, rel_runs, single_threaded
from ...experiments.sizes import FULL, QUICK, TINY
from .threshold_absolute import ABS_EPS, ABS_FACTORS, AGREE, absolute_runs, invariance_check
from .threshold_fig import readings_figure
from .threshold_measure import (
    RELATIVE_MARGIN,
    SCALING_MARGINS,
    TAU,
    Setting,
    crossing_of,
    relative_runs,
    rescaled_time,
    scaling_test,
    scaling_verdict,
    settings_of,
    step_size_changes,
    variation_settings,
)

STATEMENTS = {  # the claims this file tests, word for word as the report and docs/CLAIMS.md give them
    "P4": "The Lipschitz constant L governs the dynamics: a threshold L* of order 1/(Delta delta) separates a flat "
    "regime (L < L*) from a sharp regime (L > L*).",
    "P4a": "Threshold, relative-accuracy reading: with eps relative to the initial loss and a fixed step size, the "
    "convergence time changes behaviour along L, at an L of order L* = 1/(Delta delta).",
    "P4b": "Threshold, absolute-accuracy reading: with a fixed absolute eps and a fixed step size, the convergence "
    "time changes behaviour at an L_x that scales as 1/(Delta delta) across settings.",
    "P4c": "Threshold, label-noise reading: with label noise tau > 0, the attention at the loss's optimum "
    "concentrates on the query's own feature (min_k Attn_k > 1/2) above an L_tau that scales as 1/(Delta delta) "
    "across settings.",
    "P4d": "Threshold, step-size reading: at a fixed step size, gradient descent changes behaviour (instability, or "
    "saturation in one step) above an L_x that scales as 1/(Delta delta) across settings.",
    "B3": "The threshold is about sqrt(d/n).",
}




EPS_ABS = (ABS_EPS, 1e-3)  # P4b: absolute accuracies asked (the first is the reading's)


HOMOGENEOUS_NOTE = ("The linear class on orthonormal features at another features.scale or d is the base setting "
                    "rescaled (f is homogeneous), so those settings share L_x Delta delta by construction; the "
                    "evidence across settings comes from the other classes (relu_net, sinusoid) and the gaussian "
                    "features.")


ETA_FIXED = 1.0  # P4d: the fixed step size (the quickstart's)


FORCED_P4A = ("f = L g: under a relative eps without label noise GD depends on (eta, L) only through eta L^2, so "
              "the rescaled time eta L^2 T_eps is the same at every L wherever the steps are small")


_MEASURED: dict[tuple, dict] = {}  # measure_readings per (out, seed, sizes): R5 reuses what P4 measured


def measure_readings(ctx: Context) -> dict:
    """Every reading's measurements on the settings: P4a runs, P4b's exact L_x, P4c's crossings, P4d's
    bisection. Measured once per output directory, seed and sizes in a process (P4 and R5 share it)."""
    key = (str(ctx.out), ctx.seed, ctx.sizes)
    if key not in _MEASURED:
        _MEASURED.clear()
        _MEASURED[key] = _measure(ctx)
    return _MEASURED[key]


def _measure(ctx: Context) -> dict:
    base = paper_base(ctx, f"engine.draws={ctx.sizes.draws}")
    settings = settings_of(ctx, base)
    rel = relative_runs(ctx, settings)
    leads = {st.name: max(rel[st.name], key=lambda r: r.config.task.L) for st in settings}
    absolute = absolute_runs(ctx, settings, leads)
    s_ref = {}
    for st in settings:
        s_vals = [rescaled_time(r) for r in rel[st.name]]
        s_ref[st.name] = float(np.median([s for s in s_vals if s])) if any(s_vals) else None
    crossings = {st.name: crossing_of(ctx, st, TAU) for st in settings}
    variations = [(st, tau, crossing_of(ctx, st, tau)) for st, tau in variation_settings(ctx, base)]
    steps, step_runs = step_size_changes(ctx, settings, s_ref, ETA_FIXED)
    return {"settings": settings, "relative": rel, "leads": leads, "absolute": absolute, "s_ref": s_ref,
            "crossings": crossings,
            "variations": variations, "steps": steps, "step_runs": step_runs}


def _p4a(ctx: Context, m: dict, fig: str) -> ClaimResult:
    crit = ("Relative eps (loss <= eps_rel x initial loss), one fixed eta per setting (a tenth of the largest "
            "stable step at the largest L), L / L* over the size's factors. Budgets in rescaled time: each run gets "
            f"{RELATIVE_MARGIN:g}x the rescaled time of its setting's largest-L run, so a censored run bounds its "
            f"ratio below by {RELATIVE_MARGIN:g}. Statistic: per setting, max/min over L of the rescaled time "
            "eta L^2 T_eps. Supported (behaviour changes along L) if some setting's ratio exceeds 2 (a censored run "
            "counts as exceeding it); not supported if every ratio is <= 1.25 (one curve in rescaled time) and no "
            "run is censored.")
    ratios, censored = {}, 0
    for st in m["settings"]:
        s = [rescaled_time(r) for r in m["relative"][st.name]]
        censored += sum(v is None for v in s)
        got = [v for v in s if v]
        ratios[st.name] = (math.inf if len(got) < len(s) else max(got) / min(got)) if len(got) >= 1 else None
    vals = [v for v in ratios.values() if v is not None]
    stat = {"rescaled_time_ratio_by_setting": ratios, "max_ratio": max(vals) if vals else None,
            "L_over_Lstar": list(ctx.sizes.thr_L_factors), "eps_rel": ctx.sizes.thr_eps_rel,
            "rescaled_time_by_setting": {n: v for n, v in m["s_ref"].items()}, "L_x": None}
    sup, ref = bool(vals) and max(vals) > 2, bool(vals) and max(vals) <= 1.25 and censored == 0
    runs = [r for rs in m["relative"].values() for r in rs]
    return claim("P4a", crit, stat, sup, ref, figures=[fig], runs=rel_runs(ctx, runs), forced=True,
                 forced_reason=FORCED_P4A, censored=censored, size=size_name(ctx),
                 undecided_because="" if sup != ref else "a ratio in (1.25, 2]: more L values or a smaller eta")


def _located(ctx: Context, cid: str, crit: str, Lx: dict, settings: list[Setting], extra: dict,
             invalid_because: str = "", **kw) -> ClaimResult:
    """A reading whose verdict is the 1/(Delta delta) scaling test of its located change L_x (inconclusive,
    with ``invalid_because``, when a check of the reading's premise failed)."""
    test = scaling_test([Lx.get(st.name) for st in settings], [st.dd for st in settings], ctx.seed)
    sup, ref, why = scaling_verdict(test)
    if invalid_because:
        sup, ref, why = False, False, invalid_because
    stat = {**test, "L_x_by_setting": Lx, "Lx_dd_by_setting": {st.name: (Lx[st.name] * st.dd if Lx.get(st.name)
                                                                          else None) for st in settings},
            "Delta_delta_by_setting": {st.name: st.dd for st in settings}, **extra}
    interval = {"slope": [test["slope_lo"], test["slope_hi"]]} if test["slope_lo"] is not None else {}
    return claim(cid, crit + " " + SCALING_MARGINS, stat, sup, ref, interval=interval | kw.pop("interval", {}),
                 undecided_because=why, size=size_name(ctx), notes=HOMOGENEOUS_NOTE, **kw)


def _p4b(ctx: Context, m: dict, fig: str) -> ClaimResult:
    crit = ("Absolute eps at a fixed eta: T_eps(L) = S(eps / L^2) / (eta L^2), S the rescaled time at L = 1, so a "
            "run with L^2 l0 <= eps (l0 the initial loss at L = 1, uniform scores) is converged at step 0. "
            "L_x = sqrt(eps / l0), exact (no grid), eps = 1e-2 (and 1e-3 for the eps-dependence). Runs to the "
            f"absolute eps at L = {', '.join(f'{f:g}' for f in ABS_FACTORS)} L_x in every setting test the "
            "prediction T_eps(L) from P4a's largest-L run; if any run is off by more than "
            f"max(2 steps, {AGREE:g} x predicted), the invariance behind L_x fails and the reading is inconclusive.")
    st_list = m["settings"]
    check = invariance_check(st_list, m["leads"], m["absolute"])
    Lx = {st.name: math.sqrt(EPS_ABS[0] / st.loss0) for st in st_list}
    by_eps = {f"{e:g}": {st.name: math.sqrt(e / st.loss0) for st in st_list} for e in EPS_ABS}
    n0 = st_list[0].name
    extra = {"eps": EPS_ABS[0], "l0_by_setting": {st.name: st.loss0 for st in st_list},
             "l0_over_dd2_by_setting": {st.name: st.loss0 / st.dd**2 for st in st_list},
             "L_x_by_eps": by_eps, "L_x_eps_exponent": math.log(by_eps[f"{EPS_ABS[0]:g}"][n0] /
                                                                 by_eps[f"{EPS_ABS[1]:g}"][n0]) /
             math.log(EPS_ABS[0] / EPS_ABS[1]),
             "eps_dependence": "L_x = sqrt(eps / l0): exponent 1/2 in eps exactly (the invariance)",
             "sqrt_eps_over_l0_collapse": "L_x / sqrt(eps/l0) = 1 in every setting by construction",
             "absolute_runs": check}
    invalid = "" if check["agree"] else (
        f"absolute-eps runs deviate from the invariance's prediction by up to {check['max_relative_deviation']} "
        "(relative; None: a run was censored): the exact L_x does not hold on these runs")
    return _located(ctx, "P4b", crit, Lx, st_list, extra, invalid, figures=[fig], censored=check["censored"],
                    runs=rel_runs(ctx, [r for rs in m["absolute"].values() for r in rs]))


def _p4c(ctx: Context, m: dict, fig: str) -> ClaimResult:
    crit = (f"Label noise tau = {TAU:g}: the population optimum over M of the kernel loss, minimised to a gradient "
            "tolerance (optimum.py); L_tau = the L at which min_k Attn_k at the optimum crosses 1/2, by bisection on "
            "log L (no step budget). L_tau_coef = median over all settings of L_tau Delta delta / (tau sqrt(K/N)).")
    st_list = m["settings"]
    Lx = {n: c.L for n, c in m["crossings"].items()}
    coefs = {st.name: _coef(Lx[st.name], st, TAU) for st in st_list}
    for st, tau, c in m["variations"]:
        coefs[st.name] = _coef(c.L, st, tau)
    vals = [v for v in coefs.values() if v is not None]
    extra = {"tau": TAU, "L_tau_coef": float(np.median(vals)) if vals else None, "L_tau_coef_by_setting": coefs,
             "L_tau_by_variation": {st.name: {"tau": tau, "N": st.cfg.prompt.N, "K": st.cfg.features.K, "L_tau": c.L}
                                    for st, tau, c in m["variations"]},
             "tau_dependence": "L_tau proportional to tau exactly: the optimum depends on L / tau only",
             "all_optima_converged": all(c.all_converged for c in m["crossings"].values()),
             "not_bracketed": [n for n, v in Lx.items() if v is None]}
    interval = {"L_tau_coef": [min(vals), max(vals)]} if vals else {}
    return _located(ctx, "P4c", crit, Lx, st_list, extra, figures=[fig], interval=interval,
                    censored=len(extra["not_bracketed"]))


def _coef(L_tau: float | None, st: Setting, tau: float) -> float | None:
    K, N = st.cfg.features.K, st.cfg.prompt.N
    return None if L_tau is None else L_tau * st.dd / (tau * math.sqrt(K / N))


def _p4d(ctx: Context, m: dict, fig: str) -> ClaimResult:
    crit = (f"Fixed step eta = {ETA_FIXED:g}, relative eps: GD changes behaviour at L when it is unstable (diverges "
            "or the loss rises), saturates in one step (T_eps = 1), or leaves the small-step trajectory: its rescaled "
            "time eta L^2 T_eps is outside [1/2, 2] x the small-step value s_ref of P4a's runs (a run still short of "
            "eps at 4x s_ref / (eta L^2) steps counts as outside). L_x by bisection on log L in [L_d/4, 4 L_d] (ends "
            "checked: unchanged at L_d/4, changed at 4 L_d), L_d = sqrt(2 / (eta lambda_1)) where eta = eta_max(L) = "
            "2/lambda_max at Q = 0.")
    steps, st_list = m["steps"], m["settings"]
    Lx = {st.name: steps[st.name].L_x if st.name in steps else None for st in st_list}
    L_d = {st.name: math.sqrt(2 / (ETA_FIXED * st.lam1)) for st in st_list}
    ratio = {n: (Lx[n] / L_d[n] if Lx[n] else None) for n in Lx}
    rv = [v for v in ratio.values() if v]
    extra = {"eta": ETA_FIXED, "L_d_eta_max_by_setting": L_d, "L_x_over_L_d_by_setting": ratio,
             "median_L_x_over_L_d": float(np.median(rv)) if rv else None,
             "bracket_by_setting": {n: [c.lo, c.hi] for n, c in steps.items()},
             "L_d_scaling": "L_d = sqrt(2/(eta lambda_1)) and lambda_1 grows like Delta^6 at a fixed class under "
                            "features.scale (Sigma ~ Delta^2, M ~ Delta^2 Q), so L_d ~ 1/Delta^3, not 1/(Delta delta)"}
    extra["not_bracketed"] = [n for n, v in Lx.items() if v is None]
    return _located(ctx, "P4d", crit, Lx, st_list, extra, figures=[fig],
                    censored=sum(c.censored for c in steps.values()), runs=rel_runs(ctx, m["step_runs"]))


def located_readings(ctx: Context, m: dict, fig: str) -> list[ClaimResult]:
    """The readings that locate a change along L (P4b, P4c, P4d), from ``measure_readings``."""
    return [_p4b(ctx, m, fig), _p4c(ctx, m, fig), _p4d(ctx, m, fig)]


def _p4(ctx: Context, readings: list[ClaimResult], fig: str) -> ClaimResult:
    crit = ("P4 is the summary of its readings P4a (relative eps, forced), P4b (absolute eps), P4c (label noise) "
            "and P4d (fixed step size). Supported if at least one reading that is not forced is supported (a change "
            "of behaviour along L whose location scales as 1/(Delta delta)); not supported if every reading that is "
            "not forced is not supported; otherwise inconclusive.")
    free = [r for r in readings if not r.forced]
    stat = {r.id: {"verdict": r.verdict, "forced": r.forced, "median_Lx_over_Lstar":
                   r.statistic.get("median_Lx_over_Lstar"), "cv_Lx_dd": r.statistic.get("cv_Lx_dd"),
                   "slope": r.statistic.get("slope"), "slope_interval": r.interval.get("slope")} for r in readings}
    stat["what_sets_L_x_over_Lstar"] = {  # the location is L* times a factor that the reading's own knob sets
        "P4b": "sqrt(eps / (l0 / (Delta delta)^2)): grows as sqrt(eps)",
        "P4c": "L_tau_coef x tau sqrt(K/N): grows as tau, falls about as 1/sqrt(N)",
        "P4d": "eta_max at Q = 0 (L_x / L_d), not Delta delta"}
    sup = any(r.verdict == "supported" for r in free)
    ref = bool(free) and all(r.verdict == "not supported" for r in free)
    why = "" if sup != ref else "; ".join(f"{r.id}: {r.undecided_because}" for r in free if r.undecided_because)
    return claim("P4", crit, stat, sup, ref, figures=[fig], size=size_name(ctx), undecided_because=why or (
        "" if sup != ref else "no reading decided: see P4a-P4d"))


def _b3(ctx: Context, m: dict, readings: dict[str, ClaimResult], fig: str) -> ClaimResult:
    crit = ("The write-up's threshold sqrt(d/n), n = N context examples, against the located change of each reading "
            "that has one (P4b, P4c at tau = 1 with its N and K variations, P4d): r = L_x / sqrt(d/N) per setting. "
            "Supported if for some reading the median r lies in [1/2, 2] and the CV of r across settings is <= 0.25 "
            "(L_x tracks sqrt(d/N)); not supported if for every reading the median r lies outside [1/4, 4] or the CV "
            "of r exceeds 0.5.")
    per = {}
    for cid in ("P4b", "P4c", "P4d"):
        Lx = dict(readings[cid].statistic.get("L_x_by_setting", {}))
        cfgs = {st.name: st.cfg for st in m["settings"]}
        if cid == "P4c":
            for st, tau, c in m["variations"]:
                if tau == TAU:
                    Lx[st.name], cfgs[st.name] = c.L, st.cfg
        r = [Lx[n] / math.sqrt(cfgs[n].features.d / cfgs[n].prompt.N) for n in Lx if Lx[n]]
        per[cid] = {"median_r": float(np.median(r)) if r else None,
                    "cv_r": float(np.std(r, ddof=1) / np.mean(r)) if len(r) >= 2 else None, "n": len(r)}
    ok = [v for v in per.values() if v["median_r"] is not None and v["cv_r"] is not None]
    sup = any(0.5 <= v["median_r"] <= 2 and v["cv_r"] <= 0.25 for v in ok)
    ref = bool(ok) and all(not (0.25 <= v["median_r"] <= 4) or v["cv_r"] > 0.5 for v in ok)
    return claim("B3", crit, {"by_reading": per}, sup, ref, figures=[fig], size=size_name(ctx),
                 undecided_because="" if sup != ref else "no reading has both a median and a CV of r in or out of "
                 "the margins: more settings varying d and N")


def size_name(ctx: Context) -> str:
    """The name of the context's sizes (tiny, quick, full; custom otherwise)."""
    return {id(TINY): "tiny", id(QUICK): "quick", id(FULL): "full"}.get(id(ctx.sizes), "custom")


READINGS_CAPTION = (
    "The threshold's readings against L / L* (grey dotted: L = L*), one colour per setting (legend: its Delta delta). "
    "Top row: P4a, rescaled time eta L^2 T_eps over its median (relative eps, fixed eta; flat by the invariance "
    "f = L g); P4b, T_eps + 1 under an absolute eps at a fixed eta, the line predicted from P4a's largest-L run and "
    "the circles measured runs (zero below L_x = sqrt(eps / l0), a peak just above it); P4c, min_k Attn_k at the "
    "population optimum with label noise (it crosses the black line at L_tau); P4c again, L_tau against "
    "tau sqrt(K/N) / (delta Delta), squares where tau, N or K vary (on the dotted line: L_tau proportional to it). "
    "Bottom row: P4d, T_eps at eta = 1 (x: unstable); each located change L_x times Delta delta against Delta delta. "
    "Look for a change at the same L / L* in every setting, i.e. a horizontal row in the bottom middle panel "
    "(L_x proportional to 1/(Delta delta)) at a value of order 1; a sloping row, or one far from 1, contradicts that "
    "reading of the threshold; circles off the P4b line would contradict the invariance itself.")


CAPTIONS = {"threshold_readings": READINGS_CAPTION}  # figure stem -> what is plotted, what to look for


@experiment("P4", "P4a", "P4b", "P4c", "P4d", "B3", suites=("paper", "blog"), statements=STATEMENTS)
@captioned(CAPTIONS)
@single_threaded
def exp_threshold(ctx: Context) -> list[ClaimResult]:
    """The threshold readings on settings spanning Delta delta; P4's verdict summarises them."""
    m = measure_readings(ctx)
    fig = readings_figure(ctx, m, "threshold_readings")
    readings = {"P4a": _p4a(ctx, m, fig), "P4b": _p4b(ctx, m, fig), "P4c": _p4c(ctx, m, fig),
                "P4d": _p4d(ctx, m, fig)}
    p4 = _p4(ctx, list(readings.values()), fig)
    return [p4, *readings.values(), _b3(ctx, m, readings, fig)]


