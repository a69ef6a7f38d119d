# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Your own claim: a task class and a claim test, run through `reproduce`
#
# A new task class, `softsign` (f(x) = L u / (1 + |u|), u = wᵀx, w uniform on the unit sphere: softsign
# is 1-Lipschitz, so f is L-Lipschitz), and a claim about it, registered as an experiment and run
# by `reproduce` like the built-in claims: it gets a criterion fixed before the runs, a measured
# statistic, a verdict, a figure and a report. Run the cells once per kernel (a claim is registered
# once). `LIPSCHITZ_ICL_EXAMPLE_SIZE=small` runs it at the test suite's size.

# %%
import os
from pathlib import Path

import pandas as pd
import torch
from IPython.display import Image

from lipschitz_icl import TaskClass, plots, register_task
from lipschitz_icl.experiments.claims import claim
from lipschitz_icl.experiments.registry import experiment
from lipschitz_icl.experiments.runner import base_config, rel_runs, run_group
from lipschitz_icl.problem import build_problem
from lipschitz_icl.reproduce import reproduce
from lipschitz_icl.theory import theory_of

SIZE = os.environ.get("LIPSCHITZ_ICL_EXAMPLE_SIZE", "full")
SIZES = {  # size -> (overrides, values of L / L*, seeds)
    "full": (["task.kernel_samples=8192", "train.eps=1e-3", "train.steps=200000"], (0.25, 0.5, 0.8), 3),
    "small": (["task.kernel_samples=512", "train.eps=1e-2", "train.steps=20000", "engine.draws=32",
               "eval.functions=64"], (0.5, 0.8), 1),
}
ROOT = next(p for p in [Path.cwd(), *Path.cwd().parents] if (p / "configs" / "quickstart.yaml").is_file())
OUT = Path(os.environ.get("LIPSCHITZ_ICL_NOTEBOOK_OUT", ROOT / "notebook-out")) / "own_claim"

# %% [markdown]
# ## The task class
#
# Every draw comes from the generator it is given, so runs are reproducible. Σ has no closed form,
# so the kernel engine estimates it by Monte Carlo (`task.kernel_samples` functions).


# %%
@register_task
class Softsign(TaskClass):
    name = "softsign"
    defaults = {"scale": 1.0}  # options under task.params

    def sample(self, n, gen, dtype, device="cpu"):
        w = torch.randn(n, self.d, generator=gen, dtype=dtype, device=device)
        return {"w": w / w.norm(dim=1, keepdim=True)}

    def evaluate(self, funcs, x):  # x: (n, m, d) -> (n, m)
        u = self.params["scale"] * torch.einsum("nmd,nd->nm", x, funcs["w"])
        return self.L * u / (1 + u.abs())


# %% [markdown]
# ## The claim and its criterion, fixed before any run
#
# The paper's P3 beyond its own classes: in the flat regime L < L*, gradient descent from Q = 0 reaches
# the loss ε (relative to the initial loss) with every Attn_k close to 1. The verdict comes from two
# conditions computed on the measurements: both or neither true is inconclusive.

# %%
CLAIM = "X1"
STATEMENT = ("Softsign functions in the flat regime: below L*, gradient descent from Q = 0 converges with every "
             "query attending to its own feature (min_k Attn_k >= 0.9).")
MIN_ATTN, FAIL_ATTN = 0.9, 0.5
CRITERION = (f"Runs at L / L* in {SIZES[SIZE][1]} ({SIZES[SIZE][2]} seed(s) each), eps relative to the initial loss. "
             f"Supported if every run converges with final min_k Attn_k >= {MIN_ATTN}; not supported if a converged "
             f"run ends with min_k Attn_k < {FAIL_ATTN}; otherwise inconclusive (a run out of budget is censored).")


@experiment(CLAIM, suites=("mine",), statements={CLAIM: STATEMENT})
def exp_softsign_flat(ctx):
    overrides, fractions, seeds = SIZES[SIZE]
    base = base_config(["task.kind=softsign", "train.eps_mode=relative", *overrides])
    L_star = theory_of(build_problem(base)).L_star  # L* = 1/(Delta delta), delta from the Monte-Carlo kernel
    configs = [base.with_overrides([f"task.L={f * L_star:.6g}", f"seed={s}", f"name=L{f:g}Lstar-s{s}"])
               for f in fractions for s in range(seeds)]
    runs = run_group(ctx, "softsign", configs, label="X1 softsign below L*")
    converged = [r for r in runs if r.summary["status"] == "converged"]
    min_attn = {r.config.name: r.summary["min_attn"] for r in runs}
    fig, axes = plots.figure(1, 1)
    for r, color in zip(runs, plots.colors(len(runs)), strict=True):
        axes[0][0].plot(r.series("attn_min"), color=color, label=r.config.name)
    axes[0][0].axhline(MIN_ATTN, color="gray", ls="--", lw=1)
    axes[0][0].set(xlabel="step", ylabel="min_k Attn_k", title="softsign below L*", xscale="symlog")
    axes[0][0].legend(fontsize=8)
    figure = plots.save(fig, ctx.out, "softsign_attention")
    statistic = {"L_star": L_star, "min_attn_by_run": min_attn, "converged_runs": len(converged),
                 "runs": len(runs)}
    return [claim(CLAIM, CRITERION, statistic,
                  supported=len(converged) == len(runs) and min(min_attn.values()) >= MIN_ATTN,
                  refuted=any(r.summary["min_attn"] < FAIL_ATTN for r in converged),
                  figures=[figure], runs=rel_runs(ctx, runs), censored=len(runs) - len(converged),
                  captions={figure: "min_k Attn_k of each run against step; look for every curve ending above "
                                    "the dashed line (0.9): one ending below 0.5 after converging refutes the claim."},
                  undecided_because="a run did not converge within its budget, or ended between 0.5 and 0.9")]


# %% [markdown]
# ## Run it through `reproduce`
#
# `reproduce([CLAIM], OUT, quick=True)` runs only the experiments that claim needs and writes
# `claims.json`, `claims.csv`, `report.md` and a self-contained `report.html` into `OUT`, as
# `lipschitz-icl reproduce` does for the built-in claims.

# %%
claims, meta = reproduce([CLAIM], OUT, quick=True, fused=False)
pd.read_csv(OUT / "claims.csv")[["id", "verdict", "censored", "statistic"]]

# %%
print(claims[0].verdict, "—", claims[0].statistic["min_attn_by_run"])
Image(filename=str(OUT / "figures" / "softsign_attention.png"))
