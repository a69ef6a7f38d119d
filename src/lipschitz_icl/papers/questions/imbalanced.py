"""questions/imbalanced.py"""

from __future__ import annotations

from ... import plots
from ...experiments.claims import ClaimResult, claim
from ...experiments.evidence import run_settings
from ...experiments.figures import captioned
from ...experiments.measure import L_star_of, crossing_step
from ...experiments.registry import experiment
from ...experiments.runner import (
    Context,
    kernel_base,
    rel_runs,
    run_group,
    single_threaded,
    with_overrides,
)

STATEMENTS = {  # the claims this file tests, word for word as the report and docs/CLAIMS.md give them
    "R3a": "Non-uniform p_k (R3): with imbalanced features (p_1 = 0.6, the other four 0.1 each) and a nonlinear "
    "class, the dominant feature converges first and every Attn_k still converges (H2 beyond the linear case).",
}


CAPTIONS = {  # figure stem -> what is plotted, what to look for, what would contradict the claim
    "ext_imbalanced": (
        "Imbalanced features (p_0 = 0.6, thick; the others 0.1) with a nonlinear class: left, Attn_k against step + 1 "
        "(log x; grey dotted: 0.9); right, the loss. Look for the dominant feature crossing 0.9 first and every rare "
        "feature crossing it later. A rare feature crossing at or before the dominant, or one never crossing, "
        "contradicts R3a."),
}


@experiment("R3a", suites=("extensions",), statements=STATEMENTS)
@captioned(CAPTIONS)
@single_threaded
def exp_imbalanced(ctx: Context) -> list[ClaimResult]:
    crit = ("relu_net class, L = 2 L*, GD. T_conv(k): first step with Attn_k >= 0.9, recorded every 2 steps. "
            "Supported if T_conv(dominant) < T_conv(k) for every rare k (all reached within the budget); not "
            "supported if some rare feature reaches 0.9 no later than the dominant one; otherwise (e.g. a rare "
            "feature never reaches 0.9 within the budget) inconclusive.")
    cfg = kernel_base(ctx, "task.kind=relu_net", "features.probs=imbalanced", "features.p_max=0.6",
                      "train.eps_mode=relative", "train.eps=1e-3", "train.log_every=2")
    L = 2 * L_star_of(cfg)
    runs = run_group(ctx, "ext-imbalanced", [with_overrides(cfg, [f"task.L={L:.6g}", "name=imbalanced"])],
                     "R3a imbalanced")
    run = runs[0]
    att = run.attention()
    tc = {int(k): crossing_step(att[k], 0.9) for k in att.columns}
    rare = [tc[k] for k in tc if k != 0]
    stat = {"L": L, "T_conv_by_feature": tc, "T_conv_dominant": tc[0],
            "T_conv_rare_min": None if any(t is None for t in rare) else min(rare),
            "final_min_attn": float(att.iloc[-1].min()), "final_loss": run.summary["final_loss"],
            "status": run.summary["status"]}
    sup = tc[0] is not None and all(t is not None and t > tc[0] for t in rare)
    ref = any(t is not None and (tc[0] is None or t <= tc[0]) for t in rare)
    fig, axes = plots.figure(2, 1)
    for k, c in zip(att.columns, plots.colors(len(att.columns)), strict=True):
        label = f"k={k} (p={0.6 if k == 0 else 0.1:g})"
        axes[0][0].plot(att.index + 1, att[k], color=c, lw=2.4 if k == 0 else 1, label=label)
    axes[0][0].axhline(0.9, color="grey", ls=":", lw=0.8)
    axes[0][0].set(xscale="log", xlabel="step + 1", ylabel="Attn_k", title="imbalanced features: Attn_k")
    axes[0][0].legend(fontsize=7)
    loss = run.series("loss")
    axes[0][1].loglog(loss.index + 1, loss.values)
    axes[0][1].set(xlabel="step + 1", title="loss")
    fig_path = plots.save(fig, ctx.out, "ext_imbalanced")
    return [claim("R3a", crit, stat, sup, ref, figures=[fig_path], runs=rel_runs(ctx, runs),
                  settings=run_settings(runs))]


