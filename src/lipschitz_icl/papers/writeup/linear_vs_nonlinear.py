"""``reproduce linear``: linear against nonlinear classes side by side (B6)."""

from __future__ import annotations

import numpy as np

from ... import plots
from ...analysis import analyze_run_object
from ...experiments.claims import ClaimResult, claim
from ...experiments.figures import captioned
from ...experiments.measure import L_star_of, fit_dict, safe_fit
from ...experiments.registry import experiment
from ...experiments.runner import Context, paper_base, rel_runs, run_group, with_overrides

CLASSES = ("linear", "relu_net", "sinusoid", "rbf")


STATEMENTS = {  # the claims this file tests, word for word as the report and docs/CLAIMS.md give them
    "B6": "Linear ICL converges in a single phase with no dependence on L; nonlinear ICL has two.",
}


CAPTIONS = {  # figure stem -> what is plotted, what to look for, what would contradict the claim
    "linear_vs_nonlinear": (
        "Left: T_eps against L / L* for each class, log-log; right: min_k Attn_k against step (thicker: larger L). "
        "Look for the linear class converging in one phase (one smooth rise) with T_eps flat in L (slope near 0), and "
        "the nonlinear classes in two phases (a fast rise, then a slow creep). A linear class with two phases, or "
        "with T_eps falling steeply with L (slope beyond -1), contradicts B6."),
}


@experiment("B6", suites=("linear",), statements=STATEMENTS)
@captioned(CAPTIONS)
def exp_linear_vs_nonlinear(ctx: Context) -> list[ClaimResult]:
    crit = ("For each class, L in {0.5, 1, 2, 4} x L* of its setting, eps = 1e-3 of the initial loss: phases detected "
            "by the analysis and the log-log slope of T_eps against L. Supported if the linear runs show 1 phase in >= "
            "80% of runs with |slope| < 0.3 while the nonlinear runs show 2 phases in >= 80%; not supported if the "
            "linear runs show 2 phases in >= 50% of runs or their |slope| > 1.")
    S = ctx.sizes
    # a small eps, so that the slow phase (if any) is reached before the run stops
    cfg = paper_base(ctx, "train.eps_mode=relative", "train.eps=1e-3", "task.kernel_samples=2048",
                f"train.steps={2 * S.budget}")
    configs = []
    for cls in CLASSES:
        base = with_overrides(cfg, [f"task.kind={cls}", "task.L=1"])
        L_star = L_star_of(base)
        for f in (0.5, 1.0, 2.0, 4.0):
            configs.append(with_overrides(base, [f"task.L={f * L_star:.6g}", f"name={cls}-{f:g}Lstar"]))
    runs = run_group(ctx, "linear-vs-nonlinear", configs, "linear vs nonlinear")
    table, fits = {}, {}
    fig, axes = plots.figure(2, 1)
    for cls, c in zip(CLASSES, plots.colors(len(CLASSES)), strict=True):
        sel = [r for r in runs if r.config.task.kind == cls]
        phases = [analyze_run_object(r)["n_phases"] for r in sel]
        Ls = [r.config.task.L / r.summary["L_star"] for r in sel]
        Te = [r.summary["T_eps"] for r in sel]
        fits[cls] = safe_fit(Ls, Te)
        table[cls] = {"n_phases": phases, "T_eps": Te, "L_over_Lstar": Ls, **fit_dict(fits[cls], "slope_L")}
        pts = [(x, y) for x, y in zip(Ls, Te, strict=True) if y]
        if pts:
            axes[0][0].loglog(*zip(*pts, strict=True), "o-", color=c, label=cls)
        for r in sel:
            amin = r.series("attn_min")
            amin = amin[amin.index > 0]  # step 0 is off the log x axis (no false plateau to it)
            axes[0][1].plot(amin.index, amin.values, color=c, lw=0.6 + 0.5 * (r.config.task.L / r.summary["L_star"]))
    axes[0][0].set(xlabel="L / L*", ylabel="T_eps", title="convergence time against L")
    if axes[0][0].get_legend_handles_labels()[0]:
        axes[0][0].legend(fontsize=7)
    axes[0][1].set(xlabel="step", xscale="log", title="min_k Attn_k (thicker: larger L)")
    fig_path = plots.save(fig, ctx.out, "linear_vs_nonlinear")
    lin = table["linear"]["n_phases"]
    nonlin = [p for cls in CLASSES[1:] for p in table[cls]["n_phases"]]
    lin_one = np.mean([p == 1 for p in lin])
    lin_two = np.mean([p == 2 for p in lin])
    non_two = np.mean([p == 2 for p in nonlin])
    slope = fits["linear"].slope if fits["linear"] is not None else None
    sup = lin_one >= 0.8 and slope is not None and abs(slope) < 0.3 and non_two >= 0.8
    ref = lin_two >= 0.5 or (slope is not None and abs(slope) > 1)
    stat = {"per_class": table, "linear_fraction_one_phase": lin_one, "nonlinear_fraction_two_phases": non_two}
    return [claim("B6", crit, stat, sup, ref, figures=[fig_path], runs=rel_runs(ctx, runs))]

