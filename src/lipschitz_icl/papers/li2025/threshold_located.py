"""The threshold readings that locate a change along L (P4b absolute eps, P4c label noise, P4d fixed step),
each under the three Delta readings (threshold_delta.py), and the measurements behind them, shared with
P4a, B3 and R5 (measured once per output directory in a process)."""

from __future__ import annotations

import math

import numpy as np

from ...experiments.claims import ClaimResult, claim, verdict
from ...experiments.delta import combined
from ...experiments.evidence import refined_context, refinement, settle
from ...experiments.runner import Context, paper_base, rel_runs, with_overrides
from ...experiments.sizes import FULL, QUICK, TINY
from .threshold_absolute import ABS_EPS, ABS_FACTORS, AGREE, absolute_runs, invariance_check
from .threshold_delta import (
    DELTA_RULE,
    DeltaPlan,
    delta_plan,
    located_by_reading,
    readings_summary,
    undecided_readings,
)
from .threshold_measure import (
    TAU,
    Setting,
    crossing_of,
    make_setting,
    relative_runs,
    rescaled_time,
    step_size_changes,
    variation_settings,
)

EPS_ABS = (ABS_EPS, 1e-3)  # P4b: absolute accuracies asked (the first is the reading's)
ETA_FIXED = 1.0  # P4d: the fixed step size (the quickstart's)
FORCED_NOTE = ("Under the rescale and tilt readings every setting is the base setting up to scale (the linear class "
               "is homogeneous; a uniform tilt is a rescaling on everything the loss sees), so those readings are "
               "forced: their outcome follows from how L_x scales with the rescaling, and it is reported, not set "
               "aside. The pair reading changes the geometry.")

_MEASURED: dict[tuple, dict] = {}  # measure_readings per (out, seed, sizes): R5 reuses what P4 measured


def measure_readings(ctx: Context) -> dict:
    """Every reading's measurements on the Delta protocol's settings: P4a runs, P4b's exact L_x, P4c's
    crossings, P4d's bisection, and P4b's and P4c's values at the finer approximation. Measured once per
    output directory, seed and sizes in a process (P4 and R5 share it)."""
    key = (str(ctx.out), ctx.seed, ctx.sizes)
    if key not in _MEASURED:
        _MEASURED.clear()
        _MEASURED[key] = _measure(ctx)
    return _MEASURED[key]


def _measure(ctx: Context) -> dict:
    base = paper_base(ctx)
    plan = delta_plan(ctx, base)
    settings = plan.measured
    rel = relative_runs(ctx, settings)
    leads = {st.name: max(rel[st.name], key=lambda r: r.config.task.L) for st in settings}
    absolute = absolute_runs(ctx, settings, leads)
    s_ref = {st.name: _median_rescaled_time(rel[st.name]) for st in settings}
    crossings = {st.name: crossing_of(ctx, st, TAU) for st in settings}
    variations = [(st, tau, crossing_of(ctx, st, tau)) for st, tau in variation_settings(ctx, base)]
    steps, step_runs = step_size_changes(ctx, settings, s_ref, ETA_FIXED)
    return {"plan": plan, "settings": settings, "relative": rel, "leads": leads, "absolute": absolute,
            "s_ref": s_ref, "crossings": crossings, "variations": variations, "steps": steps,
            "step_runs": step_runs, "refined": _refined(ctx, plan, base)}


def _refined(ctx: Context, plan: DeltaPlan, base) -> dict:
    """P4b's l0, P4c's crossing and P4d's bisection (with the small-step runs it rests on) at the finer
    approximation (evidence.refined_context), for the settings of the readings that are not forced (a forced
    reading's outcome holds at every count law: its settings share it)."""
    free = tuple(r for r, s in plan.shapes.items() if not s.forced_by())
    overrides = {ds.name: ds.overrides for pts in plan.points.values() for ds in pts}
    names = dict.fromkeys(plan.measured_for[ds.name] for r in free for ds in plan.points[r])
    fine_ctx, what = refined_context(ctx, (base.prompt.N, base.features.K))
    fine_base = paper_base(fine_ctx)
    fine = {n: make_setting(n, with_overrides(fine_base, [*overrides[n], f"name={n}"])) for n in names}
    settings = list(fine.values())
    rel = relative_runs(fine_ctx, settings)
    s_ref = {st.name: _median_rescaled_time(rel[st.name]) for st in settings}
    steps, _ = step_size_changes(fine_ctx, settings, s_ref, ETA_FIXED)
    return {"approximation": what, "readings": free, "loss0": {n: st.loss0 for n, st in fine.items()},
            "L_tau": {n: crossing_of(fine_ctx, st, TAU).L for n, st in fine.items()},
            "L_x_step": {n: steps[n].L_x if n in steps else None for n in fine}}


