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
# # A tour of lipschitz-icl
#
# One training run of the paper's one-layer softmax attention (Li, Duan, Liang, arXiv 2507.20443):
# its loss and attention curves, what the theory says about its setting before any training, and
# where the trained model's query looks in one sample prompt.
#
# Open it with `jupyter lab notebooks/tour.py` (jupytext) or convert it with
# `jupytext --to ipynb notebooks/tour.py`. `LIPSCHITZ_ICL_EXAMPLE_SIZE=small` runs it at the size the
# test suite uses (seconds); the default is the quickstart as it is.

# %%
import os
from pathlib import Path

import pandas as pd

import lipschitz_icl as li
from lipschitz_icl import plots
from lipschitz_icl.theory import theory_report

SIZE = os.environ.get("LIPSCHITZ_ICL_EXAMPLE_SIZE", "full")
SIZES = {"full": [], "small": ["train.eps=2e-2", "engine.draws=32", "eval.functions=32", "train.log_every=5"]}
ROOT = next(p for p in [Path.cwd(), *Path.cwd().parents] if (p / "configs" / "quickstart.yaml").is_file())
CONFIG = ROOT / "configs" / "quickstart.yaml"  # K = 5 orthonormal features in d = 5, N = 50, linear, L = 2

# %% [markdown]
# ## What the theory says, before training
#
# Δ (the smallest distance between features), δ (the non-degeneracy of the task's kernel), the
# threshold L* = 1/(Δδ), the regime of this L, the flat-regime time scale T_f and the largest stable
# step η_max at Q = 0.

# %%
cfg = li.load_config(CONFIG, SIZES[SIZE])
theory = theory_report(cfg, iters=40)
pd.Series({k: theory[k] for k in ("Delta", "delta", "L", "L_star", "regime", "T_f", "eta_max")})

# %% [markdown]
# ## One run
#
# Gradient descent from Q = 0 until the loss is below ε. `write=False` keeps everything in memory
# (`li.run(cfg, out="runs/x")` writes a run directory instead).

# %%
run = li.run(cfg, write=False)
run

# %% [markdown]
# The fast phase, where every Attn_k rises while the loss falls little, ends at T_1 (dotted); the slow
# phase creeps to T_ε (dashed).

# %%
plots.training_curves(run)

# %%
run.attention().tail()  # Attn_k, one column per query feature k, one row per recorded step

# %% [markdown]
# ## One prompt's attention
#
# A prompt drawn from the run's setting: the query's attention over the 50 context tokens, coloured
# by each token's feature. The trained model puts its weight on the tokens of the query's own feature.

# %%
table = li.attention_map(run, prompt=0)
table.groupby("feature")["attention"].sum().rename("attention mass")

# %%
plots.attention_map(run, prompt=0)

# %% [markdown]
# ## The same setting below the threshold
#
# At L = 1 < L* the run is in the flat regime. `li.diff` says what differs and sets the summaries
# side by side; `plots.compare` overlays the two runs, labelled by the differing keys.

# %%
flat = li.run(cfg, ["task.L=1"], write=False)
li.diff(run, flat)

# %%
plots.compare([run, flat], metric="loss")

# %%
plots.compare([run, flat], metric="attn_min")
