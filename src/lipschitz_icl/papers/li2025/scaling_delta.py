"""P5's Delta axis under the one Delta protocol (experiments/delta.py): T_eps against Delta in the flat
regime (L = L*/2 of the quickstart setting, fixed eta), Delta moved by each reading (rescale, tilt, pair).

Each reading's curve is deterministic (one run per Delta; copies step for step are trained once): it gets its
exact log-log slope and local slopes (``evidence.power_law``), never an interval made of its own residuals.
The rescale and tilt readings are one shape (T ~ Delta^-6 by the c^6 of the gradient step: forced); at a
fixed eta they reach only Delta = 1 within the budgets (Delta = 0.5 would need 512x the base's steps)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...api import Run
from ...config import Config
from ...experiments.delta import READINGS, SQRT2, combined, delta_settings, distinct_runs, power_law_reading
from ...experiments.evidence import Settings, refined_context, refinement, settings_of, unresolved
from ...experiments.measure import L_star_of
from ...experiments.runner import Context, paper_base, run_group, with_budget, with_overrides

P5_DELTAS = {"rescale": (SQRT2, 1.2, 1.0), "tilt": (SQRT2, 1.2, 1.0), "pair": (SQRT2, 1.0, 0.7, 0.5)}
DELTA_SLOPE, DELTA_MARGIN = -2.0, 0.3  # P5: T_eps ~ Delta^-2, the exact slope within 0.3 of it

DELTA_RULE_P5 = (
    "The Delta axis under the one Delta protocol (rescale: features.scale; tilt: unit features tilted towards "
    "their common direction; pair: v_1 rotated towards v_0), at L = L*/2 of the quickstart setting and a fixed "
    f"eta; Delta in {'; '.join(r + ' ' + ', '.join(f'{d:.3g}' for d in ds) for r, ds in P5_DELTAS.items())} "
    "(rescale and tilt stop at 1: T ~ Delta^-6 there). Each reading is a deterministic curve: its exact log-log "
    "slope of T_eps against Delta and its local slopes. A reading supports the Delta slope when the local slopes "
    f"lie within 0.3 of the slope (a power law) and the slope within {DELTA_MARGIN:g} of {DELTA_SLOPE:g}; it "
    "contradicts it when the relation is no power law or its slope lies further; a censored run, a time below "
    "10 steps or fewer than 3 Delta leave it inconclusive. A reading whose settings are one shape is forced. "
    "The readings combine by delta.combine (supported when every reading supports, not supported when some "
    "reading, forced or not, contradicts); the readings that are not forced are run again at the finer "
    "approximation (4x the count draws, or exact counts), and a reading whose verdict moves is inconclusive.")


@dataclass
class DeltaReadings:
    """P5's Delta axis under the three readings: outcomes, runs, settings grouped by shape."""

    readings: dict[str, dict]
    runs: list[Run]
    settings: Settings  # every point by shape (the distinct settings)
    censored: list[str]
    refined: dict = field(default_factory=dict)  # the refinement of the readings that are not forced


def flat_delta_base(ctx: Context) -> Config:
    """The quickstart setting in the flat regime (L = L*/2), relative eps of the size."""
    cfg = paper_base(ctx, "train.eps_mode=relative", f"train.eps={ctx.sizes.eps_rel}")
    return with_overrides(cfg, [f"task.L={0.5 * L_star_of(cfg):.6g}"])


