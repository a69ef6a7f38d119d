"""The threshold readings, each under the three readings of Delta (threshold_delta.py); P4's verdict summarises
them."""

from __future__ import annotations

import math

import numpy as np

from ...experiments.claims import ClaimResult, claim, verdict
from ...experiments.delta import READINGS, combined
from ...experiments.evidence import run_settings, unresolved
from ...experiments.figures import captioned
from ...experiments.registry import experiment
from ...experiments.runner import Context, rel_runs, single_threaded
from .threshold_delta import DeltaPlan, undecided_readings
from .threshold_fig import readings_figure
from .threshold_located import located_readings, mark_forced, measure_readings, settle_readings, size_name
from .threshold_measure import RELATIVE_MARGIN, TAU, rescaled_time

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




FORCED_P4A = ("f = L g: under a relative eps without label noise GD depends on (eta, L) only through eta L^2, so "
              "the rescaled time eta L^2 T_eps is the same at every L wherever the steps are small")


def _p4a(ctx: Context, m: dict, fig: str) -> ClaimResult:
    crit = ("Relative eps (loss <= eps_rel x initial loss), one fixed eta per setting (a tenth of the largest "
            "stable step at the largest L), L / L* over the size's factors, on every setting of the one Delta "
            "protocol (copies step for step measured once). Budgets in rescaled time: each run gets "
            f"{RELATIVE_MARGIN:g}x the rescaled time of its setting's largest-L run, so a censored run bounds its "
            f"ratio below by {RELATIVE_MARGIN:g}. Statistic: per setting, max/min over L of the rescaled time "
            "eta L^2 T_eps; a reading with a T_eps below 10 steps is inconclusive. Per Delta reading: supported "
            "(behaviour changes along L) if some setting's ratio exceeds 2 (a censored run counts as exceeding it); "
            "not supported if every ratio is <= 1.25 (one curve in "
            "rescaled time) and no run is censored. Combined by delta.combine: supported when every reading "
            "supports, not supported when some reading contradicts, inconclusive otherwise.")
    plan: DeltaPlan = m["plan"]
    ratios, censored = {}, {}
    for st in m["settings"]:
        s = [rescaled_time(r) for r in m["relative"][st.name]]
        censored[st.name] = sum(v is None for v in s)
        got = [v for v in s if v]
        ratios[st.name] = (math.inf if len(got) < len(s) else max(got) / min(got)) if got else None
    readings = {r: _p4a_reading(m, plan, r, ratios, censored) for r in READINGS}
    sup, ref, _ = combined(readings)
    vals = [v for v in ratios.values() if v is not None]
    stat = {"readings": {r: {k: v[k] for k in ("verdict", "forced_by", "max_ratio")} for r, v in readings.items()},
            "rescaled_time_ratio_by_setting": ratios, "max_ratio": max(vals) if vals else None,
            "L_over_Lstar": list(ctx.sizes.thr_L_factors), "eps_rel": ctx.sizes.thr_eps_rel,
            "rescaled_time_by_setting": dict(m["s_ref"]), "L_x": None}
    runs = [r for rs in m["relative"].values() for r in rs]
    return claim("P4a", crit, stat, sup, ref, settings=plan.all_shapes, readings=readings, figures=[fig],
                 runs=rel_runs(ctx, runs), forced=True, forced_reason=FORCED_P4A, censored=sum(censored.values()),
                 size=size_name(ctx), undecided_because="" if sup != ref else (
                     undecided_readings(readings) or "a ratio in (1.25, 2]: more L values or a smaller eta"))


def _p4a_reading(m: dict, plan: DeltaPlan, reading: str, ratios: dict, censored: dict) -> dict:
    """P4a under one Delta reading: its settings' runs grouped by shape (every L of a setting is one shape under
    eta L^2, so the reading is forced by it, and by the Delta reading's own invariance where it has one)."""
    names = [plan.measured_for[ds.name] for ds in plan.points[reading]]
    got = [ratios[n] for n in names if ratios[n] is not None]
    cens = sum(censored[n] for n in dict.fromkeys(names))
    shapes = run_settings([r for n in dict.fromkeys(names) for r in m["relative"][n]])
    within = sorted({w for n in dict.fromkeys(names) for w in run_settings(m["relative"][n]).forced_by().split("; ")
                     if w})
    early = unresolved({r.config.name: r.summary["T_eps"] for n in dict.fromkeys(names) for r in m["relative"][n]})
    outcome = verdict(*p4a_rule(got, cens, early))
    return {"verdict": outcome, "unresolved": early, "forced_by": shapes.forced_by() or "; ".join(within),
            "distinct_settings": shapes.distinct, "settings": shapes.members, "max_ratio": max(got) if got else None,
            "censored": cens, "undecided_because": "" if outcome != "inconclusive" else
            (f"T_eps below 10 steps: {', '.join(early)}" if early else "a ratio in (1.25, 2] or a censored run")}


