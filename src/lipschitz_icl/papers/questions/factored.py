"""questions/factored.py"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ... import plots
from ...experiments.claims import ClaimResult, claim
from ...experiments.controls import Controls, case, controls, controls_from
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
    sup, ref = r2_rule(res["reduced"][0], res["factored"][0])
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


def r2_rule(rho_reduced: float, rho_factored: float) -> tuple[bool, bool]:
    """R2's (supported, refuted) from the phase ratios rho (nan: a level not reached): rho > 1 for both; rho > 1
    for one model and <= 1 for the other."""
    both = math.isfinite(rho_reduced) and math.isfinite(rho_factored)
    return both and rho_reduced > 1 and rho_factored > 1, both and (rho_reduced > 1) != (rho_factored > 1)


R2_K = 4  # features of R2's setting: min_k Attn_k starts at 1/K
R2_STEPS = np.arange(0, 6001, 2)  # recorded every 2 steps


def _from_log_gap(r: np.ndarray) -> np.ndarray:
    """min_k Attn_k from 1/K with -log((1 - Attn) / (1 - 1/K)) = r."""
    return 1 - (1 - 1 / R2_K) * np.exp(-r)


def _two_rates(t: np.ndarray, plateau: float = 0.0) -> np.ndarray:
    """-log((1 - Attn) / (1 - 1/K)) rising at 0.02 per step to Attn = 0.6, then 10x more slowly (a fast rise, then a
    creep), after ``plateau`` flat steps."""
    s = np.maximum(t - plateau, 0.0)
    t1 = np.log((1 - 1 / R2_K) / 0.4) / 0.02
    return _from_log_gap(np.where(s <= t1, 0.02 * s, 0.02 * t1 + 0.002 * (s - t1)))


R2_CASES = {  # min_k Attn_k of the factored run (the reduced one is _two_rates): name -> (curve of t, how)
    "null": (lambda t: np.minimum(1 / R2_K + (1 - 1 / R2_K) * t / 3000, 0.999), "a factored run rising at one "
             "constant speed from 1/K to 1 (no slowdown after 1/2)"),
    "null_one_law": (lambda t: _from_log_gap(0.002 * t), "a factored run approaching 1 exponentially (one rate of "
                     "-log(1 - Attn) throughout: no fast rise then creep)"),
    "null_accelerating": (lambda t: 1 / R2_K + (1 - 1 / R2_K) * np.minimum(t / 3000, 1.0) ** 3 * 0.999,
                          "a factored run whose rise speeds up after 1/2 (Attn - 1/K growing as t^3)"),
    "planted": (lambda t: _two_rates(t, plateau=300.0), "a factored run flat for 300 steps while its weights grow, "
                "then the reduced run's fast rise to 0.6 and a 10x slower creep"),
}


@controls("R2")
def r2_controls() -> Controls:
    """R2's phase ratio and rule on a synthetic reduced run (a fast rise, then a creep) and factored runs."""
    reduced = phase_ratio(pd.Series(_two_rates(R2_STEPS), index=R2_STEPS), R2_K)[0]

    def read(factored_curve, how: str):
        factored = phase_ratio(pd.Series(factored_curve(R2_STEPS), index=R2_STEPS), R2_K)[0]
        return case(*r2_rule(reduced, factored), {"reduced_rho": reduced, "factored_rho": factored}, how)

    return controls_from(R2_CASES, read)
