"""questions/finite_sample.py"""

from __future__ import annotations

import numpy as np

from ... import plots
from ...experiments.claims import ClaimResult, claim
from ...experiments.controls import Controls, case, controls, controls_from
from ...experiments.evidence import SETTLED_TOL, run_settings, settled
from ...experiments.figures import captioned
from ...experiments.measure import L_star_of
from ...experiments.registry import experiment
from ...experiments.runner import (
    Context,
    grid,
    rel_runs,
    run_group,
    sampled_base,
    single_threaded,
    with_overrides,
)

STATEMENTS = {  # the claims this file tests, word for word as the report and docs/CLAIMS.md give them
    "R1": "Finite training sets (R1): trained on a fixed set of M prompts instead of the population loss, the model "
    "still learns in context: its error on unseen functions does not grow with M and, at the largest M, is within a "
    "factor 2 of population training.",
}


CAPTIONS = {  # figure stem -> what is plotted, what to look for, what would contradict the claim
    "ext_finite_sample": (
        "Left: error on unseen functions against step, trained on fixed sets of M prompts and on the population "
        "loss; right: final test error and training loss against M, log-log (dotted: population training). Look for "
        "the test error not growing with M and, at the largest M, within 2x of the dotted line. A test error rising "
        "with M, or over 4x the population error at the largest M, contradicts R1; the gap between the two right "
        "curves is the overfitting at small M."),
}


@experiment("R1", suites=("extensions",), statements=STATEMENTS)
@captioned(CAPTIONS)
@single_threaded
def exp_finite_training_set(ctx: Context) -> list[ClaimResult]:
    crit = ("K = d = 4, N = 16, relu_net class, L = 2 L*, GD (eta = 1) for the same number of steps on M prompts "
            "(full batch, or minibatches from the M when M > batch) and on fresh prompts every step "
            "(population). Statistic: final test error on unseen functions. Supported if error(M_max) <= 2 x "
            "error(population) and error(M_max) <= error(M_min); not supported if error(M_max) > 4 x "
            "error(population) or error(M_max) > 1.5 x error(M_min); otherwise inconclusive. The runs train for "
            f"{R1_STEPS_FACTOR}x the size's sampled-engine steps and have no accuracy target: each stops at its "
            "budget and is counted censored; its final error decides only if the run has settled (its test error "
            f"over the last 10% of recorded steps within {SETTLED_TOL:g} of the 10% before, evidence.settled); "
            "with M_min, M_max or the population run still moving, the claim is inconclusive.")
    S = ctx.sizes
    cfg = sampled_base(ctx, "task.kind=relu_net", "train.eps=1e-9", f"train.steps={R1_STEPS_FACTOR * S.sampled_steps}")
    L = 2 * L_star_of(cfg)
    cfg = with_overrides(cfg, [f"task.L={L:.6g}"])
    Ms = grid([8, 32, 128, 512, 2048], S.n_grid)
    configs = [with_overrides(cfg, [f"engine.train_prompts={M}", f"name=M{M}"]) for M in Ms]
    configs.append(with_overrides(cfg, ["train.optimizer=sgd", "name=population"]))
    runs = run_group(ctx, "ext-finite-sample", configs, "R1 finite sample")
    errs = [r.summary.get("final_test_error") for r in runs]
    train = [r.summary.get("final_loss") for r in runs]
    pop = errs[-1]
    stat = {"L": L, "test_error_M_min": errs[0], "test_error_M_max": errs[-2], "population_test_error": pop,
            "M": Ms, "test_error": errs[:-1], "train_loss": train[:-1],
            "generalization_gap": [e - t for e, t in zip(errs[:-1], train[:-1], strict=True)]}
    e_min, e_max = errs[0], errs[-2]
    deciding = {"M_min": runs[0], "M_max": runs[-2], "population": runs[-1]}
    moving = [name for name, r in deciding.items() if not settled(r.series("test_error").to_numpy())]
    stat["unsettled_runs"] = moving
    sup, ref = r1_rule(e_min, e_max, pop, bool(moving))
    und = "" if (sup or ref) else (f"the runs {', '.join(moving)} were still moving at their budget: more steps "
                                   "decide it" if moving else "the errors lie between the margins")
    fig, axes = plots.figure(2, 1)
    for r, name, c in zip(runs, [f"M = {M}" for M in Ms] + ["population"], plots.colors(len(runs)), strict=True):
        te = r.series("test_error")
        axes[0][0].semilogy(te.index, te.values, color=c, label=name)
    axes[0][0].set(xlabel="step", ylabel="test error (unseen functions)", title="finite training sets")
    axes[0][0].legend(fontsize=7)
    axes[0][1].loglog(Ms, errs[:-1], "o-", label="test error")
    axes[0][1].loglog(Ms, train[:-1], "s--", label="training loss")
    axes[0][1].axhline(pop, color="k", ls=":", label="population")
    axes[0][1].set(xlabel="M (training prompts)", title="final errors")
    axes[0][1].legend(fontsize=7)
    fig_path = plots.save(fig, ctx.out, "ext_finite_sample")
    return [claim("R1", crit, stat, sup, ref, figures=[fig_path], runs=rel_runs(ctx, runs), undecided_because=und,
                  settings=run_settings(runs, by="run"))]


