"""P5's delta axis: T_1 eta L^2 delta^2 Delta^2 across task classes (predicted equal), at the quickstart
geometry (Delta = sqrt 2) and at Delta = DELTA_AXIS_POINT under each reading of the one Delta protocol
(experiments/delta.py). On symmetric features (orthonormal, rescaled, uniformly tilted) every rotation-
invariant class is one shape (Sigma modulo u1^T + 1u^T), so those readings are forced; the pair reading
breaks the symmetry and the classes become distinct settings."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...api import Run
from ...experiments.claims import verdict
from ...experiments.delta import READINGS, SQRT2, combined, delta_settings, distinct_runs
from ...experiments.evidence import run_settings, settings_of
from ...experiments.measure import L_star_of
from ...experiments.runner import (
    BUDGET_MARGIN,
    Context,
    censored_runs,
    paper_base,
    run_group,
    with_budget,
    with_overrides,
)

DELTA_CLASSES = ("linear", "relu_net", "rbf", "sinusoid", "norm")


DELTA_CV_AGREES, DELTA_CV_DISAGREES = 0.25, 0.5  # P5's delta axis: one value across classes


DELTA_EPS = 0.1  # the delta-axis runs stop at this relative loss, well past T_1 (s ~ 400 against ~ 170)
DELTA_AXIS_POINT = 1.0  # the Delta at which each reading measures the delta axis besides the base (sqrt 2)


@dataclass
class DeltaAxis:
    """T_1 eta L^2 delta^2 Delta^2 per class at the base geometry, its coefficient of variation, censored runs,
    the runs, and the same under each Delta reading (``readings``: outcome per reading)."""
    values: dict[str, float | None]
    cv: float | None
    censored: list[str]
    runs: list[Run]
    readings: dict[str, dict] = field(default_factory=dict)


def _value(r: Run) -> float | None:
    sm = r.summary
    return None if sm["T_1"] is None else sm["T_1"] * r.config.train.lr * sm["L"] ** 2 * sm["delta"] ** 2 * \
        sm["Delta"] ** 2


def _cv(values: list[float | None]) -> float | None:
    got = np.array([v for v in values if v is not None])
    return float(got.std(ddof=1) / got.mean()) if got.size >= 2 else None


def _class_config(base, cls: str, extra: tuple[str, ...], name: str, cap: int, margin: float = BUDGET_MARGIN):
    c = with_overrides(base, [*extra, f"task.kind={cls}", "task.L=1"])
    c = with_overrides(c, [f"task.L={0.5 * L_star_of(c):.6g}", f"name={name}"])
    return with_budget(c, DELTA_EPS, cap=cap, margin=margin)


def delta_axis(ctx: Context) -> DeltaAxis:
    """Every class of DELTA_CLASSES at L = L*/2 of its class, budget in T_f: at the quickstart geometry, and at
    Delta = DELTA_AXIS_POINT under each Delta reading (copies step for step trained once)."""
    S = ctx.sizes
    base = paper_base(ctx, f"task.kernel_samples={S.kernel_samples}")
    configs = [_class_config(base, cls, (), f"delta-{cls}", 4 * S.budget) for cls in DELTA_CLASSES]
    runs = run_group(ctx, "delta-axis", configs, "(c) T_1 across classes (delta axis)")
    values = {r.config.task.kind: _value(r) for r in runs}
    points = {rd: delta_settings(ctx, rd, base.features.K, [DELTA_AXIS_POINT])[0] for rd in READINGS}
    # budgets in T_f assume T ~ Delta^-2; a rescaling makes it Delta^-6, so the moved point gets (sqrt 2 / Delta)^4
    # times the margin (a run stops at DELTA_EPS: a larger budget costs a run only the steps it needs)
    margin = BUDGET_MARGIN * (SQRT2 / DELTA_AXIS_POINT) ** 4
    named = [(f"{p.name}-{cls}", _class_config(base, cls, p.overrides, f"delta-{p.name}-{cls}", 4 * S.budget,
                                               margin)) for p in points.values() for cls in DELTA_CLASSES]
    measured_for = distinct_runs(settings_of(named, by="run"))
    reps = list(dict.fromkeys(measured_for.values()))
    cfgs = dict(named)
    moved = dict(zip(reps, run_group(ctx, "delta-axis-Delta", [cfgs[n] for n in reps],
                                     "(c) T_1 across classes at a moved Delta"), strict=True))
    readings = {}
    for rd, p in points.items():
        names = [f"{p.name}-{cls}" for cls in DELTA_CLASSES]
        at_point = [moved[measured_for[n]] for n in names]
        readings[rd] = _reading(runs, at_point, values, names, measured_for)
    return DeltaAxis(values, _cv(list(values.values())), censored_runs(runs, "T_1"), runs + list(moved.values()),
                     readings)


def _reading(base_runs: list[Run], at_point: list[Run], base_values: dict, names: list[str],
             measured_for: dict[str, str]) -> dict:
    """The delta axis under one Delta reading: the CV across classes at the base and at its moved Delta; agrees
    when both are <= DELTA_CV_AGREES, disagrees when one exceeds DELTA_CV_DISAGREES, inconclusive when a run is
    censored. Forced when every run it reads is one shape."""
    point_values = {r.config.task.kind: _value(r) for r in at_point}
    cvs = [_cv(list(base_values.values())), _cv(list(point_values.values()))]
    cens = censored_runs(base_runs, "T_1") + censored_runs(at_point, "T_1")
    outcome = verdict(*delta_cv_rule(cvs, cens))
    shapes = run_settings(base_runs + at_point)
    return {"verdict": outcome, "forced_by": shapes.forced_by(), "distinct_settings": shapes.distinct,
            "cv_base": cvs[0], "cv_moved": cvs[1], "Delta_moved": DELTA_AXIS_POINT, "values_moved": point_values,
            "censored": cens, "measured_as": {n: measured_for[n] for n in names if measured_for[n] != n},
            "undecided_because": "" if outcome != "inconclusive" else
            ("censored runs: " + ", ".join(cens) if cens else "a CV between the margins")}


def delta_cv_rule(cvs: list[float | None], censored: list[str]) -> tuple[bool, bool]:
    """The delta axis's (agrees, disagrees) under one Delta reading, from the CVs across classes of
    T_1 eta L^2 delta^2 Delta^2 at the base and at the moved Delta: agrees when both are <= DELTA_CV_AGREES,
    disagrees when one exceeds DELTA_CV_DISAGREES; a censored run or a missing CV decides nothing."""
    ok = not censored and None not in cvs
    return ok and all(c <= DELTA_CV_AGREES for c in cvs), ok and any(c > DELTA_CV_DISAGREES for c in cvs)


def delta_axis_check(axis: DeltaAxis) -> tuple[bool, bool, str]:
    """(agrees, disagrees, forced_by) of the delta axis: its Delta readings combined by delta.combine."""
    return combined(axis.readings)