def _median_rescaled_time(runs) -> float | None:
    """The median small-step rescaled time eta L^2 T_eps of a setting's P4a runs (None when none reached eps)."""
    got = [s for s in (rescaled_time(r) for r in runs) if s]
    return float(np.median(got)) if got else None


def _located(ctx: Context, cid: str, crit: str, m: dict, Lx: dict, extra: dict, invalid_because: str = "",
             refined_Lx: dict | None = None, **kw) -> ClaimResult:
    """A reading of the threshold judged under the three Delta readings and combined (DELTA_RULE); with
    ``refined_Lx`` the readings that are not forced are judged again at the finer approximation."""
    plan: DeltaPlan = m["plan"]
    readings = located_by_reading(plan, Lx, invalid_because)
    sup, ref, forced_by = combined(readings)
    dd = {st.name: st.dd for st in plan.measured}
    prods = [Lx[n] * dd[n] for n in dd if Lx.get(n)]
    stat = {"readings": readings_summary(readings), "L_x_by_setting": Lx, "Delta_delta_by_setting": dd,
            # over the distinct settings of every reading (each counted once); the verdict is the readings'
            "cv_Lx_dd": float(np.std(prods, ddof=1) / np.mean(prods)) if len(prods) >= 2 else None,
            "dd_span": max(dd.values()) / min(dd.values()), "n_settings": len(prods),
            "slope_lo": None, "slope_hi": None,  # no interval: each reading is a deterministic curve (readings)
            **extra}
    result = claim(cid, crit + " " + DELTA_RULE, stat, sup, ref, settings=plan.all_shapes, readings=readings,
                   size=size_name(ctx), notes=FORCED_NOTE, **kw)
    mark_forced(result, forced_by)
    if refined_Lx is not None:
        fine = located_by_reading(plan, refined_Lx, invalid_because, m["refined"]["readings"])
        settle_readings(result, readings, fine, m["refined"]["approximation"],
                        {"readings": readings_summary({**readings, **fine}), "L_x_by_setting": refined_Lx})
    if result.verdict == "inconclusive" and not result.undecided_because:
        result.undecided_because = undecided_readings(readings) or "the readings neither all support nor contradict"
    return result


def mark_forced(result: ClaimResult, forced_by: str) -> None:
    """Mark ``result`` forced when its forced Delta readings alone fix its verdict (``delta.combined``)."""
    if forced_by:
        result.forced, result.forced_by = True, forced_by
        result.forced_reason = f"forced readings fix the verdict ({forced_by})"


def settle_readings(result: ClaimResult, readings: dict[str, dict], fine: dict[str, dict], approximation: str,
                    statistic: dict) -> None:
    """Judge ``result`` again with the readings of ``fine`` (those recomputed at the finer approximation) in
    place of its own: ``result.refinement`` records it, and a combined verdict that moves is inconclusive."""
    fine_verdict = verdict(*combined({**readings, **fine})[:2])
    result.refinement = refinement(result.verdict, fine_verdict, approximation, statistic)
    result.verdict, why = settle(result.verdict, result.refinement)
    result.undecided_because = why or result.undecided_because


def _p4b(ctx: Context, m: dict, fig: str) -> ClaimResult:
    crit = ("Absolute eps at a fixed eta: T_eps(L) = S(eps / L^2) / (eta L^2), S the rescaled time at L = 1, so a "
            "run with L^2 l0 <= eps (l0 the initial loss at L = 1, uniform scores) is converged at step 0. "
            "L_x = sqrt(eps / l0), exact (no grid), eps = 1e-2 (and 1e-3 for the eps-dependence). Runs to the "
            f"absolute eps at L = {', '.join(f'{f:g}' for f in ABS_FACTORS)} L_x in every setting test the "
            "prediction T_eps(L) from P4a's largest-L run; if any run is off by more than "
            f"max(2 steps, {AGREE:g} x predicted), the invariance behind L_x fails and the reading is inconclusive. "
            "l0 is recomputed at the finer approximation (evidence.refined_context) for the readings that are not "
            "forced; a verdict that moves is inconclusive.")
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
             "absolute_runs": check}
    invalid = "" if check["agree"] else (
        f"absolute-eps runs deviate from the invariance's prediction by up to {check['max_relative_deviation']} "
        "(relative; None: a run was censored): the exact L_x does not hold on these runs")
    fine = {n: math.sqrt(EPS_ABS[0] / l0) for n, l0 in m["refined"]["loss0"].items()}
    return _located(ctx, "P4b", crit, m, Lx, extra, invalid, refined_Lx=fine, figures=[fig],
                    censored=check["censored"], runs=rel_runs(ctx, [r for rs in m["absolute"].values() for r in rs]))


