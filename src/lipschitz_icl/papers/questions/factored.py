"""questions/factored.py"""

from __future__ import annotations

import math

from ... import plots
from ...experiments.claims import ClaimResult, claim
from ...experiments.figures import captioned
from ...experiments.measure import phase_ratio
from ...experiments.registry import experiment
from ...experiments.runner import (
    Context,
    rel_runs,
    run_group,
    sampled_base,
    single_threaded,
    with_overrides,
)

STATEMENTS = {  # the claims this file tests, word for word as the report and docs/CLAIMS.md give them
    "R2": "Gradient descent on separate W_K, W_Q (R2) goes through the same phases as on the merged Q: a fast rise "
    "of min_k Attn_k to 1/2, then a slower creep toward 1 (after a plateau while the small initial weights grow).",
}


CAPTIONS = {  # figure stem -> what is plotted, what to look for, what would contradict the claim
    "ext_factored": (
        "Merged Q (reduced model) against separate W_K, W_Q (factored): left, min_k Attn_k against step; right, the "
        "mean diagonal score A_k. Look for the factored run, after a plateau while its small initial weights grow, "
        "going through the same fast rise to 1/2 and slower creep toward 1 as the merged one. A factored run with no "
        "slowdown after 1/2, or one that never rises, contradicts R2."),
}


@experiment("R2", suites=("extensions",), statements=STATEMENTS)
@captioned(CAPTIONS)
@single_threaded
def exp_factored(ctx: Context) -> list[ClaimResult]:
    crit = ("K = d = 4, N = 16, linear L = 2, GD (eta = 1) on one fixed batch; reduced (Q^(0) = 0) and factored "
            "(d_k = d, init scale 0.3). Phase ratio rho = (T_0.9 - T_0.5) / (T_0.5 - T_start), T_a the first step "
            "with min_k Attn_k >= a and T_start 10% of the way from 1/K to 1/2. Supported if rho > 1 for both; "
            "not supported if rho > 1 for one model and rho <= 1 for the other; otherwise (a level not reached, "
            "or rho <= 1 for both) inconclusive.")
    S = ctx.sizes
    cfg = sampled_base(ctx, "train.eps=1e-9", "train.log_every=2", f"train.steps={2 * S.sampled_steps}")
    configs = [with_overrides(cfg, ["name=reduced"]),
               with_overrides(cfg, ["model.kind=factored", "model.init_scale=0.3", "name=factored"])]
    runs = run_group(ctx, "ext-factored", configs, "R2 factored")
    K = cfg.features.K
    res = {r.config.model.kind: phase_ratio(r.series("attn_min"), K) for r in runs}
    stat = {f"{kind}_{name}": x for kind, v in res.items()
            for name, x in zip(("rho", "T_start", "T_half", "T_0.9"), v, strict=True)}
    rr, rf = res["reduced"][0], res["factored"][0]
    both = math.isfinite(rr) and math.isfinite(rf)
    sup = both and rr > 1 and rf > 1
    ref = both and (rr > 1) != (rf > 1)
    fig, axes = plots.figure(2, 1)
    for r, c in zip(runs, ("tab:blue", "tab:red"), strict=True):
        am = r.series("attn_min")
        axes[0][0].plot(am.index, am.values, color=c, label=r.config.model.kind)
        A = r.per_feature("A").mean(axis=1)
        axes[0][1].plot(A.index, A.values, color=c, label=r.config.model.kind)
    for ax in axes[0]:
        ax.legend(fontsize=7)
    axes[0][0].set(xlabel="step", ylabel="min_k Attn_k", title="merged Q vs factored W_K, W_Q")
    axes[0][1].set(xlabel="step", ylabel="mean_k A_k = v_k^T Q_eff v_k", title="diagonal scores")
    fig_path = plots.save(fig, ctx.out, "ext_factored")
    return [claim("R2", crit, stat, sup, ref, figures=[fig_path], runs=rel_runs(ctx, runs))]


