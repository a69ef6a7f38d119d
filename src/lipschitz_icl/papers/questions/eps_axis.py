"""T_eps against relative eps over four decades, from one run's exact crossing steps."""

from __future__ import annotations

import numpy as np

from ... import plots
from ...api import Run
from ...experiments.claims import ClaimResult, claim
from ...experiments.controls import Controls, case, controls, controls_from
from ...experiments.evidence import (
    LOCAL_SLOPE_BAND,
    REFINE_DRAWS,
    power_law,
    refined_conditions,
    refined_context,
    run_settings,
)
from ...experiments.figures import captioned
from ...experiments.registry import experiment
from ...experiments.runner import (
    Context,
    paper_base,
    rel_runs,
    run_group,
    single_threaded,
    with_budget,
)
from ...stopping import rel_key, rel_level

STATEMENTS = {  # the claims this file tests, word for word as the report and docs/CLAIMS.md give them
    "R4": "Convergence is logarithmic in the accuracy asked (R4): the steps to bring the loss to a fraction eps of "
    "its initial value grow like log(1/eps), as the flat-regime time K log(K/eps) / (eta delta^2 L^2 Delta^2) says, "
    "not like a power of 1/eps.",
}


CAPTIONS = {  # figure stem -> what is plotted, what to look for, what would contradict the claim
    "eps_axis": (
        "One long run: the rescaled time s = eta L^2 T_eps to reach each relative eps, against 1/eps (shaded: the "
        "range fitted); black: a power law, red dashed: a + b log(1/eps). Left log-log; right log x, where a straight "
        "line is logarithmic growth. Look for the points on the red dashed line and a small fitted exponent. Points "
        "on the black power law with a clearly positive exponent (curving upward on the right panel) contradict R4."),
}


EPS_RANGE = (1e-4, 1e-3)  # relative eps over which eps_exponent is measured


LOG_MAX, POLY_MIN = 0.25, 0.5  # eps_exponent margins: logarithmic at most LOG_MAX, polynomial at least POLY_MIN


MIN_LEVELS = 5  # levels of the T_rel grid inside EPS_RANGE needed for a verdict


R4_ETA = 4.0  # eta L^2 = 16 at L = 2: the same trajectory in s as eta = 1 (the quickstart table of runner)


CRITERION_R4 = (
    f"One quickstart run (K = 5 orthonormal, linear, L = 2, eta = {R4_ETA:g}: eta L^2 = 16, the same trajectory "
    "in s = eta L^2 t as eta = 1) trained to a relative loss of 1e-4 with a budget in rescaled time; T_eps is "
    "the trainer's exact first step at each relative eps r = 10^(-j/8). eps_exponent = least-squares slope of "
    f"log T_eps against log(1/eps) over eps in [{EPS_RANGE[0]:g}, {EPS_RANGE[1]:g}]. Two models are also fitted "
    "there by least squares on T: power law log T = a + b log(1/eps), and logarithmic T = a + b log(1/eps) "
    "(whose local log-log slope is b / (a + b log(1/eps)), about 1/log(1/eps) ~ 0.1 when a is small); their RMS "
    f"residuals relative to T are compared. The curve is deterministic (one run): eps_exponent is its exact slope, "
    f"given with the range of its local slopes between successive levels, never a residual interval; a power law "
    f"is read only if every local slope lies within {LOCAL_SLOPE_BAND:g} of eps_exponent (evidence.power_law). "
    f"Supported (logarithmic) if eps_exponent <= {LOG_MAX} and the logarithmic model fits no worse; not supported "
    f"(polynomial) if eps_exponent >= {POLY_MIN}, the local slopes pass that test and the power law fits better. "
    f"Inconclusive otherwise, or with fewer than {MIN_LEVELS} levels reached in the range (censored). The verdict "
    f"stands only if the same run at {REFINE_DRAWS}x the count draws gives the same one.")


