"""B2: error on unseen functions against the number n = N of in-context examples, below and above L*."""

from __future__ import annotations

import math

from ... import plots
from ...experiments.claims import ClaimResult, claim
from ...experiments.controls import Controls, case, controls, controls_from
from ...experiments.evidence import run_settings
from ...experiments.figures import captioned
from ...experiments.measure import L_star_of, fit_dict, safe_fit
from ...experiments.registry import experiment
from ...experiments.runner import Context, paper_base, rel_runs, run_group, single_threaded, with_overrides
from ...optimum import ScoreObjective, population_optimum
from ...problem import build_problem

STATEMENTS = {  # the claims this file tests, word for word as the report and docs/CLAIMS.md give them
    "B2": "Above the threshold, error <= eps + O(d/n); below it, eps + O(L^2 d / n) (n: examples).",
}


CAPTIONS = {  # figure stem -> what is plotted, what to look for, what would contradict the claim
    "blog_B2_finite_sample": (
        "Error on unseen functions (exact) against n = N in-context examples, log-log, for L = L*/2 and 2 L* with "
        "label noise; only runs that reached the population optimum are drawn (the others are censored). Look for "
        "both lines falling with slope about -1 (eps + O(d / n)) and the sharp-regime line within 4x of the flat one "
        "at the largest n. A slope outside [-2, -0.25], or a ratio of 16 or more, contradicts B2."),
}


B2_TAU = 1.0  # label noise of B2's prompts


@experiment("B2", suites=("blog",), statements=STATEMENTS)
@captioned(CAPTIONS)
@single_threaded
def exp_sample_size_bound(ctx: Context) -> list[ClaimResult]:
    """B2: error on unseen functions against the number n = N of in-context examples, below and above L*."""
    crit = (f"Kernel engine (exact over features, count draws and functions), label noise tau = {B2_TAU:g}, n = N "
            "in-context examples over the size's list, GD for the step budget; error = the trained model's exact "
            "unseen-function error. For L = L*/2 and 2 L*: slope of log error against log n (claimed about -1) and, "
            "at the largest n, the ratio error(2L*)/error(L*/2) (the claim's bounds give L^2 d/n below and d/n above, "
            "i.e. a ratio <= (L_sharp/L_flat)^2 = 16). Supported if both n-slopes lie in [-1.5, -0.5] and the ratio is "
            "< 4 (error independent of L above the threshold); not supported if a slope lies outside [-2, -0.25] or "
            "the ratio is >= 16. Runs whose loss is still above 1.01 x the population optimum's (optimum.py) at the "
            "budget are censored; fewer than 3 uncensored n per L: inconclusive.")
    S = ctx.sizes
    cfg = paper_base(ctx, f"task.label_noise={B2_TAU:g}", "train.eps=1e-12", f"train.log_every={S.budget // 20}",
                     f"train.steps={2 * S.budget}",
                     "eval.functions=8192")
    L_star = L_star_of(cfg)
    configs = [with_overrides(cfg, [f"task.L={f * L_star:.6g}", f"prompt.N={n}", f"name={f:g}Lstar-n{n}"])
               for f in (0.5, 2.0) for n in S.finite_M]
    runs = run_group(ctx, "finite-sample", configs, "B2 in-context examples")
    err, optimum, censored = {}, {}, 0
    fig, axes = plots.figure(1, 1)
    for f, c in ((0.5, "tab:blue"), (2.0, "tab:red")):
        sel = [r for r in runs if r.config.name.startswith(f"{f:g}Lstar-")]
        ns = [r.config.prompt.N for r in sel]
        opt = [population_optimum(ScoreObjective(build_problem(r.config)), r.config.task.L, B2_TAU) for r in sel]
        done = [r.summary["final_loss"] <= 1.01 * o.loss for r, o in zip(sel, opt, strict=True)]
        censored += done.count(False)
        e = [r.summary.get("final_test_error") if ok else None for r, ok in zip(sel, done, strict=True)]
        err[f], optimum[f] = dict(zip(ns, e, strict=True)), dict(zip(ns, [o.loss for o in opt], strict=True))
        pts = [(n, v) for n, v in zip(ns, e, strict=True) if v is not None]
        if pts:
            axes[0][0].loglog(*zip(*pts, strict=True), "o-", color=c, label=f"L = {f:g} L*")
    axes[0][0].set(xlabel="n = N (in-context examples)", ylabel="unseen-function error (exact)", title="B2")
    axes[0][0].legend(fontsize=7)
    fig_path = plots.save(fig, ctx.out, "blog_B2_finite_sample")
    fits, slopes, ratio, enough = b2_reading(err, max(S.finite_M))
    sup, ref = b2_rule(slopes, ratio, enough)
    stat = {**fit_dict(fits[0.5], "flat_n"), **fit_dict(fits[2.0], "sharp_n"), "error_ratio_sharp_over_flat": ratio,
            "tau": B2_TAU, "error": {f"{f:g}Lstar": v for f, v in err.items()},
            "optimum_loss": {f"{f:g}Lstar": v for f, v in optimum.items()}}
    why = "" if sup != ref else ("fewer than 3 uncensored n per L (a larger budget or more n)" if not enough else
                                 "the slopes and the ratio meet neither margin: more n")
    return [claim("B2", crit, stat, sup, ref, figures=[fig_path], runs=rel_runs(ctx, runs), censored=censored,
                  settings=run_settings(runs, by="loss"), undecided_because=why)]