def _p4c(ctx: Context, m: dict, fig: str) -> ClaimResult:
    crit = (f"Label noise tau = {TAU:g}: the population optimum over M of the kernel loss, minimised to a gradient "
            "tolerance (optimum.py); L_tau = the L at which min_k Attn_k at the optimum crosses 1/2, by bisection on "
            "log L (no step budget), recomputed at the finer approximation for the readings that are not forced (a "
            "verdict that moves is inconclusive). L_tau_coef = median over the distinct settings (and the tau, N, K "
            "variations of the base) of L_tau Delta delta / (tau sqrt(K/N)).")
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
    covers = {"L_tau_coef": f"min to max over {len(vals)} distinct settings (a range, not a confidence interval)"}
    return _located(ctx, "P4c", crit, m, Lx, extra, refined_Lx=m["refined"]["L_tau"], figures=[fig],
                    interval=interval, interval_covers=covers, censored=len(extra["not_bracketed"]))


def _coef(L_tau: float | None, st: Setting, tau: float) -> float | None:
    K, N = st.cfg.features.K, st.cfg.prompt.N
    return None if L_tau is None else L_tau * st.dd / (tau * math.sqrt(K / N))


def _p4d(ctx: Context, m: dict, fig: str) -> ClaimResult:
    crit = (f"Fixed step eta = {ETA_FIXED:g}, relative eps: GD changes behaviour at L when it is unstable (diverges "
            "or the loss rises), saturates in one step (T_eps = 1), or leaves the small-step trajectory: its rescaled "
            "time eta L^2 T_eps is outside [1/2, 2] x the small-step value s_ref of P4a's runs (a run still short of "
            "eps at 4x s_ref / (eta L^2) steps counts as outside). L_x by bisection on log L in [L_d/4, 4 L_d] (ends "
            "checked: unchanged at L_d/4, changed at 4 L_d), L_d = sqrt(2 / (eta lambda_1)) where eta = eta_max(L) = "
            "2/lambda_max at Q = 0. The bisection (and the small-step runs s_ref rests on) is repeated at the finer "
            "approximation for the readings that are not forced; a verdict that moves is inconclusive.")
    steps, st_list = m["steps"], m["settings"]
    Lx = {st.name: steps[st.name].L_x if st.name in steps else None for st in st_list}
    L_d = {st.name: math.sqrt(2 / (ETA_FIXED * st.lam1)) for st in st_list}
    ratio = {n: (Lx[n] / L_d[n] if Lx[n] else None) for n in Lx}
    rv = [v for v in ratio.values() if v]
    extra = {"eta": ETA_FIXED, "L_d_eta_max_by_setting": L_d, "L_x_over_L_d_by_setting": ratio,
             "median_L_x_over_L_d": float(np.median(rv)) if rv else None,
             "bracket_by_setting": {n: [c.lo, c.hi] for n, c in steps.items()},
             "L_d_scaling": "L_d = sqrt(2/(eta lambda_1)) and lambda_1 grows like Delta^6 under a rescaling of the "
                            "features (Sigma ~ Delta^2, M ~ Delta^2 Q), so L_d ~ 1/Delta^3, not 1/(Delta delta)",
             "not_bracketed": [n for n, v in Lx.items() if v is None]}
    return _located(ctx, "P4d", crit, m, Lx, extra, refined_Lx=m["refined"]["L_x_step"], figures=[fig],
                    censored=sum(c.censored for c in steps.values()), runs=rel_runs(ctx, m["step_runs"]))


def located_readings(ctx: Context, m: dict, fig: str) -> list[ClaimResult]:
    """The readings that locate a change along L (P4b, P4c, P4d), from ``measure_readings``."""
    return [_p4b(ctx, m, fig), _p4c(ctx, m, fig), _p4d(ctx, m, fig)]


def size_name(ctx: Context) -> str:
    """The name of the context's sizes (tiny, quick, full; custom otherwise)."""
    return {id(TINY): "tiny", id(QUICK): "quick", id(FULL): "full"}.get(id(ctx.sizes), "custom")