def _measure(ctx: Context, cap: int, margin: float, readings: tuple[str, ...], group: str
             ) -> tuple[dict, dict[str, dict], list[Run], Settings]:
    """Train each distinct run of the readings' Delta points once; per point its T_eps and Delta."""
    base = flat_delta_base(ctx)
    points = {r: delta_settings(ctx, r, base.features.K, list(P5_DELTAS[r])) for r in readings}
    named = [(ds.name, with_budget(with_overrides(base, [*ds.overrides, f"name=Delta-{ds.name}"]),
                                   ctx.sizes.eps_rel, cap=cap, margin=margin)) for r in readings for ds in points[r]]
    cfgs = dict(named)
    measured_for = distinct_runs(settings_of(named, by="run"))
    reps = list(dict.fromkeys(measured_for.values()))
    runs = dict(zip(reps, run_group(ctx, group, [cfgs[n] for n in reps], "(c) T against Delta (three readings)"),
                    strict=True))
    data = {ds.name: {"T_eps": runs[measured_for[ds.name]].summary["T_eps"], "Delta": ds.Delta,
                      "measured_as": measured_for[ds.name]} for r in readings for ds in points[r]}
    by_reading = {r: [ds.name for ds in points[r]] for r in readings}
    shapes = {r: settings_of([(n, cfgs[n]) for n in by_reading[r]]) for r in readings}
    outcomes = {r: _reading(by_reading[r], data, shapes[r]) for r in readings}
    return data, outcomes, list(runs.values()), settings_of(named)


def delta_slope_rule(names: list[str], Delta: list[float], T_eps: list[float | None]) -> dict:
    """One Delta reading's outcome for P5's Delta slope (``delta.power_law_reading`` of T_eps against Delta,
    predicted DELTA_SLOPE within DELTA_MARGIN; a censored run or a time below 10 steps leaves it inconclusive): its
    "verdict" and the numbers behind it."""
    early = unresolved(dict(zip(names, T_eps, strict=True)))
    res = power_law_reading(Delta, T_eps, DELTA_SLOPE, DELTA_MARGIN, censored=sum(t is None for t in T_eps))
    if early and res["verdict"] != "inconclusive":
        res = {**res, "verdict": "inconclusive", "undecided_because": f"T_eps below 10 steps: {', '.join(early)}"}
    return res


def _reading(names: list[str], data: dict, shapes: Settings) -> dict:
    res = delta_slope_rule(names, [data[n]["Delta"] for n in names], [data[n]["T_eps"] for n in names])
    return {"verdict": res["verdict"], "forced_by": shapes.forced_by(), "distinct_settings": shapes.distinct,
            "settings": len(names), "slope": res["slope"], "local_slopes": res["local_slopes"],
            "local_slope_range": res["local_slope_range"], "is_power_law": res["is_power_law"],
            "T_eps": {n: data[n]["T_eps"] for n in names}, "Delta": {n: data[n]["Delta"] for n in names},
            "measured_as": {n: data[n]["measured_as"] for n in names if data[n]["measured_as"] != n},
            "undecided_because": res["undecided_because"], "reason": res["reason"]}


def delta_readings(ctx: Context, cap: int, margin: float) -> DeltaReadings:
    """P5's Delta axis under every reading, and the readings that are not forced again at the finer
    approximation (a reading whose verdict moves there is inconclusive)."""
    data, outcomes, runs, shapes = _measure(ctx, cap, margin, READINGS, "scaling-Delta")
    censored = [n for n, d in data.items() if d["T_eps"] is None]
    free = tuple(r for r, o in outcomes.items() if not o["forced_by"])
    if not free:
        return DeltaReadings(outcomes, runs, shapes, censored)
    N, K = flat_delta_base(ctx).prompt.N, flat_delta_base(ctx).features.K
    fine_ctx, what = refined_context(ctx, (N, K))
    _, fine, fine_runs, _ = _measure(fine_ctx, cap, margin, free, "scaling-Delta")
    refined = {}
    for r in free:
        refined[r] = refinement(outcomes[r]["verdict"], fine[r]["verdict"], what,
                                {k: fine[r][k] for k in ("slope", "local_slopes", "T_eps")})
        outcomes[r]["refinement"] = refined[r]
        if not refined[r]["agrees"]:
            outcomes[r]["verdict"] = "inconclusive"
            outcomes[r]["undecided_because"] = f"the verdict moved under refinement ({what})"
    return DeltaReadings(outcomes, runs + fine_runs, shapes, censored, refined)


def delta_check(dr: DeltaReadings) -> tuple[bool, bool, str]:
    """(agrees, disagrees, forced_by) of P5's Delta axis: the readings combined by delta.combine."""
    return combined(dr.readings)
