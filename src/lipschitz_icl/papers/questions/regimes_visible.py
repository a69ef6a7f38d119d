"""R5: do the two regimes separate visibly? The threshold's readings (measured by li2025's threshold
experiment, once per output directory in a process) against L / L* on one page."""

from __future__ import annotations

from ...experiments.claims import ClaimResult, claim, verdict
from ...experiments.controls import Controls, case, controls, controls_from
from ...experiments.delta import READINGS, combined
from ...experiments.figures import captioned
from ...experiments.registry import experiment
from ...experiments.runner import Context, single_threaded
from ..li2025.threshold import FORCED_P4A, READINGS_CAPTION
from ..li2025.threshold_delta import undecided_readings
from ..li2025.threshold_fig import readings_figure
from ..li2025.threshold_located import located_readings, mark_forced, measure_readings, settle_readings, size_name

STATEMENTS = {  # the claims this file tests, word for word as the report and docs/CLAIMS.md give them
    "R5": "The two regimes separate visibly (R5): plotted against L/L*, some reading of the threshold shows a change "
    "of behaviour at the same L/L*, of order 1, in every setting.",
}


CAPTIONS = {"regimes_visible": READINGS_CAPTION}  # figure stem -> what is plotted, what to look for


@experiment("R5", suites=("extensions",), statements=STATEMENTS)
@captioned(CAPTIONS)
@single_threaded
def exp_regimes_visible(ctx: Context) -> list[ClaimResult]:
    """R5: do the two regimes separate visibly? The readings' curves against L / L* on one page."""
    crit = ("From the threshold readings (P4b-P4d, measured again here; P4a is forced by eta L^2 and has no "
            "location), under each of the three Delta readings (rescale, tilt, pair; threshold_delta.py), on the "
            "reading's distinct settings: supported if at least one threshold reading has a change whose location "
            "collapses against L / L* (CV of L_x / L* <= 0.25 over settings spanning >= 3x in Delta delta) and lies "
            "within [1/3, 3] L* (median); not supported if no threshold reading has a CV <= 0.5, or every one that "
            "has lies outside [1/10, 10] L*; otherwise inconclusive. Combined by delta.combine: supported when every "
            "Delta reading supports, not supported when some Delta reading (forced or not) contradicts. The readings "
            "that are not forced are judged again on the threshold readings' refined L_x; a verdict that moves is "
            "inconclusive.")
    m = measure_readings(ctx)  # P4's measurements when exp_threshold ran first in this process
    fig = readings_figure(ctx, m, "regimes_visible")
    located = located_readings(ctx, m, fig)
    by_delta, sup, ref, forced_by = r5_rule({reading: {r.id: r.readings[reading] for r in located}
                                             for reading in READINGS})
    fine = {reading: _r5_reading(reading, {r.id: r.refinement["statistic"]["readings"][reading] for r in located})
            for reading in m["refined"]["readings"]}
    stat = {"by_Delta_reading": {r: {"verdict": v["verdict"], "forced_by": v["forced_by"]}
                                 for r, v in by_delta.items()},
            "by_reading": {r.id: {d: v["by_reading"][r.id] for d, v in by_delta.items()} for r in located},
            "P4a_forced": FORCED_P4A}
    result = claim("R5", crit, stat, sup, ref, settings=m["plan"].all_shapes, readings=by_delta, figures=[fig],
                   size=size_name(ctx), runs=[], undecided_because="" if sup != ref else (
                       undecided_readings(by_delta) or "no reading both collapses and is located near L*, nor fails "
                       "to: more settings spanning Delta delta"))
    mark_forced(result, forced_by)
    settle_readings(result, by_delta, fine, m["refined"]["approximation"],
                    {"by_reading": {r: v["by_reading"] for r, v in fine.items()}})
    return [result]


