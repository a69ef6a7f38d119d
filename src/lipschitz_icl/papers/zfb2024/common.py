"""The Zhang-Frei-Bartlett settings, their initialisation and the training loops the three claims share.

A setting is (Lambda, N): x ~ N(0, Lambda) in R^D, w ~ N(0, I_D), y = w^T x without noise, N context pairs.
The model is one linear self-attention layer in the merged form (one head: value scalar u = W^PV_22 and the
key-query block U11 = W^KQ_11; Gamma = u U11^T, yh = x_q^T Gamma h, h = (1/N) sum_n y_n x_n), or the
residual-stream ``full`` form with every block of W^PV, W^KQ free. The paper's initialisation (its Assumption,
notes [recall]): W^PV(0) = sigma [[0, 0], [0, 1]], W^KQ(0) = sigma [[Theta Theta^T, 0], [0, 0]] with
||Theta Theta^T||_F = 1; here Theta is a D x D Gaussian matrix drawn from the seed, and sigma = SIGMA.
Gradient flow is gradient descent with a small step on the exact (population) engine, objective (1/2) MSE."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ...linattn import Form, GaussianTask, optimal_gamma, single_error, train_linear
from ...linattn.task import rotated as rotated_cov
from ...rng import make_generator

DTYPE = torch.float64
SIGMA = 0.01  # sigma, the paper's small initial scale (W^PV_22(0) = ||W^KQ_11(0)||_F = sigma)
MERGED = Form("merged", heads=1)
FULL = Form("full", heads=1)
GAMMA = Form("gamma")


@dataclass(frozen=True)
class Setting:
    """One training distribution: ``eigs`` (Lambda's eigenvalues), N, and whether Lambda is rotated off the axes."""

    name: str
    eigs: tuple[float, ...]
    n_context: int  # N
    rotated: bool = False

    @property
    def dim(self) -> int:
        return len(self.eigs)

    @property
    def isotropic(self) -> bool:
        return len(set(self.eigs)) == 1

    def task(self) -> GaussianTask:
        """The training task: Lambda = diag(eigs), or Q diag(eigs) Q^T for a fixed random rotation Q."""
        lam = torch.diag(torch.tensor(self.eigs, dtype=DTYPE))
        if self.rotated:
            lam = rotated_cov(self.eigs, 7, "zfb:rotation")
            lam = (lam + lam.T) / 2
        return GaussianTask.make(lam, self.n_context)


ISO3 = Setting("iso D=3 N=10", (1.0, 1.0, 1.0), 10)
ANISO3 = Setting("aniso D=3 N=10", (2.0, 1.0, 0.5), 10)
ANISO4R = Setting("aniso-rot D=4 N=20", (1.6, 1.2, 0.8, 0.4), 20, rotated=True)
ISO5 = Setting("iso D=5 N=20", (1.0,) * 5, 20)
ISO8 = Setting("iso D=8 N=40", (1.0,) * 8, 40)
ANISO5 = Setting("aniso D=5 N=8", (2.0, 1.4, 1.0, 0.7, 0.5), 8)


def settings_for(level: str) -> list[Setting]:
    """The settings of ZF1 and ZF2 at a size: isotropic and anisotropic (diagonal and rotated) Lambda, a few D, N."""
    if level == "tiny":
        return [ISO3, ANISO3]
    if level == "quick":
        return [ISO3, ANISO3, ANISO4R, ISO5]
    return [ISO3, ANISO3, ANISO4R, ISO5, ISO8, ANISO5]


def seeds_for(level: str, base: int = 0) -> list[int]:
    """The init-direction seeds (each draws its own Theta): tiny 2, quick 5, full 8."""
    return [base + s for s in range({"tiny": 2, "quick": 5}.get(level, 8))]


def theta_block(dim: int, seed: int) -> torch.Tensor:
    """Theta Theta^T / ||Theta Theta^T||_F for a Gaussian D x D Theta drawn from ``seed``."""
    theta = torch.randn(dim, dim, generator=make_generator(seed, "zfb:theta"), dtype=DTYPE)
    block = theta @ theta.T
    return block / block.norm()


def zfb_init(dim: int, seed: int, sigma: float = SIGMA) -> dict[str, torch.Tensor]:
    """The paper's initialisation in the merged form: u = sigma, U11 = sigma Theta Theta^T."""
    return {"v": torch.tensor([sigma], dtype=DTYPE), "W": sigma * theta_block(dim, seed)[None]}


def zfb_full_init(dim: int, seed: int, sigma: float = SIGMA) -> dict[str, torch.Tensor]:
    """The same initialisation in the residual-stream form: every other block of W^PV, W^KQ zero."""
    pv = torch.zeros(1, dim + 1, dim + 1, dtype=DTYPE)
    kq = torch.zeros(1, dim + 1, dim + 1, dtype=DTYPE)
    pv[0, dim, dim] = sigma
    kq[0, :dim, :dim] = sigma * theta_block(dim, seed)
    return {"PV": pv, "KQ": kq}


def balanced_at(gamma: torch.Tensor) -> dict[str, torch.Tensor]:
    """Merged parameters that compute ``gamma`` with balance u = ||U11||_F (the paper's limit point)."""
    c = math.sqrt(float(gamma.norm()))  # c = ||Gamma||_F^{1/2}
    return {"v": torch.tensor([c], dtype=DTYPE), "W": (gamma.T / c)[None].clone()}


def base_lr(task: GaussianTask) -> float:
    """A step inside stability: 1/2 over the largest curvature 2 ||Gamma*||_F lambda_max(Lambda) lambda_max(C)
    of the merged loss at its optimum (C = E[h h^T])."""
    gamma = optimal_gamma(task)
    curv = (2 * float(gamma.norm()) * float(torch.linalg.eigvalsh(task.cov).max())
            * float(torch.linalg.eigvalsh(task.context_moment()).max()))
    return 0.5 / curv


def rel_distance(gamma: torch.Tensor, target: torch.Tensor) -> float:
    """||Gamma - Gamma*||_F / ||Gamma*||_F."""
    return float((gamma - target).norm() / target.norm())


@dataclass
class ExactRun:
    """A gradient-descent run on the exact engine, read every chunk: times, distances to Gamma*, excess losses."""

    setting: str
    seed: int
    t: list[float]
    rel: list[float]  # ||Gamma_t - Gamma*|| / ||Gamma*||
    excess: list[float]  # loss(Gamma_t) - L*
    gamma: torch.Tensor
    steps: int


def gradient_flow(setting: Setting, seed: int, budget: int, lr_factor: float = 1.0, form: Form = MERGED,
                  init: dict | None = None, stop_rel: float = 1e-8, chunk: int = 50) -> ExactRun:
    """Small-step GD on the exact engine from ``init`` (default: the paper's, direction ``seed``), read every
    ``chunk`` steps; stops when ||Gamma - Gamma*|| / ||Gamma*|| <= ``stop_rel`` or after ``budget`` steps."""
    task = setting.task()
    target, best = optimal_gamma(task), single_error(optimal_gamma(task), task)
    lr = base_lr(task) * lr_factor
    params = init if init is not None else zfb_init(setting.dim, seed)
    t, rel, excess, steps = [], [], [], 0
    while True:
        run = train_linear(form, task, lr=lr, steps=chunk, engine="exact", init=params, record_every=chunk)
        params, steps = run.params, steps + chunk
        t.append(steps * lr)
        rel.append(rel_distance(run.gamma, target))
        excess.append(run.final_exact - best)
        if rel[-1] <= stop_rel or steps >= budget:
            return ExactRun(setting.name, seed, t, rel, excess, run.gamma, steps)


def off_block_ratio(params: dict[str, torch.Tensor]) -> float:
    """The largest of the blocks the paper's init holds at zero and its proof shows stay zero (W^PV's y-row
    x-part u21, W^KQ's y-row and y-column), relative to ||W^KQ_11||_F."""
    pv, kq, d = params["PV"][0], params["KQ"][0], params["PV"].shape[-1] - 1
    off = max(float(pv[d, :d].norm()), float(kq[d, :].norm()), float(kq[:d, d].norm()))
    return off / float(kq[:d, :d].norm())


def full_gamma(params: dict[str, torch.Tensor]) -> torch.Tensor:
    """Gamma = u U11^T read from the full form's blocks (what it computes when the off blocks are zero)."""
    d = params["PV"].shape[-1] - 1
    return params["PV"][0, d, d] * params["KQ"][0, :d, :d].T


def full_run(setting: Setting, seed: int, steps: int, batch: int, chunk: int) -> dict:
    """The full residual-stream form trained on the sampled engine (fresh prompts each step) from the paper's
    init: lr base_lr for the first 2/3 of the steps, then a quarter of it; Gamma averaged over the last chunk
    records. Returns per-chunk distances and off-block ratios, and the final reading: the tail-averaged Gamma's
    distance and the off-block ratio averaged over the same tail."""
    task = setting.task()
    target, lr = optimal_gamma(task), base_lr(task)
    params = zfb_full_init(setting.dim, seed)
    n_chunks = max(steps // chunk, 1)
    rows, tail, tail_off = [], [], []
    for i in range(n_chunks):
        step_lr = lr if i < 2 * n_chunks // 3 or n_chunks < 3 else lr / 4
        run = train_linear(FULL, task, lr=step_lr, steps=chunk, engine="sampled", init=params,
                           seed=seed * 10007 + i, batch=batch, record_every=chunk)
        params = run.params
        gamma = full_gamma(params)
        rows.append({"step": (i + 1) * chunk, "rel": rel_distance(gamma, target), "off": off_block_ratio(params)})
        if i >= n_chunks - max(n_chunks // 4, 1):
            tail.append(gamma)
            tail_off.append(rows[-1]["off"])
    mean_gamma = torch.stack(tail).mean(0)
    return {"seed": seed, "curve": rows, "rel": rel_distance(mean_gamma, target),
            "off": float(np.mean(tail_off)), "x_rows_of_PV": float(params["PV"][0, :-1].abs().max())}


def settled_curve(values: list[float], tol: float = 1e-6) -> bool:
    """Whether a curve had stopped moving: its last value within ``tol`` (relative) of the value 10% earlier."""
    if len(values) < 2:
        return False
    back = values[max(len(values) - 1 - max(len(values) // 10, 1), 0)]
    return abs(values[-1] - back) <= tol * max(abs(back), 1e-300)


def log_slope(ms: list[float], errs: list[float]) -> float:
    """The log-log slope between the last two points of a curve."""
    return float(np.log(errs[-1] / errs[-2]) / np.log(ms[-1] / ms[-2]))
