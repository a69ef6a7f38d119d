"""The Zhang-Frei-Bartlett suite's one experiment: ZF1's gradient-flow runs (exact engine) and full-form runs
(sampled), then ZF2's sampled errors at their trained Gamma, then ZF3's shift curves."""

from __future__ import annotations

import pandas as pd

from ...experiments.claims import ClaimResult
from ...experiments.figures import captioned
from ...experiments.registry import experiment
from ...experiments.runner import Context, single_threaded, write_data
from . import convergence, error, shifts
from .common import seeds_for, settings_for
from .controls import rank_one_runs, zero_runs

STATEMENTS = {**convergence.STATEMENTS, **error.STATEMENTS, **shifts.STATEMENTS}
CAPTIONS = {**convergence.CAPTIONS, **error.CAPTIONS, **shifts.CAPTIONS}
BUDGET = {"tiny": 300, "quick": 3000}  # step budget of a gradient-flow run (full size: FULL_BUDGET)
FULL_BUDGET = 20000
PROMPTS = {"tiny": 2000, "quick": 16000}  # fresh test prompts per (seed, M) for ZF2 (full size: FULL_PROMPTS)
FULL_PROMPTS = 40000


@experiment("ZF1", "ZF2", "ZF3", suites=("zfb",), statements=STATEMENTS)
@captioned(CAPTIONS)
@single_threaded
def exp_zfb(ctx: Context) -> list[ClaimResult]:
    """One linear self-attention layer on Gaussian linear regression: convergence, error at M, shifts."""
    level = ctx.sizes.level
    settings, seeds = settings_for(level), seeds_for(level, ctx.seed)
    budget = BUDGET.get(level, FULL_BUDGET)
    runs = convergence.exact_runs(settings, seeds, budget)
    refined = convergence.exact_runs(settings, seeds, 2 * budget, lr_factor=0.5)
    full = convergence.full_runs(settings, seeds, level)
    controls = {"zero init": list(zero_runs()), "rank-one head": list(rank_one_runs())}
    zf1, table = convergence.judge(ctx, settings, seeds, runs, refined, full, controls, budget)
    full_table = pd.DataFrame([{"seed": f["seed"], **row} for f in full for row in f["curve"]])
    zf1.data = [write_data(ctx, "zfb_convergence", table), write_data(ctx, "zfb_full_form", full_table)]

    prompts = PROMPTS.get(level, FULL_PROMPTS)
    errors = error.measure(settings, runs, prompts)
    errors_refined = error.measure(settings, runs, 2 * prompts)
    zf2 = error.judge(ctx, settings, errors, errors_refined, prompts, [write_data(ctx, "zfb_error", errors)])

    base = next(r for r in runs if r.setting == shifts.ANISO3.name)
    spot = shifts.spot_checks(shifts.ANISO3, base.gamma, prompts, seed=base.seed)
    zf3 = shifts.judge(ctx, level, spot, [])
    return [zf1, zf2, zf3]
