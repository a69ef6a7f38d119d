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
# # The threshold story: T_ε against L / L*
#
# The paper's flat-regime bound T_f = K log(K/ε) / (η δ² L² Δ²) says the time to reach the loss ε
# falls as L⁻² below the threshold L* = 1/(Δδ). This notebook runs an L sweep (and two step sizes)
# on an embedded Dask cluster, draws T_ε against L/L* and the phase diagram, fits the flat-regime
# slope, and checks the fit before reading its slope: a power law is itself a claim.
#
# ε is relative to the initial loss (`train.eps_mode: relative`): the initial loss grows as L², so an
# absolute ε would ask a small L for less and a large L for more (the README's sweep explains the
# slope of about −0.6 that gives). `LIPSCHITZ_ICL_EXAMPLE_SIZE=small` runs it at the test suite's size.

# %%
import os
from pathlib import Path

import numpy as np

import lipschitz_icl as li
from lipschitz_icl import plots
from lipschitz_icl.fits import PREDICTED_SLOPES, fit_loglog
from lipschitz_icl.sweep import load_index, run_configs

SIZE = os.environ.get("LIPSCHITZ_ICL_EXAMPLE_SIZE", "full")
SIZES = {  # values of L, seeds, step sizes, workers, overrides
    "full": (np.geomspace(0.3, 10, 10), 3, (1.0, 0.1), 2, ["train.steps=200000"]),
    "small": ((0.7, 1.0, 1.4, 2.8), 2, (1.0, 0.05), 2,
              ["train.eps=1e-2", "engine.draws=32", "eval.functions=32", "train.steps=6000"]),
}
Ls, seeds, etas, workers, overrides = SIZES[SIZE]
ROOT = next(p for p in [Path.cwd(), *Path.cwd().parents] if (p / "configs" / "quickstart.yaml").is_file())
OUT = Path(os.environ.get("LIPSCHITZ_ICL_NOTEBOOK_OUT", ROOT / "notebook-out")) / "threshold"

# %% [markdown]
# ## The sweep
#
# `run_configs` writes one run directory per config and an SQLite index; with `workers` ≥ 2 it starts
# an embedded Dask cluster of single-threaded worker processes. Running the cell again reuses the
# finished runs.

# %%
configs = [li.load_config(ROOT / "configs" / "quickstart.yaml",
                          ["train.eps_mode=relative", *overrides, f"task.L={L:.6g}", f"train.lr={eta:g}",
                           f"seed={seed}"])
           for L in Ls for eta in etas for seed in range(seeds)]
rows = run_configs(configs, OUT / "sweep", workers=workers)
rows[["L", "seed", "status", "T_1", "T_eps", "regime"]].head(8)

# %%
load_index(OUT / "sweep")["status"].value_counts()

# %% [markdown]
# ## T_ε against L / L*
#
# One colour per step size; the fits (95 % interval over seeds) below and above L*, and the theory's
# slope −2 (dashed: the theory fixes the slope, not the constant).

# %%
plots.time_vs_lipschitz(OUT / "sweep")

# %% [markdown]
# ## The phase diagram
#
# Every (L/L*, η) point coloured by its outcome: where the step budget runs out (a small η in the flat
# regime) and where gradient descent converges.

# %%
plots.phase_diagram(OUT / "sweep")

# %% [markdown]
# ## The fit, checked before its slope is read
#
# In the flat regime at η = 1: the least-squares slope of log T_ε against log L with a 95 % interval over
# seeds, and the local slopes between neighbouring values of L. Local slopes that drift (curvature)
# would say the power law does not hold, and then its slope means nothing.

# %%
frame = plots.sweep_frame(OUT / "sweep")
flat = frame[(frame["L_over_Lstar"] < 1) & (frame["lr"] == 1.0) & frame["T_eps"].notna()]
fit = fit_loglog(flat["L"], flat["T_eps"], flat["seed"])
means = flat.groupby("L")["T_eps"].apply(lambda t: np.exp(np.log(t).mean()))
local = np.diff(np.log(means.to_numpy())) / np.diff(np.log(means.index.to_numpy()))
predicted = PREDICTED_SLOPES["L"]
print(f"flat-regime slope {fit.slope:.4f}, 95 % interval [{fit.lo:.4f}, {fit.hi:.4f}] over {fit.n} runs "
      f"({fit.method}); theory {predicted}: {'inside' if fit.contains(predicted) else 'outside'} the interval, "
      f"{abs(fit.slope - predicted):.4f} from it")
print("local slopes between neighbouring L:", np.round(local, 3))

# %% [markdown]
# The interval covers the seeds (each redraws the count draws) and not the rounding of T_ε to whole
# steps, which moves the slope by about 1/T_ε: a slope within a few thousandths of −2 is −2. Under
# f = L·g gradient descent depends on (η, L) only through η L², so with a relative ε the slope −2
# is what that invariance forces (the claims' report counts it as forced, not as evidence for the bound):
# the L axis checks the code and the fit, while the bound's other slopes (Δ, K) are tested by
# `lipschitz-icl reproduce P5`.

# %%
plots.time_vs_theory(OUT / "sweep")