R1_STEPS_FACTOR = 4  # R1's runs train this many times the size's sampled-engine steps, so that they settle


def r1_rule(error_M_min: float, error_M_max: float, error_population: float, moving: bool) -> tuple[bool, bool]:
    """R1's (supported, refuted) from the final unseen-function errors (only when the deciding runs settled):
    error(M_max) <= 2 x population and <= error(M_min); error(M_max) > 4 x population or > 1.5 x error(M_min)."""
    e_min, e_max, pop = error_M_min, error_M_max, error_population
    sup = not moving and e_max <= 2 * pop and e_max <= e_min
    ref = not moving and (e_max > 4 * pop or e_max > 1.5 * e_min)
    return sup, ref


def _settling(final: float, start: float = 1.0, steps: int = 2000, scale: float = 100.0) -> np.ndarray:
    """A synthetic test-error curve over recorded steps: from ``start`` down to ``final`` on a time scale of
    ``scale`` steps, settled long before the budget."""
    return final + (start - final) * np.exp(-np.arange(0, steps, 10) / scale)


R1_CASES = {  # final test errors: name -> ({run: final error}, how)
    "null": ({"M_min": 0.5, "M_max": 0.45, "population": 0.05}, "the fixed set is memorised, not learnt from: at "
             "M_max the error is still 0.45, 9x the population's 0.05"),
    "null_grows": ({"M_min": 0.05, "M_max": 0.09, "population": 0.05}, "the error grows with M (0.05 at M_min, 0.09 "
                   "at M_max), though within 2x of population training"),
    "planted": ({"M_min": 0.45, "M_max": 0.0065, "population": 0.0056}, "overfitting at M_min (0.45), and at M_max "
                "the error (0.0065) within 2x of population training's (0.0056)"),
}


@controls("R1")
def r1_controls() -> Controls:
    """R1's settling test and rule on synthetic test-error curves of the M_min, M_max and population runs."""
    def read(finals: dict[str, float], how: str):
        curves = {name: _settling(v) for name, v in finals.items()}
        moving = [name for name, c in curves.items() if not settled(c)]
        e_min, e_max, pop = (float(curves[name][-1]) for name in ("M_min", "M_max", "population"))
        return case(*r1_rule(e_min, e_max, pop, bool(moving)), {
            "test_error_M_min": e_min, "test_error_M_max": e_max, "population_test_error": pop,
            "unsettled_runs": moving}, how)

    return controls_from(R1_CASES, read)
