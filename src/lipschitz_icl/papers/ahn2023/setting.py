"""The setting of the Ahn et al. suite: Gaussian prompts with an anisotropic, rotated Lambda, the sizes of each
level, the L-layer residual-stream model with every block free (built here from ``linattn.tokens.layer``: the
core's ``full`` form has one layer) and its training loop, and the readings (test error, commutator)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...linattn import GaussianTask
from ...linattn.task import DTYPE, rotated
from ...linattn.tokens import layer, tokens
from ...optim import PlainAdam
from ...rng import make_generator


@dataclass(frozen=True)
class AhnSizes:
    dim: int  # D
    n_context: int  # N
    layers: tuple[int, ...]  # L of AH1 (gd_layers)
    full_layers: tuple[int, ...]  # L of AH2 (the full model)
    seeds: int
    gd_steps: int  # gradient-descent steps of gd_layers (exact engine)
    draws: int  # context draws of the exact engine for L > 1
    full_steps: int  # Adam steps of the full model
    batch: int  # fresh prompts per step of the full model
    test: int  # held-out prompts per seed


AHN_SIZES = {
    "tiny": AhnSizes(3, 8, (1, 2), (1, 2), 2, 40, 64, 60, 64, 1024),
    "quick": AhnSizes(4, 16, (1, 2, 3), (1, 2), 5, 400, 512, 1200, 128, 8192),
    "full": AhnSizes(4, 16, (1, 2, 3, 4), (1, 2, 3), 8, 2000, 1024, 4000, 256, 32768),
}
GD_LR = 0.15  # gd_layers on Lambda with tr Lambda = D (the largest stable step is about 0.4 at L = 1)
FULL_LR = 0.01  # Adam, decayed linearly to 0
INIT = 0.01  # gd_layers' small random initialisation, every entry N(0, INIT^2)
FULL_INIT = 0.05  # the free stack's (Adam moves every entry at the same rate from any small scale)
HELD_FACTOR = 16  # the held-out quadrature has HELD_FACTOR x the training draws (its tails are heavy)


def anisotropic_cov(dim: int) -> torch.Tensor:
    """Lambda = U diag(D, D-1, ..., 1) U^T scaled to tr Lambda = D, U a fixed random rotation (so that
    commuting with Lambda is not being diagonal)."""
    eigs = torch.arange(dim, 0, -1, dtype=DTYPE)
    return rotated(eigs * dim / eigs.sum(), 1, "ahn:rotation")


def ahn_task(sizes: AhnSizes) -> GaussianTask:
    """x ~ N(0, Lambda) anisotropic, w ~ N(0, I_D), no label noise."""
    return GaussianTask.make(anisotropic_cov(sizes.dim), sizes.n_context)


def commutator(a: torch.Tensor, lam: torch.Tensor) -> float:
    """||A Lambda - Lambda A||_F / (||A||_F ||Lambda||_2): 0 when A commutes with Lambda (a preconditioner
    aligned with the covariance's eigenvectors); about 0.4 for a random Gaussian A at D = 4."""
    return float((a @ lam - lam @ a).norm() / (a.norm() * torch.linalg.matrix_norm(lam, 2)))


def test_prompts(task: GaussianTask, seed: int, n: int) -> tuple[torch.Tensor, ...]:
    """Held-out prompts of one seed (a stream no training reads)."""
    return task.draw(n, make_generator(seed, "ahn:test"))


def mse(pred: torch.Tensor, yq: torch.Tensor) -> float:
    return float(((pred - yq) ** 2).mean())


def stack_predict(params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor,
                  xq: torch.Tensor) -> torch.Tensor:
    """yh of L residual-stream layers (one head each, W^PV_l = PV[l], W^KQ_l = KQ[l], all blocks free), read
    from the query token's last entry."""
    z = tokens(x, y, xq)
    for pv, kq in zip(params["PV"], params["KQ"], strict=True):
        z = layer(z, [(pv, kq)])
    return z[:, -1, -1]


def train_stack(task: GaussianTask, layers: int, seed: int, steps: int, batch: int, lr: float = FULL_LR,
                init: dict[str, torch.Tensor] | None = None) -> tuple[dict[str, torch.Tensor], list[float]]:
    """Adam (step size ``lr`` decayed linearly to 0) on (1/2) the squared error of fresh prompts, from a small
    random init (or ``init``); returns the parameters and the batch loss every steps // 20 steps."""
    d = task.dim + 1
    gen = make_generator(seed, "ahn:full-init")
    params = init or {k: FULL_INIT * torch.randn(layers, d, d, generator=gen, dtype=DTYPE) for k in ("PV", "KQ")}
    params = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    opt, prompts, curve = PlainAdam(params.values(), lr), make_generator(seed, "ahn:full-prompts"), []
    for step in range(steps):
        x, y, xq, yq = task.draw(batch, prompts)
        loss = ((stack_predict(params, x, y, xq) - yq) ** 2).mean()
        if step % max(steps // 20, 1) == 0:
            curve.append(float(loss.detach()))
        opt.lr = lr * (1 - step / steps)
        opt.zero_grad()
        (0.5 * loss).backward()
        opt.step()
    return {k: v.detach() for k, v in params.items()}, curve