def p4a_rule(ratios: list[float], censored: int, early: list[str]) -> tuple[bool, bool]:
    """P4a's (supported, refuted) under one Delta reading, from its settings' max/min ratios over L of the rescaled
    time eta L^2 T_eps (inf: a censored run), its censored runs and its runs with T_eps below 10 steps: supported
    if some ratio exceeds 2, refuted if every ratio is <= 1.25 and none is censored; a time inside the first steps
    decides nothing."""
    if early:
        return False, False
    return bool(ratios) and max(ratios) > 2, bool(ratios) and max(ratios) <= 1.25 and censored == 0


def _p4(ctx: Context, m: dict, readings: list[ClaimResult], fig: str) -> ClaimResult:
    crit = ("P4 is the summary of its readings P4a (relative eps, forced), P4b (absolute eps), P4c (label noise) "
            "and P4d (fixed step size), each judged under the three Delta readings and combined. Supported if at "
            "least one reading that is not forced is supported (a change of behaviour along L whose location scales "
            "as 1/(Delta delta)); not supported if every reading that is not forced is not supported; otherwise "
            "inconclusive. A reading whose verdict its forced Delta readings fix counts as forced.")
    free = [r for r in readings if not r.forced]
    stat = {r.id: {"verdict": r.verdict, "forced": r.forced, "forced_by": r.forced_by,
                   "by_Delta_reading": {k: v["verdict"] for k, v in r.readings.items()}} for r in readings}
    stat["what_sets_L_x_over_Lstar"] = {  # the location is L* times a factor that the reading's own knob sets
        "P4b": "sqrt(eps / (l0 / (Delta delta)^2)): grows as sqrt(eps)",
        "P4c": "L_tau_coef x tau sqrt(K/N): grows as tau, falls about as 1/sqrt(N)",
        "P4d": "eta_max at Q = 0 (L_x / L_d), not Delta delta"}
    sup, ref = p4_rule([r.verdict for r in free])
    why = "" if sup != ref else "; ".join(f"{r.id}: {r.undecided_because}" for r in free if r.undecided_because)
    return claim("P4", crit, stat, sup, ref, settings=m["plan"].all_shapes, figures=[fig], size=size_name(ctx),
                 undecided_because=why or ("" if sup != ref else "no reading decided: see P4a-P4d"))


def p4_rule(free_verdicts: list[str]) -> tuple[bool, bool]:
    """P4's (supported, refuted) from the combined verdicts of its readings that are not forced: supported if one
    is supported, refuted if there is one and every one is not supported."""
    sup = any(v == "supported" for v in free_verdicts)
    return sup, bool(free_verdicts) and all(v == "not supported" for v in free_verdicts)


def _b3(ctx: Context, m: dict, readings: dict[str, ClaimResult], fig: str) -> ClaimResult:
    crit = ("The write-up's threshold sqrt(d/n), n = N context examples, against the located change of each reading "
            "that has one (P4b, P4c at tau = 1, P4d): r = L_x / sqrt(d/N) per setting, on each Delta reading's "
            "settings (d and N fixed, Delta moved: sqrt(d/n) does not move). Per Delta reading: supported if for "
            "some threshold reading the median r lies in [1/2, 2] and the CV of r across the Delta reading's "
            "distinct settings is <= 0.25 (L_x tracks sqrt(d/N)); not supported if for every threshold reading the "
            "median r lies outside [1/4, 4] or the CV of r exceeds 0.5. Combined by delta.combine: supported when "
            "every Delta reading supports, not supported when some Delta reading contradicts. The readings that are "
            "not forced are judged again on the threshold readings' refined L_x; a verdict that moves is "
            "inconclusive.")
    plan: DeltaPlan = m["plan"]
    lx = {cid: readings[cid].statistic.get("L_x_by_setting", {}) for cid in ("P4b", "P4c", "P4d")}
    by_delta = {reading: _b3_reading(plan, reading, lx) for reading in READINGS}
    sup, ref, forced_by = combined(by_delta)
    fine_lx = {cid: {**v, **readings[cid].refinement.get("statistic", {}).get("L_x_by_setting", {})}
               for cid, v in lx.items()}
    fine = {reading: _b3_reading(plan, reading, fine_lx) for reading in m["refined"]["readings"]}
    stat = {"by_Delta_reading": {r: {"verdict": v["verdict"], "forced_by": v["forced_by"]}
                                 for r, v in by_delta.items()},
            "by_reading": {cid: {r: v["by_reading"][cid] for r, v in by_delta.items()}
                           for cid in ("P4b", "P4c", "P4d")},
            "P4c_variations_r": {st.name: c.L / math.sqrt(st.cfg.features.d / st.cfg.prompt.N)
                                 for st, tau, c in m["variations"] if tau == TAU and c.L}}
    result = claim("B3", crit, stat, sup, ref, settings=plan.all_shapes, readings=by_delta, figures=[fig],
                   size=size_name(ctx), notes=B3_GRID_NOTE, undecided_because="" if sup != ref else (
                       undecided_readings(by_delta) or "no reading has both a median and a CV of r in or out of the "
                       "margins: more settings varying d and N"))
    mark_forced(result, forced_by)
    settle_readings(result, by_delta, fine, m["refined"]["approximation"],
                    {"by_Delta_reading": {r: v["verdict"] for r, v in fine.items()},
                     "by_reading": {r: v["by_reading"] for r, v in fine.items()}})
    return result


