"""B4: early growth of the target attention against eta sigma'(g) g (1 - alpha)."""

from __future__ import annotations

import math

import numpy as np

from ... import plots
from ...experiments.claims import ClaimResult, claim
from ...experiments.evidence import run_settings
from ...experiments.figures import captioned
from ...experiments.registry import experiment
from ...experiments.runner import Context, paper_base, rel_runs, run_group, with_overrides
from ...experiments.uncertainty import ratio_spread

STATEMENTS = {  # the claims this file tests, word for word as the report and docs/CLAIMS.md give them
    "B4": "Early on, the target attention alpha obeys d alpha/dt ~ eta sigma'(g) g (1 - alpha) for a score gap g: "
    "growth toward 1 at a rate of about eta g.",
}


CAPTIONS = {  # figure stem -> what is plotted, what to look for, what would contradict the claim
    "blog_B4_early_rate": (
        "One point per early step of the runs at L = 1, 2, 4: the measured growth d alpha / dt of the target attention "
        "against the write-up's rate eta sigma'(g) g (1 - alpha); legend: Pearson r and the fitted rate constant c. "
        "Look for points on straight lines through the origin (r near 1) with one slope c for every L. Curved or "
        "scattered points (r < 0.5) contradict B4's form; slopes c that grow like L^2 (forced by f = L g) contradict "
        "its independence of L."),
}


B4_SPREAD = 2.0  # the rate constant counts as independent of L when max/min over L is within this factor


B4_LS = (1.0, 2.0, 4.0)


def _score_gap(run) -> np.ndarray:
    """g_t = mean_k (A_k - mean_{n != k} B_{k,n}): the target score minus the mean irrelevant score."""
    A, B, K = run.per_feature("A"), run.per_feature("B"), run.summary["K"]
    off = [(k, n) for k in range(K) for n in range(K) if n != k]
    b_mean = np.stack([B[[c for c in off if c[0] == k]].to_numpy().mean(axis=1) for k in range(K)], axis=1)
    return (A[list(range(K))].to_numpy() - b_mean).mean(axis=1)


def _early_rate(run) -> tuple[float, float, np.ndarray, np.ndarray]:
    """(Pearson r, fitted rate constant c, predicted, measured) over steps 1..T_1 of d alpha = c eta sigma'(g) g
    (1 - alpha), sigma the logistic function (sigma' = sigma (1 - sigma)); c by least squares through 0."""
    alpha = run.attention().mean(axis=1).to_numpy()  # alpha_t = mean_k Attn_k
    gap = _score_gap(run)
    sig = 1 / (1 + np.exp(-gap))
    upto = min(run.summary["T_1"] or len(alpha) - 1, len(alpha) - 1)
    d_alpha = np.diff(alpha)[1:upto]
    pred = (run.config.train.lr * sig * (1 - sig) * gap * (1 - alpha))[1:upto]
    ok = np.isfinite(d_alpha) & np.isfinite(pred)
    if ok.sum() <= 3 or not np.any(pred[ok]):
        return math.nan, math.nan, pred, d_alpha
    r_val = float(np.corrcoef(d_alpha[ok], pred[ok])[0, 1])
    return r_val, float(pred[ok] @ d_alpha[ok] / (pred[ok] @ pred[ok])), pred, d_alpha


@experiment("B4", suites=("blog",), statements=STATEMENTS)
@captioned(CAPTIONS)
def exp_early_rate(ctx: Context) -> list[ClaimResult]:
    """B4: early growth of the target attention against eta sigma'(g) g (1 - alpha)."""
    crit = ("Quickstart setting, every step recorded, L in {1, 2, 4} at eta = 1. alpha_t = mean_k Attn_k, g_t = "
            "mean_k (A_k - mean_n B_{k,n}) (the score gap), sigma the logistic function. Over steps 1..T_1, fit "
            "alpha_{t+1} - alpha_t = c_L eta sigma'(g_t) g_t (1 - alpha_t): Pearson r and the rate constant c_L "
            f"(least squares through 0). Supported if r >= 0.9 in every run and max_L c_L / min_L c_L <= {B4_SPREAD:g} "
            f"(one constant for every L); not supported if some r < 0.5 or the spread exceeds {B4_SPREAD:g}.")
    cfg = paper_base(ctx, "train.log_every=1", "train.steps=400", "name=early-rate")
    runs = run_group(ctx, "early-rate", [with_overrides(cfg, [f"task.L={L}", f"name=L{L:g}"]) for L in B4_LS],
                     "B4 early rate")
    rs, consts = {}, {}
    fig, axes = plots.figure(1, 1)
    for r, c in zip(runs, plots.colors(len(runs)), strict=True):
        key = f"L={r.config.task.L:g}"
        rs[key], consts[key], pred, d_alpha = _early_rate(r)
        axes[0][0].plot(pred, d_alpha, ".", ms=3, color=c, label=f"{key}, r={rs[key]:.2f}, c={consts[key]:.3g}")
    axes[0][0].set(xlabel="eta sigma'(g) g (1 - alpha)", ylabel="d alpha / dt", title="B4: early attention growth")
    axes[0][0].legend(fontsize=7)
    f = plots.save(fig, ctx.out, "blog_B4_early_rate")
    vals = [v for v in rs.values() if math.isfinite(v)]
    spread = ratio_spread(list(consts.values()))
    c_over_L2 = {k: v / L**2 for (k, v), L in zip(consts.items(), B4_LS, strict=True)}
    stat = {"pearson_r": rs, "rate_constant_c": consts, "rate_constant_spread": spread,
            "c_over_L2": c_over_L2, "c_over_L2_spread": ratio_spread(list(c_over_L2.values()))}
    sup = len(vals) == len(runs) and min(vals) >= 0.9 and spread <= B4_SPREAD
    ref = (bool(vals) and min(vals) < 0.5) or (math.isfinite(spread) and spread > B4_SPREAD)
    reason = ("f = L g: at a fixed eta, alpha and g follow one trajectory in s = eta L^2 t, so c_L grows as L^2 "
              "(16x over L = 1..4) up to step-size effects; the L-independence fails by force, only r is free")
    return [claim("B4", crit, stat, sup, ref, figures=[f], runs=rel_runs(ctx, runs), forced_reason=reason,
                  settings=run_settings(runs))]