@experiment("R4", suites=("extensions",), statements=STATEMENTS)
@captioned(CAPTIONS)
@single_threaded
def exp_eps_axis(ctx: Context) -> list[ClaimResult]:
    """T_eps against relative eps over four decades, from one run's exact crossing steps."""
    run, stat, decides, undecided = _measure(ctx)
    fine_ctx, what = refined_context(ctx)
    _, fine, fine_decides, _ = _measure(fine_ctx)
    sup, ref, refined, moved = refined_conditions(decides, fine_decides, what, {
        k: fine.get(k) for k in ("eps_exponent", "local_slope_range", "is_power_law")})
    notes = ("A finding against P5: T_eps grows as a power of 1/eps, not as log(1/eps)."
             if ref else "")
    decided = stat["levels_in_range"] >= MIN_LEVELS
    return [claim("R4", CRITERION_R4, stat, sup, ref, figures=[_eps_figure(ctx, run, stat)], runs=rel_runs(ctx, [run]),
                  censored=0 if decided else 1, refinement=refined, settings=run_settings([run], by="run"),
                  undecided_because=moved or undecided, notes=notes)]


def _measure(ctx: Context) -> tuple[Run, dict, tuple[bool, bool], str]:
    """R4's run at ``ctx``'s approximation: (run, statistic, (supported, refuted), what would decide it)."""
    cfg = paper_base(ctx, f"train.lr={R4_ETA:g}", "train.log_every=1000", "name=quickstart-long")
    cfg = with_budget(cfg, EPS_RANGE[0], cap=4 * ctx.sizes.budget)
    run = run_group(ctx, "eps-axis", [cfg], "R4 eps axis")[0]
    stat, _ = eps_axis_statistic(run)
    n = stat["levels_in_range"]
    decided = n >= MIN_LEVELS
    sup, ref = r4_rule(stat)
    undecided = ""
    if not decided:
        undecided = (f"only {n} of the T_rel levels in [{EPS_RANGE[0]:g}, {EPS_RANGE[1]:g}] were reached within "
                     f"{cfg.train.steps} steps; a budget reaching a relative loss of {EPS_RANGE[0]:g} decides it")
    elif not (sup or ref):
        undecided = ("eps_exponent lies between the margins, the local slopes are no power law, or the residuals "
                     "favour the other model; a wider eps range (a longer run) decides it")
    return run, stat, (sup, ref), undecided


def eps_axis_statistic(run: Run) -> tuple[dict, dict[str, list[float]]]:
    """eps_exponent over EPS_RANGE from the run's T_rel (the exact slope of one deterministic curve, with its local
    slopes and whether they make a power law), both models' fits and their residuals; no interval (the second
    item is empty: a fit residual of one curve covers no randomness)."""
    eta_L2 = run.config.train.lr * run.config.task.L ** 2
    levels = {float(k): int(t) for k, t in (run.summary.get("T_rel") or {}).items() if t}
    return eps_levels_statistic(levels, eta_L2, run.summary["status"], run.summary["steps"]), {}


def r4_rule(stat: dict) -> tuple[bool, bool]:
    """R4's (supported, refuted) from ``eps_levels_statistic``: with at least MIN_LEVELS levels in EPS_RANGE,
    supported if eps_exponent <= LOG_MAX and the logarithmic model fits no worse; refuted if eps_exponent >=
    POLY_MIN, its local slopes pass the power-law test and the power law fits better."""
    decided = stat["levels_in_range"] >= MIN_LEVELS
    log_better = decided and stat["rms_log_model"] <= stat["rms_power_law"]
    sup = decided and stat["eps_exponent"] <= LOG_MAX and log_better
    ref = decided and stat["eps_exponent"] >= POLY_MIN and stat["is_power_law"] and not log_better
    return sup, ref


