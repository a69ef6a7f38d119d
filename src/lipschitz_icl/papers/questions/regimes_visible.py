"""R5: do the two regimes separate visibly? The threshold's readings (measured by li2025's threshold
experiment, once per output directory in a process) against L / L* on one page."""

from __future__ import annotations

from ...experiments.claims import ClaimResult, claim
from ...experiments.figures import captioned
from ...experiments.registry import experiment
from ...experiments.runner import Context, single_threaded
from ..li2025.threshold import FORCED_P4A, READINGS_CAPTION, located_readings, measure_readings, size_name
from ..li2025.threshold_fig import readings_figure

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
    crit = ("From the threshold readings (P4a-P4d, measured again here): supported if at least one reading that is "
            "not forced has a change whose location collapses against L / L* (CV of L_x / L* <= 0.25 over settings "
            "spanning >= 3x in Delta delta) and lies within [1/3, 3] L* (median); not supported if no reading that is "
            "not forced has a CV <= 0.5, or every one that has lies outside [1/10, 10] L*; otherwise inconclusive.")
    m = measure_readings(ctx)  # P4's measurements when exp_threshold ran first in this process
    fig = readings_figure(ctx, m, "regimes_visible")
    readings = located_readings(ctx, m, fig)
    per = {r.id: {"cv_Lx_over_Lstar": r.statistic.get("cv_Lx_dd"), "median_Lx_over_Lstar":
                  r.statistic.get("median_Lx_over_Lstar"), "dd_span": r.statistic.get("dd_span")} for r in readings}
    ok = [v for v in per.values() if v["cv_Lx_over_Lstar"] is not None and (v["dd_span"] or 0) >= 3]
    sup = any(v["cv_Lx_over_Lstar"] <= 0.25 and 1 / 3 <= v["median_Lx_over_Lstar"] <= 3 for v in ok)
    collapsing = [v for v in ok if v["cv_Lx_over_Lstar"] <= 0.5]
    ref = bool(ok) and (not collapsing or all(not (0.1 <= v["median_Lx_over_Lstar"] <= 10) for v in collapsing))
    stat = {"by_reading": per, "P4a_forced": FORCED_P4A}
    return [claim("R5", crit, stat, sup, ref, figures=[fig], size=size_name(ctx), runs=[],
                  undecided_because="" if sup != ref else "no reading both collapses and is located near L*, nor "
                  "fails to: more settings spanning Delta delta")]


