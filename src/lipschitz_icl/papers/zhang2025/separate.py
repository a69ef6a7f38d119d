"""ATTN_S, separate keys and queries with rank-one heads (claim ZS3): saddle-to-saddle dynamics, one principal
component of the input covariance learned at a time in decreasing order of eigenvalue, the plateaus at the closed
form 1 - sum_{learned} lambda / (1 + (1 + 1/lambda)/N) (tr Lambda = 1; linattn.plateau_losses, the code's
loss_at_saddle)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ... import plots
from ...experiments.claims import ClaimResult, claim
from ...experiments.evidence import refined_conditions
from ...experiments.figures import captioned
from ...experiments.registry import experiment
from ...experiments.runner import Context, single_threaded, write_data
from ...experiments.staircase import staircase
from ...linattn import Form, GaussianTask, optimal_gamma, plateau_losses, train_linear
from .settings import N_CONTEXT, RECORDS, SEPARATE

STATEMENTS = {
    "ZS3": "Linear attention with separate rank-one keys and queries (ATTN_S) learns saddle to saddle: one principal "
           "component of the input covariance at a time, in decreasing order of eigenvalue, with plateaus at the "
           "losses 1 - sum over the learned components of lambda / (1 + (1 + 1/lambda)/N).",
}
CAPTIONS = {
    "zhang_separate_curves": (
        "ATTN_S (rank-one heads) population loss against time t = lr x steps, one curve per seed; dashed: the "
        "closed-form plateaus L(M_0), ..., L(M_D) (the paper's code's loss_at_saddle), as in the paper's figure "
        "of the saddle-to-saddle curves. Look for every curve resting on each dashed line in turn, top to bottom; "
        "a curve that skips a line, or rests between lines, contradicts ZS3."),
}
LEVEL_TOL = 1e-3  # a measured plateau within 1e-3 of its closed form (tr Lambda = 1: absolute)
LEARNED = 0.5  # a component is learned when Gamma's entry on it reaches half of the optimum's


def learned_components(gamma: np.ndarray, vecs: np.ndarray, target: np.ndarray) -> list[int]:
    """The eigen-directions (by index, eigenvalues decreasing) on which Gamma holds at least LEARNED of Gamma*."""
    diag = np.diag(vecs.T @ gamma @ vecs) / target
    return [int(i) for i in np.flatnonzero(diag >= LEARNED)]


def run_separate(eigs, heads: int, seed: int, scale: float, lr: float, steps: int) -> dict:
    """One ATTN_S run on the exact engine: its plateau levels and, at each plateau, the learned components."""
    task = GaussianTask.make(eigs, N_CONTEXT)
    every = max(steps // RECORDS, 1)
    run = train_linear(Form("separate", heads=heads, rank=1), task, lr=lr, steps=steps, seed=seed, init_scale=scale,
                       half=False, record_every=every, keep_gamma=True)
    t, loss = run.curve["t"].to_numpy(), run.curve["exact"].to_numpy()
    stairs = staircase(t, loss)
    vecs, target = np.eye(len(eigs)), np.diag(optimal_gamma(task).numpy())
    order = []
    for start, drop in zip(stairs.starts[1:], [*stairs.drops[1:], t[-1]], strict=False):
        mid = int(np.searchsorted(t, (start + drop) / 2))  # the middle of the plateau
        order.append(learned_components(run.history[min(mid, len(run.history) - 1)], vecs, target))
    closed = plateau_losses(eigs, N_CONTEXT)
    return {"seed": seed, "levels": stairs.levels, "drop_times": stairs.drops, "learned": order,
            "closed": closed.tolist(), "censored": bool(loss[-1] - closed[-1] > LEVEL_TOL), "curve": (t, loss)}


def zs3_rule(runs: list[dict]) -> tuple[bool, bool, dict]:
    """ZS3 from per-run (levels, learned sets at each plateau, closed form, censored): a run fits if its levels are
    the closed form's L(M_0), L(M_1), ... within LEVEL_TOL, one per component, and after its k-th drop it holds
    the top k components. Supported if >= 5 runs and every uncensored run fits while reaching its last plateau
    (censored runs must fit as far as they went); refuted if a run does not fit."""
    fits = []
    for r in runs:
        closed, levels = r["closed"], list(r["levels"])
        last = closed[min(len(levels), len(closed)) - 1]
        if r["censored"] and len(levels) > 1 and abs(levels[-1] - last) > LEVEL_TOL:
            levels = levels[:-1]  # a run cut off mid-drop: its last record is no plateau
        n = len(levels) if r["censored"] else len(closed)
        same = len(levels) == n and all(abs(a - b) <= LEVEL_TOL for a, b in zip(levels, closed[:n], strict=False))
        ordered = all(sorted(s) == list(range(k + 1)) for k, s in enumerate(r["learned"][:n - 1]))
        fits.append(bool(same and ordered))
    done = [f for f, r in zip(fits, runs, strict=True) if not r["censored"]]
    stat = {"runs": len(runs), "censored": sum(r["censored"] for r in runs), "fitting": sum(fits),
            "not_fitting_seeds": [r["seed"] for f, r in zip(fits, runs, strict=True) if not f]}
    return len(runs) >= 5 and all(fits) and bool(done), not all(fits), stat


@experiment("ZS3", suites=("zhang",), statements=STATEMENTS)
@captioned(CAPTIONS)
@single_threaded
def exp_zhang_separate(ctx: Context) -> list[ClaimResult]:
    """ATTN_S with rank-one heads from a small initialisation on the exact engine: ZS3."""
    size = SEPARATE[ctx.sizes.level]
    eigs = size["eigs"]
    runs, fine_runs = ([run_separate(eigs, size["heads"], s, size["scale"], size["lr"] / k, k * size["steps"])
                        for s in range(size["seeds"])] for k in (1, 2))
    coarse = zs3_rule(runs)
    fine = zs3_rule(fine_runs)
    sup, ref, refined, why = refined_conditions(coarse[:2], fine[:2], "half the step size and twice the steps",
                                                {**fine[2], "levels": {r["seed"]: r["levels"] for r in fine_runs}})
    stat = coarse[2]
    closed = plateau_losses(eigs, N_CONTEXT)
    stat["plateaus"] = {"closed_form": closed.tolist(), "measured": {r["seed"]: r["levels"] for r in runs},
                        "learned_at_each_plateau": {r["seed"]: r["learned"] for r in runs},
                        "drop_times": {r["seed"]: r["drop_times"] for r in runs}}
    # spacing, reported and not judged: drop k after drop 1 against lambda_1^2 / lambda_k^2, the ratio of the
    # escape times 1 / (6 lambda_k^2 a0) of rank-one heads from one initial scale a0 (random heads differ in a0)
    stat["spacing"] = {"theory": [float(eigs[0] ** 2 / lam ** 2) for lam in eigs],
                       "measured": {r["seed"]: [d / r["drop_times"][0] for d in r["drop_times"]] for r in runs}}
    table = pd.DataFrame([{"seed": r["seed"], "plateau": k, "measured": lvl, "closed_form": closed[k]}
                          for r in runs for k, lvl in enumerate(r["levels"])])
    data = [write_data(ctx, "zhang_separate_plateaus", table)]
    crit = (f"ATTN_S, {size['heads']} rank-one heads from entries N(0, {size['scale']:g}^2), exact population loss, "
            f"eigenvalues {np.round(eigs, 4).tolist()}, N = {N_CONTEXT}, {size['seeds']} seeds (the init's draw). Per "
            "seed: the plateaus of the loss curve (experiments.staircase) and, in the middle of each, the eigen-"
            f"directions on which Gamma holds >= {LEARNED} of Gamma*. Supported if >= 5 seeds and every seed rests on "
            f"L(M_0), L(M_1), ... in turn (within {LEVEL_TOL}) holding the top-k components after its k-th drop; "
            "refuted if a seed skips a plateau, rests elsewhere, or learns out of order. Runs that end before the "
            "optimum are censored and must fit as far as they went.")
    censored = [f"seed {r['seed']}" for r in runs if r["censored"]]
    return [claim("ZS3", crit, stat, sup, ref, figures=[_figure(ctx, runs, closed)], data=data,
                  censored=len(censored), censored_runs=censored, refinement=refined, distinct_settings=1,
                  undecided_because=why or ("" if sup or ref else "fewer than 5 seeds, or every run censored"))]


def _figure(ctx, runs, closed) -> str:
    fig, axes = plots.figure(1, 1, width=5.5)
    ax = axes[0][0]
    for r in runs:
        ax.plot(*r["curve"], lw=1, label=f"seed {r['seed']}")
    for k, level in enumerate(closed):
        ax.axhline(level, ls="--", color="k", lw=0.7)
        ax.annotate(f"L(M_{k})", (0, level), fontsize=7, va="bottom")
    ax.set(xlabel="t = lr x steps", ylabel="population loss (MSE)", title="ATTN_S, rank-one heads")
    ax.legend(fontsize=7)
    return plots.save(fig, ctx.out, "zhang_separate_curves")