def r5_rule(located: dict[str, dict[str, dict]]) -> tuple[dict[str, dict], bool, bool, str]:
    """R5's rule: each Delta reading judged from the located changes of P4b-P4d on its settings (``located``: Delta
    reading -> threshold reading -> its outcome), combined by delta.combine. Returns (outcome per Delta reading,
    supported, refuted, the forced readings that fix the combined verdict)."""
    by_delta = {reading: _r5_reading(reading, per) for reading, per in located.items()}
    return (by_delta, *combined(by_delta))


def _r5_reading(reading: str, located: dict[str, dict]) -> dict:
    """R5 under one Delta reading, from the located changes of P4b-P4d on its settings (``located``: threshold
    reading -> its outcome under this Delta reading)."""
    per = {cid: {"cv_Lx_over_Lstar": v["cv_Lx_dd"], "median_Lx_over_Lstar": v["median_Lx_over_Lstar"],
                 "dd_span": v["Delta_delta_span"]} for cid, v in located.items()}
    ok = [v for v in per.values() if v["cv_Lx_over_Lstar"] is not None and (v["dd_span"] or 0) >= 3]
    sup = any(v["cv_Lx_over_Lstar"] <= 0.25 and 1 / 3 <= v["median_Lx_over_Lstar"] <= 3 for v in ok)
    collapsing = [v for v in ok if v["cv_Lx_over_Lstar"] <= 0.5]
    ref = bool(ok) and (not collapsing or all(not (0.1 <= v["median_Lx_over_Lstar"] <= 10) for v in collapsing))
    outcome = verdict(sup, ref)
    first = next(iter(located.values()))
    return {"verdict": outcome, "forced_by": first["forced_by"], "distinct_settings": first["distinct_settings"],
            "by_reading": per,
            "undecided_because": "" if outcome != "inconclusive" else
            "no threshold reading both collapses near L* nor fails to (or Delta delta spans < 3x)"}


def _located(cv: float, median: float, span: float = 4.0) -> dict:
    """A threshold reading's located change under one Delta reading: CV and median of L_x / L*, Delta delta span."""
    return {"cv_Lx_dd": cv, "median_Lx_over_Lstar": median, "Delta_delta_span": span, "forced_by": "",
            "distinct_settings": 4}


NO_COLLAPSE = {"P4b": _located(0.7, 0.5), "P4c": _located(0.8, 1.0), "P4d": _located(0.9, 2.0)}
COLLAPSE_AT_LSTAR = {"P4b": _located(0.7, 0.5), "P4c": _located(0.1, 1.2), "P4d": _located(0.9, 2.0)}
R5_CASES = {  # Delta reading -> threshold reading -> located change: name -> (readings, what they are)
    "null": ({d: NO_COLLAPSE for d in READINGS}, "under every Delta reading no threshold reading collapses against "
             "L / L* (CV of L_x / L* 0.7-0.9 over a 4x span of Delta delta)"),
    "null_far": ({d: {**NO_COLLAPSE, "P4c": _located(0.1, 30.0)} for d in READINGS}, "under every Delta reading "
                 "P4c collapses (CV 0.1) but at 30 L*, far from L*; the others do not collapse"),
    "null_pair": ({**{d: COLLAPSE_AT_LSTAR for d in ("rescale", "tilt")}, "pair": NO_COLLAPSE}, "rescale and tilt "
                  "collapse at 1.2 L* (CV 0.1), the pair reading, where the geometry changes, collapses nowhere"),
    "planted": ({d: COLLAPSE_AT_LSTAR for d in READINGS}, "under every Delta reading P4c collapses (CV 0.1 over a "
                "4x span) at a median 1.2 L*"),
}


@controls("R5")
def r5_controls() -> Controls:
    """R5's rule on synthetic located changes of P4b-P4d under the three Delta readings."""
    def read(located: dict[str, dict[str, dict]], how: str):
        by_delta, sup, ref, _ = r5_rule(located)
        return case(sup, ref, {"by_Delta_reading": {d: v["verdict"] for d, v in by_delta.items()}}, how)

    return controls_from(R5_CASES, read)
