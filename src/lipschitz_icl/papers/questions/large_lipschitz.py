"""questions/large_lipschitz.py"""

from __future__ import annotations

from ... import plots
from ...experiments.claims import ClaimResult, claim
from ...experiments.controls import Controls, case, controls, controls_from
from ...experiments.evidence import run_settings
from ...experiments.figures import captioned
from ...experiments.measure import L_star_of
from ...experiments.registry import experiment
from ...experiments.runner import (
    Context,
    grid,
    kernel_base,
    rel_runs,
    run_group,
    single_threaded,
    with_overrides,
)

STATEMENTS = {  # the claims this file tests, word for word as the report and docs/CLAIMS.md give them
    "R3c": "L far beyond the sharp range (R3): with L up to 100 L* and a fixed step size, gradient descent still "
    "drives every Attn_k to 1 (no saturation on a wrong pattern), and convergence to a relative accuracy does not "
    "slow down as L grows (B5's 'larger L converges faster').",
}


CAPTIONS = {  # figure stem -> what is plotted, what to look for, what would contradict the claim
    "ext_large_L": (
        "Runs from L below L* to far beyond it (legend: L / L*) at one fixed step size: left, min_k Attn_k against "
        "step + 1; right, loss over its initial value (log-log). Look for every curve reaching min_k Attn_k near 1 "
        "(at least 0.9) and the largest L reaching the relative eps no later than the smallest. A curve stalling "
        "below 1/2 at L >= 10 L* (saturation on a wrong pattern), or the largest L taking over twice as long, "
        "contradicts R3c."),
}


@experiment("R3c", suites=("extensions",), statements=STATEMENTS)
@captioned(CAPTIONS)
@single_threaded
def exp_large_L(ctx: Context) -> list[ClaimResult]:
    crit = ("Gaussian features (K = 5, d = 8), relu_net class, eta = 1, L / L* on a grid up to 100, stop at loss "
            "<= 1e-3 x the initial loss. Supported if every run ends with min_k Attn_k >= 0.9 and T_eps at the "
            "largest L <= T_eps at the smallest; not supported if a run with L >= 10 L* ends with min_k Attn_k < "
            "0.5, or T_eps at the largest L > 2 x T_eps at the smallest; otherwise inconclusive.")
    S = ctx.sizes
    cfg = kernel_base(ctx, "features.kind=gaussian", "features.d=8", "task.kind=relu_net",
                      "train.eps_mode=relative", "train.eps=1e-3", "train.lr=1")
    L_star = L_star_of(cfg)
    factors = grid([1.0, 3.0, 10.0, 30.0, 100.0], S.n_grid)
    configs = [with_overrides(cfg, [f"task.L={f * L_star:.6g}", f"name=L{f:g}Lstar"]) for f in factors]
    runs = run_group(ctx, "ext-large-L", configs, "R3c large L")
    T = [r.summary["T_eps"] for r in runs]
    amin = [float(r.attention().iloc[-1].min()) for r in runs]
    stat = {"L_star": L_star, "max_L_over_Lstar": factors[-1], "T_eps_smallest_L": T[0], "T_eps_largest_L": T[-1],
            "min_final_attn": min(amin), "L_over_Lstar": factors, "T_eps": T, "final_min_attn": amin,
            "status": [r.summary["status"] for r in runs]}
    sup, ref = r3c_rule(factors, amin, T)
    fig, axes = plots.figure(2, 1)
    for r, f, c in zip(runs, factors, plots.colors(len(runs)), strict=True):
        am = r.series("attn_min")
        axes[0][0].plot(am.index + 1, am.values, color=c, label=f"L = {f:g} L*")
        loss = r.series("loss")
        axes[0][1].loglog(loss.index + 1, loss.values / loss.values[0], color=c)
    axes[0][0].set(xscale="log", xlabel="step + 1", ylabel="min_k Attn_k", title="L far beyond L*")
    axes[0][0].legend(fontsize=7)
    axes[0][1].set(xlabel="step + 1", ylabel="loss / initial loss", title="relative loss")
    fig_path = plots.save(fig, ctx.out, "ext_large_L")
    return [claim("R3c", crit, stat, sup, ref, figures=[fig_path], runs=rel_runs(ctx, runs),
                  settings=run_settings(runs, by="run"))]




def r3c_rule(L_over_Lstar: list[float], final_min_attn: list[float], T_eps: list[int | None]) -> tuple[bool, bool]:
    """R3c's (supported, refuted) from each run's L / L*, final min_k Attn_k and T_eps (None: not reached), the L
    increasing: supported if every run ends at >= 0.9 and the largest L is no slower than the smallest; refuted if
    a run at L >= 10 L* ends below 1/2 or the largest L takes over twice as long as the smallest."""
    both = T_eps[0] is not None and T_eps[-1] is not None
    sup = min(final_min_attn) >= 0.9 and both and T_eps[-1] <= T_eps[0]
    ref = any(a < 0.5 for f, a in zip(L_over_Lstar, final_min_attn, strict=True) if f >= 10) or (
        both and T_eps[-1] > 2 * T_eps[0])
    return sup, ref


R3C_FACTORS = [1.0, 3.0, 10.0, 30.0, 100.0]  # L / L* of the controls' runs (the full size's grid)
R3C_CASES = {  # runs over R3C_FACTORS: name -> ((final min_k Attn_k, T_eps), what they are)
    "null": (([0.97, 0.96, 0.95, 0.3, 1e-49], [400, 300, 250, None, None]), "the runs at 30 and 100 L* saturate on "
             "a wrong pattern (min_k Attn_k 0.3 and 1e-49, as the tiny size's 100 L* run ends) and never reach eps"),
    "null_slower": (([0.97, 0.96, 0.96, 0.95, 0.95], [200, 250, 350, 450, 600]), "every run converges, but "
                    "convergence slows as L grows: the largest L takes 3x the smallest's steps"),
    "planted": (([0.97, 0.97, 0.96, 0.96, 0.95], [400, 120, 60, 50, 45]), "every run ends with min_k Attn_k >= "
                "0.95 and T_eps falls from 400 steps at L* to 45 at 100 L*"),
}


@controls("R3c")
def r3c_controls() -> Controls:
    """R3c's rule on synthetic final attentions and times of runs from L* to 100 L*."""
    def read(runs: tuple[list[float], list[int | None]], how: str):
        amin, T = runs
        return case(*r3c_rule(R3C_FACTORS, amin, T), {"min_final_attn": min(amin), "T_eps_smallest_L": T[0],
                                                      "T_eps_largest_L": T[-1]}, how)

    return controls_from(R3C_CASES, read)