def eps_levels_statistic(levels: dict[float, int], eta_L2: float, status: str, steps: int) -> dict:
    """``eps_axis_statistic`` from the first step at each relative level (``levels``: eps -> step) of a run with
    that eta L^2, status and steps."""
    inside = sorted((e, t) for e, t in levels.items() if EPS_RANGE[0] * 0.999 <= e <= EPS_RANGE[1] * 1.001)
    stat: dict = {"eta_L2": eta_L2, "levels_in_range": len(inside), "eps_exponent": None, "is_power_law": False,
                  "local_slopes": [], "local_slope_range": None,
                  "rms_power_law": None, "rms_log_model": None, "log_model_local_slope": None,
                  "s_eps": {f"{e:.3g}": t * eta_L2 for e, t in sorted(levels.items(), reverse=True)},
                  "status": status, "steps": steps}
    if len(inside) < 3:
        return stat
    x = np.log([1 / e for e, _ in inside])  # log(1/eps)
    T = np.array([t for _, t in inside], dtype=float)
    A = np.column_stack([np.ones_like(x), x])
    (a_p, b_p), *_ = np.linalg.lstsq(A, np.log(T), rcond=None)
    (a_l, b_l), *_ = np.linalg.lstsq(A, T, rcond=None)
    rel_p = (T - np.exp(A @ [a_p, b_p])) / T  # both models' residuals relative to T
    rel_l = (T - A @ [a_l, b_l]) / T
    law = power_law([1 / e for e, _ in inside], list(T))  # the exact slope and its local slopes (one curve)
    mid = float(x.mean())
    stat.update(eps_exponent=float(b_p), local_slopes=law.local_slopes,
                local_slope_range=[min(law.local_slopes), max(law.local_slopes)], is_power_law=law.is_power_law,
                power_law_test=law.reason, power_law={"a": float(a_p), "b": float(b_p)},
                log_model={"a": float(a_l), "b": float(b_l)}, rms_power_law=float(np.sqrt(np.mean(rel_p**2))),
                rms_log_model=float(np.sqrt(np.mean(rel_l**2))),
                log_model_local_slope=float(b_l / (a_l + b_l * mid)) if a_l + b_l * mid > 0 else None)
    return stat


def _levels(time_of_eps) -> dict[float, int]:
    """The trainer's levels 10^(-j/8), j = 1..32, as the summary writes them, each with its first step."""
    return {float(rel_key(rel_level(j))): int(round(time_of_eps(rel_level(j)))) for j in range(1, 33)}


R4_CASES = {  # first step at each relative eps: name -> (levels, what they are)
    "null": (_levels(lambda e: 2.0 / e), "a loss creeping as 1/t after its fast phase: T_eps = 2 / eps, a power "
             "of 1/eps with exponent 1"),
    "null_sqrt": (_levels(lambda e: 20.0 / e**0.6), "T_eps = 20 / eps^0.6: a power of 1/eps with exponent 0.6"),
    "planted": (_levels(lambda e: 100.0 * np.log(1 / e)), "a loss falling exponentially, exp(-t / 100): T_eps = "
                "100 log(1/eps), logarithmic"),
}


@controls("R4")
def r4_controls() -> Controls:
    """R4's rule on synthetic times to each relative eps of one run (eta L^2 = 16)."""
    def read(levels: dict[float, int], how: str):
        stat = eps_levels_statistic(levels, 16.0, "converged", max(levels.values()))
        return case(*r4_rule(stat), {k: stat[k] for k in ("levels_in_range", "eps_exponent", "is_power_law",
                                                          "rms_power_law", "rms_log_model")}, how)

    return controls_from(R4_CASES, read)


def _eps_figure(ctx: Context, run: Run, stat: dict) -> str:
    fig, axes = plots.figure(2, 1)
    s_eps = {float(k): v for k, v in stat["s_eps"].items()}
    inv = np.array([1 / e for e in s_eps])
    s = np.array(list(s_eps.values()))
    for ax, log_x in ((axes[0][0], True), (axes[0][1], False)):
        ax.plot(inv, s, "o", ms=3, label="s = eta L^2 T_eps (trainer's exact step)")
        if stat["eps_exponent"] is not None:
            xx = np.geomspace(1 / EPS_RANGE[1], 1 / EPS_RANGE[0], 20)
            p, lm = stat["power_law"], stat["log_model"]
            ax.plot(xx, stat["eta_L2"] * np.exp(p["a"]) * xx ** p["b"], "-", color="k",
                    label=f"power law: exponent {p['b']:.2f}")
            ax.plot(xx, stat["eta_L2"] * (lm["a"] + lm["b"] * np.log(xx)), "--", color="tab:red",
                    label="a + b log(1/eps)")
        ax.set(xscale="log", yscale="log" if log_x else "linear", xlabel="1 / eps (relative)",
               ylabel="rescaled time s", title="log-log" if log_x else "log x (a straight line: logarithmic)")
        ax.axvspan(1 / EPS_RANGE[1], 1 / EPS_RANGE[0], color="grey", alpha=0.1)
    axes[0][0].legend(fontsize=6)
    return plots.save(fig, ctx.out, "eps_axis")


