"""A vectorised anchor for the sweep benchmark: the quickstart's kernel-engine runs trained by one
hand-written loop, ``torch.func.vmap`` over the runs of ``torch.func.grad_and_value`` of one run's
population loss, with the toolkit's stopping rules and nothing else (no recorder, no files, no
test errors). It is what a strong engineer writes in an afternoon; the toolkit's ``sweep`` is timed
against it (``sections/sweep_scale``).

Inputs are drawn as the toolkit draws them, so the two agree run for run: orthonormal features
(G = V^T V = I), the linear class's Sigma = (L^2 / d) I, uniform p, Q^(0) = 0 (M^(0) = 0), and the
context counts of the run's own ``counts`` stream (``engines.kernel_spec.draw_counts``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..engines.kernel import kernel_loss
from ..engines.kernel_spec import draw_counts
from ..features import FeatureSet
from ..rng import make_generator


@dataclass(frozen=True)
class AnchorRun:
    """One run of the anchor's workload: its Lipschitz constant L, step size eta and seed."""

    L: float
    lr: float
    seed: int


@dataclass(frozen=True)
class AnchorSetting:
    """What every run shares: K features in d = K dimensions, N context tokens, B count draws, the
    step budget, eps (absolute) and the divergence factor."""

    K: int = 5
    N: int = 50
    draws: int = 32
    steps: int = 300
    eps: float = 1e-3
    diverge_factor: float = 1e4


def run_loss(M: torch.Tensor, counts: torch.Tensor, sigma: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """One run's population loss, the kernel engine's autograd reference (``engines.kernel.kernel_loss``):
    M (K, K), counts (B, K), Sigma (K, K), p (K,)."""
    return kernel_loss(M, counts, sigma, p)[0]


def anchor_inputs(runs: list[AnchorRun], s: AnchorSetting) -> tuple[torch.Tensor, ...]:
    """(counts (R, B, K), Sigma (R, K, K), p (R, K), eta (R,)) as the toolkit draws them."""
    eye = torch.eye(s.K, dtype=torch.float64)
    p = torch.full((s.K,), 1.0 / s.K, dtype=torch.float64)
    fs = FeatureSet(eye, p, 0.0)
    counts = torch.stack([draw_counts(fs, s.N, s.draws, make_generator(r.seed, "counts")) for r in runs])
    sigma = torch.stack([(r.L**2 / s.K) * eye for r in runs])  # linear class: (L^2 / d) G, d = K
    return counts, sigma, p.expand(len(runs), s.K).contiguous(), torch.tensor([r.lr for r in runs],
                                                                               dtype=torch.float64)


def train_anchor(runs: list[AnchorRun], s: AnchorSetting) -> list[dict]:
    """Train every run by gradient descent (M <- M - eta dL/dM) until its loss is <= eps (converged),
    not finite or above diverge_factor times its initial loss (diverged), or its budget is spent;
    finished runs leave the batch. One row per run: status, steps, T_eps, final_loss."""
    counts, sigma, p, lr = anchor_inputs(runs, s)
    step_fn = torch.func.vmap(torch.func.grad_and_value(run_loss))
    M = torch.zeros(len(runs), s.K, s.K, dtype=torch.float64)
    alive = list(range(len(runs)))
    rows: list[dict] = [{} for _ in runs]
    loss_0 = [math.inf] * len(runs)
    last = [None] * len(runs)
    for step in range(s.steps + 1):
        grad, loss = step_fn(M, counts, sigma, p)
        keep = []
        for j, (i, value) in enumerate(zip(alive, loss.tolist(), strict=True)):
            if step == 0:
                loss_0[i] = max(value, 1e-300) if math.isfinite(value) else math.inf
            if not math.isfinite(value) or value > s.diverge_factor * loss_0[i]:
                rows[i] = {"status": "diverged", "steps": step, "T_eps": None, "final_loss": last[i]}
                continue
            last[i] = value
            if value <= s.eps:
                rows[i] = {"status": "trivial" if step == 0 else "converged", "steps": step, "T_eps": step,
                           "final_loss": value}
            elif step == s.steps:
                rows[i] = {"status": "budget", "steps": step, "T_eps": None, "final_loss": value}
            else:
                keep.append(j)
        if len(keep) < len(alive):
            idx = torch.tensor(keep, dtype=torch.long)
            M, grad, counts, sigma, p, lr = (t.index_select(0, idx) for t in (M, grad, counts, sigma, p, lr))
            alive = [alive[j] for j in keep]
        if not alive:
            break
        M = M - lr.view(-1, 1, 1) * grad
    return rows


def step_flops(s: AnchorSetting) -> float:
    """Floating-point operations of one run's step, forward and backward, counted on the closed form:
    per query k and draw b the logits and softmax (about 5 K), the two products with Sigma of the loss
    and of its gradient (2 x 2 K^2) and the softmax backward (about 4 K)."""
    return float(s.K * s.draws * (4 * s.K**2 + 9 * s.K))