B3_GRID_NOTE = ("sqrt(d/n) does not move with Delta, so along a Delta reading where L_x ~ 1/Delta (rescale, tilt: "
                "forced) the CV of r measures how far Delta was moved: over the quick size's Delta (sqrt 2, 0.8, 0.45) "
                "it is 0.55 (beyond 0.5: not supported), over the full size's (sqrt 2, 1, 0.7, 0.45) 0.49 (between the "
                "margins: inconclusive). The two sizes differ there by their Delta grid, not by their data.")


def _b3_reading(plan: DeltaPlan, reading: str, lx: dict[str, dict]) -> dict:
    """B3 under one Delta reading: r = L_x / sqrt(d/N) over its distinct settings, per threshold reading (``lx``:
    threshold reading -> L_x by measured setting)."""
    names = list(dict.fromkeys(plan.measured_for[ds.name] for ds in plan.points[reading]))
    cfgs = {n: plan.members[n].cfg for n in names}
    per = {}
    for cid in ("P4b", "P4c", "P4d"):
        Lx = lx[cid]
        r = [Lx[n] / math.sqrt(cfgs[n].features.d / cfgs[n].prompt.N) for n in names if Lx.get(n)]
        per[cid] = {"median_r": float(np.median(r)) if r else None,
                    "cv_r": float(np.std(r, ddof=1) / np.mean(r)) if len(r) >= 2 else None, "n": len(r)}
    outcome = verdict(*b3_rule(per))
    shapes = plan.shapes[reading]
    return {"verdict": outcome, "forced_by": shapes.forced_by(), "distinct_settings": shapes.distinct,
            "by_reading": per, "undecided_because": "" if outcome != "inconclusive" else
            "a median or CV of r between the margins"}


def b3_rule(per: dict[str, dict]) -> tuple[bool, bool]:
    """B3's (supported, refuted) under one Delta reading, from each threshold reading's median and CV of
    r = L_x / sqrt(d/N) (``per``: threshold reading -> {"median_r", "cv_r"}; None: too few settings): supported if
    some reading has median r in [1/2, 2] and CV <= 0.25, refuted if every reading has median r outside [1/4, 4]
    or CV > 0.5."""
    ok = [v for v in per.values() if v["median_r"] is not None and v["cv_r"] is not None]
    sup = any(0.5 <= v["median_r"] <= 2 and v["cv_r"] <= 0.25 for v in ok)
    ref = bool(ok) and all(not (0.25 <= v["median_r"] <= 4) or v["cv_r"] > 0.5 for v in ok)
    return sup, ref


READINGS_CAPTION = (
    "The threshold's readings against L / L* (grey dotted: L = L*), one colour per distinct setting of the three "
    "Delta readings (legend: its name and Delta delta). "
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
    """The threshold readings under the three readings of Delta; P4's verdict summarises them."""
    m = measure_readings(ctx)
    fig = readings_figure(ctx, m, "threshold_readings")
    readings = {"P4a": _p4a(ctx, m, fig), **{r.id: r for r in located_readings(ctx, m, fig)}}
    p4 = _p4(ctx, m, list(readings.values()), fig)
    return [p4, *readings.values(), _b3(ctx, m, readings, fig)]


