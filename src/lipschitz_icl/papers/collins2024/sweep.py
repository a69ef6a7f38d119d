"""The one sweep every Collins claim reads: the reduced softmax model and trained linear attention on
inputs uniform on the sphere S^{d-1} (features.kind=sphere, sampled engine, Adam on fresh prompts,
Q^(0) = 0), along three axes through one base point (L, then the label noise tau, then the context
size N), over seeds that redraw the training prompts, the functions and the test prompts.

Each run is a run of the engine (out/runs/collins_<axis>/...; its metrics.parquet holds ||Q|| and the
window per logged step); ``measure`` reads its last logged geometry and its errors on unseen prompts:
the model's, and those of Nadaraya-Watson with one fixed bandwidth h* picked on training prompts."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from ...api import Run
from ...baselines import nadaraya_watson
from ...config import Config
from ...engines import draw_prompts, make_generator
from ...evaluate import load_model
from ...experiments.runner import Context, base_config, run_group
from ...problem import build_inputs
from ...tasks import make_task

D = 3  # inputs on S^{d-1}, d = 3 (m = 2 intrinsic dimensions)
BASE = {"L": 4.0, "tau": 0.5, "N": 32}  # the point the three axes go through
AXES = {  # axis -> its values (TINY/QUICK/FULL take ``collins_grid`` of them, ends included)
    "L": [1.0, 2.0, 4.0, 8.0, 16.0],
    "tau": [0.1, 0.25, 0.5, 1.0, 2.0],
    "N": [8, 16, 32, 64, 128],
}
MODELS = {"softmax": "reduced", "linear": "linear_attention"}  # this suite's name -> model.kind
LR = 0.1  # Adam step size
NW_BANDWIDTHS = tuple(float(h) for h in np.geomspace(0.05, 3.0, 41))  # the fixed bandwidths h* is picked from
KIND = "relu_net"  # a nonlinear, rotation-invariant task class (its law is invariant under rotations of x)
# the training prompts' normals, functions and labels made in float32, the model trained in float64: 1.5-1.7x less CPU
# a run with the draws, 1.3-1.7x less again with the labels; at full size every verdict is that of float64 draws, at
# the quick size CL6 (a reading at its tolerance) moved from inconclusive to supported (docs/PERFORMANCE.md, "Where
# the Collins suite's time goes")
DRAW_DTYPE = "float32"


def collins_config(ctx: Context, model: str, seed: int, L: float, tau: float, N: int) -> Config:
    """One run of the sweep (seed: the run's seed, which redraws every random stream)."""
    S = ctx.sizes
    return base_config([
        "features.kind=sphere", f"features.d={D}", f"prompt.N={int(N)}", f"task.kind={KIND}", f"task.L={L:g}",
        f"task.label_noise={tau:g}", f"model.kind={MODELS[model]}", "engine.kind=sampled", "engine.resample=true",
        f"engine.batch={S.batch}", f"prompt.draw_dtype={DRAW_DTYPE}", "train.optimizer=adam", f"train.lr={LR:g}",
        f"train.steps={S.collins_steps}",
        f"train.log_every={max(1, S.collins_steps // 10)}", "train.eps=1e-9", f"eval.functions={S.test}",
        f"seed={seed}", f"name={model}-L{L:g}-tau{tau:g}-N{int(N)}-s{seed}",
    ])


def axis_values(ctx: Context, axis: str) -> list[float]:
    """The values of ``axis`` at the context's size (``collins_grid`` of them, spread, ends included)."""
    values, n = AXES[axis], ctx.sizes.collins_grid
    idx = np.unique(np.round(np.linspace(0, len(values) - 1, max(n, 2))).astype(int))
    return [values[i] for i in idx]


def seeds(ctx: Context) -> list[int]:
    """The seeds of every setting: ``collins_seeds`` of them from the context's seed."""
    return [ctx.seed + i for i in range(ctx.sizes.collins_seeds)]


def sweep(ctx: Context) -> tuple[pd.DataFrame, list[Run]]:
    """Train every (model, axis, value, seed) once (the base point is shared by the three axes) and measure it:
    one row per (run, axis it lies on) with the columns model, seed, axis, value, L, tau, N, run, run_dir (relative
    to the output directory) and ``measure``'s."""
    points = [(m, s, axis, v) for axis in AXES for m in MODELS for v in axis_values(ctx, axis) for s in seeds(ctx)]
    configs: dict[str, Config] = {}
    for m, s, axis, v in points:
        cfg = collins_config(ctx, m, s, **{**BASE, axis: v})
        configs.setdefault(cfg.name, cfg)
    runs = dict(zip(configs, run_group(ctx, "collins", list(configs.values()), "Collins: L, tau and N axes"),
                    strict=True))
    run_dirs = {name: str(run.dir.relative_to(ctx.out)) for name, run in runs.items() if run.dir is not None}
    measured = {name: measure(run) for name, run in runs.items()}
    rows = []
    for m, s, axis, v in points:
        setting = {**BASE, axis: v}
        name = collins_config(ctx, m, s, **setting).name
        rows.append({"model": m, "seed": s, "axis": axis, "value": v, **setting, "run": name,
                     "run_dir": run_dirs.get(name, ""), **measured[name]})
    return pd.DataFrame(rows), list(runs.values())


def _last(geometry: pd.DataFrame, name: str) -> float:
    if name not in geometry or geometry.empty:
        return math.nan
    return float(geometry[name].iloc[-1])


@torch.no_grad()
def measure(run: Run) -> dict[str, float]:
    """The last logged geometry of ``run`` (||Q||_2, the eigenvalue ratio of sym(Q), the window r_1/2 and
    n_eff) and, on ``eval.functions`` unseen prompts, the error 1/2 (y_hat - f(x_q))^2 of the model and of
    Nadaraya-Watson with the fixed bandwidth h* that has the lowest error on as many training prompts."""
    cfg = run.config
    geometry = run.geometry()
    fs, task = build_inputs(cfg), make_task(cfg.task.kind, cfg.task.L, cfg.features.d, cfg.task.params)
    N, P, tau = cfg.prompt.N, cfg.eval.functions, cfg.task.label_noise
    train = draw_prompts(fs, task, N, P, tau, make_generator(cfg.seed, "collins:nw-train"))
    test = draw_prompts(fs, task, N, P, tau, make_generator(cfg.seed, "collins:test"))
    h_star = best_fixed_bandwidth(train.x_ctx, train.y[:, :-1], train.x[:, -1], train.target)
    model = load_model(run)
    dt = next(model.parameters()).dtype
    y_hat = model(test.x_ctx.to(dt), test.y[:, :-1].to(dt), test.x[:, -1].to(dt))[0].double()
    nw = nadaraya_watson(test.x_ctx, test.y[:, :-1], test.x[:, -1], bandwidth=h_star)
    return {"Q_norm": _last(geometry, "Q_norm_2"), "eig_ratio": _last(geometry, "Q_eig_ratio"),
            "window": _last(geometry, "window"), "n_eff": _last(geometry, "n_eff"),
            "error": float(0.5 * (y_hat - test.target).square().mean()),
            "nw_error": float(0.5 * (nw - test.target).square().mean()), "nw_bandwidth": h_star}


def best_fixed_bandwidth(x_ctx: torch.Tensor, y_ctx: torch.Tensor, x_q: torch.Tensor, target: torch.Tensor,
                         grid: tuple[float, ...] = NW_BANDWIDTHS) -> float:
    """h* = argmin over ``grid`` of the mean error 1/2 (NW_h(x_q) - f(x_q))^2 on these (training) prompts: one
    bandwidth for every prompt (the query is not in its context, so each prediction leaves its point out)."""
    errors = [float((nadaraya_watson(x_ctx, y_ctx, x_q, bandwidth=h) - target).square().mean()) for h in grid]
    return grid[int(np.argmin(errors))]