def b2_reading(err: dict[float, dict[int, float | None]], n_max: int) -> tuple[dict, list[float], float, bool]:
    """B2's statistic from the uncensored errors {L / L*: {n: error or None}} of L*/2 (0.5) and 2 L* (2.0):
    (the log-log fits against n, their slopes, error(2 L*) / error(L*/2) at ``n_max``, whether it can decide)."""
    fits = {f: safe_fit(list(err[f]), list(err[f].values())) for f in (0.5, 2.0)}
    ratio = (err[2.0][n_max] / err[0.5][n_max] if err[2.0][n_max] and err[0.5][n_max] else math.nan)
    enough = all(fits[f] is not None and fits[f].n >= 3 for f in (0.5, 2.0)) and math.isfinite(ratio)
    slopes = [fits[f].slope if fits[f] is not None else math.nan for f in (0.5, 2.0)]
    return fits, slopes, ratio, enough


def b2_rule(slopes: list[float], ratio: float, enough: bool) -> tuple[bool, bool]:
    """B2's (supported, refuted): both n-slopes in [-1.5, -0.5] and the ratio < 4; a slope outside [-2, -0.25]
    or the ratio >= 16 (only with >= 3 uncensored n per L and a ratio)."""
    sup = enough and all(-1.5 <= s <= -0.5 for s in slopes) and ratio < 4
    ref = enough and (any(not (-2 <= s <= -0.25) for s in slopes) or ratio >= 16)
    return sup, ref


B2_NS = (16, 32, 64, 128, 256, 1024)  # the full size's n of the controls' curves
B2_CASES = {  # error against n: name -> ({L / L*: error of n}, what it is)
    "null": ({0.5: lambda n: 0.05, 2.0: lambda n: 0.08}, "errors that do not fall with n (a floor at 0.05 and "
             "0.08): the in-context examples do not help"),
    "null_rival_rate": ({0.5: lambda n: 0.4 / n**0.55, 2.0: lambda n: 0.8 / n**0.55}, "errors falling as "
                        "n^-0.55, next to the rival rate sqrt(d/n) and far above O(d/n) at large n"),
    "null_L2": ({0.5: lambda n: 2 / n, 2.0: lambda n: 32 / n}, "errors 2/n and 32/n: the sharp regime's 16x = "
                "(L_sharp / L_flat)^2 larger, the L^2 d/n the claim puts below the threshold only"),
    "planted": ({0.5: lambda n: 4 / n, 2.0: lambda n: 3 / n}, "errors 4/n below and 3/n above the threshold: "
                "O(d/n), no worse above it"),
}


@controls("B2")
def b2_controls() -> Controls:
    """B2's reading and rule on synthetic errors against n at L*/2 and 2 L*, every run reaching its optimum."""
    def read(error_of_n: dict, how: str):
        err = {f: {n: float(e(n)) for n in B2_NS} for f, e in error_of_n.items()}
        _, slopes, ratio, enough = b2_reading(err, max(B2_NS))
        return case(*b2_rule(slopes, ratio, enough), {"flat_n_slope": slopes[0], "sharp_n_slope": slopes[1],
                                                      "error_ratio_sharp_over_flat": ratio}, how)

    return controls_from(B2_CASES, read)
