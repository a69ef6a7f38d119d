"""Pieces the benchmark sections share: configs, a bare kernel step, per-step times of real runs."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from pathlib import Path

import torch

from ..api import prepare
from ..api import run as run_one
from ..batch import run_many
from ..config import Config, load_config
from ..engines.kernel_batch import KernelBatch

REPO_ROOT = Path(__file__).resolve().parents[3]  # the source checkout (src layout), when there is one
PACKAGE_PARENT = Path(__file__).resolve().parents[2]  # the directory that holds lipschitz_icl/


def child_env() -> dict[str, str]:
    """The environment for a child Python that must import this very copy of the package."""
    return {**os.environ, "PYTHONPATH": str(PACKAGE_PARENT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def config(overrides: list[str], device: str = "cpu") -> Config:
    """The defaults (the quickstart's setting: K = 5, d = 5, N = 50, linear, L = 2) plus overrides,
    on ``device``. A short step budget by default: the benchmarks time steps, and the budget bounds
    the memory the recorder may need (which the config's size check counts)."""
    return load_config(None, ["train.steps=100", f"engine.device={device}", *overrides])


def synced(fn: Callable[[], object], device: str) -> Callable[[], None]:
    """``fn`` followed, on CUDA, by a wait for the device: what a timer must measure (kernels run
    asynchronously; a step that reads the loss back waits anyway)."""
    if device != "cuda":
        return fn

    def call() -> None:
        fn()
        torch.cuda.synchronize()

    return call


def kernel_step(cfg: Config):
    """One bare gradient step of the kernel engine (what the trainer does per step, minus the
    bookkeeping): loss, attention and gradient, the host read of the losses and Attn_k, the
    update. Fused or not as ``cfg.engine.fused`` says."""
    _, engine, _ = prepare(cfg)
    batch = KernelBatch([engine.spec], [cfg.train.lr])

    def step() -> None:
        batch.step(False).summary_table().tolist()
        batch.update()

    return step, batch


def run_step_time(cfg: Config) -> tuple[float, float]:
    """Wall seconds per gradient step of a whole run (training loop, recorder on), and its steps."""
    result = run_one(cfg, write=False)
    steps = result.summary["steps"] + 1  # forward/backward passes, including the last one
    return result.summary["wall_s"] / steps, steps


def kernel_draw_losses(cfg: Config, M: torch.Tensor | None = None) -> torch.Tensor:
    """Per-draw losses 1/2 sum_k p_k (a - e_k)^T Sigma (a - e_k) of the kernel engine's B count
    draws at scores M (default: the initial ones): their spread gives the estimator's SE."""
    _, engine, _ = prepare(cfg)
    spec = engine.spec
    M = spec.M0 if M is None else M
    c = spec.counts.double()
    a = torch.softmax(torch.log(c).unsqueeze(0) + M.double().to(c.device).unsqueeze(1), dim=-1)  # (k, b, n)
    err = a - torch.eye(spec.K, dtype=torch.float64, device=c.device).unsqueeze(1)
    quad = torch.einsum("kbn,nm,kbm->kb", err, spec.sigma.double(), err)
    return 0.5 * (spec.p.double().unsqueeze(1) * quad).sum(0)


def standard_error(x: torch.Tensor) -> float:
    return float(x.double().std() / math.sqrt(x.numel()))


def q_from_scores(V: torch.Tensor, M: torch.Tensor) -> torch.Tensor:
    """A Q with V^T Q^T V = M (V: d x K, full column rank), on V's device."""
    V = V.double()
    Vp = torch.linalg.pinv(V)  # (K, d)
    return Vp.T @ M.double().to(V.device).T @ Vp


def together_and_alone(cfgs: list[Config]) -> tuple[list, list, list, float, float]:
    """``cfgs`` trained by ``run_many`` (together where they can be), then one after another by ``api.run``, then by
    ``run_many`` again: (first runs together, runs alone, second runs together, seconds alone, seconds together as
    the mean of the two, to average out load on a shared machine)."""
    t0 = time.perf_counter()
    first = run_many(cfgs)
    t_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    alone = [run_one(c, write=False) for c in cfgs]
    t_alone = time.perf_counter() - t0
    t0 = time.perf_counter()
    second = run_many(cfgs)
    return first, alone, second, t_alone, (t_first + time.perf_counter() - t0) / 2


def same_run(a, b, params: bool = False) -> bool:
    """Whether two Runs have equal metrics and summaries (but ``wall_s``), and with ``params`` equal parameters."""
    sa = {k: v for k, v in a.summary.items() if k != "wall_s"}
    sb = {k: v for k, v in b.summary.items() if k != "wall_s"}
    same_params = not params or (a.params.keys() == b.params.keys() and all(a.params[k].equal(b.params[k])
                                                                            for k in a.params))
    return a.metrics.equals(b.metrics) and sa == sb and same_params
