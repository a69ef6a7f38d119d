"""The population optimum of the kernel engine's loss over the score matrix M (K x K).

The kernel engine's loss (label noise tau, counts c from the engine's draws)

    loss(M) = 1/2 sum_k p_k E_c[(a - e_k)^T Sigma (a - e_k) + tau^2 sum_n a_n^2 / c_n],
    a_n = c_n e^{M_kn} / sum_m c_m e^{M_km},

is minimised here over M to convergence (scipy's BFGS, float64, a gradient-norm tolerance;
L-BFGS-B's Fortran calls into a multi-threaded BLAS cost milliseconds each on a loaded machine),
not by a run with a step budget. Without label noise the infimum is
at infinity (a = e_k), so the optimum is finite only for tau > 0.

Every built-in class is f = L g with g independent of L, so Sigma(L) = L^2 Sigma(1) and the
optimum depends on (L, tau) only through L / tau. ``attention_crossing`` bisects on L for the
L_tau at which min_k Attn_k at the optimum crosses a level (1/2 by default).

The optimum over all K x K matrices is the optimum over Q when V has full column rank (every M
is then V^T Q^T V for some Q); a feature set without it is refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import minimize

from .engines.kernel_grad import kernel_loss_grad
from .engines.kernel_spec import kernel_spec
from .problem import Problem


@dataclass(frozen=True)
class Optimum:
    M: torch.Tensor  # (K, K) scores M_kn at the optimum (float64)
    attn_self: list[float]  # Attn_k at the optimum
    min_attn: float  # min_k Attn_k
    loss: float  # the population loss there
    grad_norm: float  # ||d loss / dM|| at the returned M
    iterations: int  # BFGS iterations
    converged: bool  # grad_norm <= tol


class ScoreObjective:
    """The kernel engine's loss and its closed-form gradient in M, at any (L, tau), float64.

    Built once from a problem: Sigma(1) = Sigma(L) / L^2, the counts of the engine's draws (or
    N p for mean-field counts) and p."""

    def __init__(self, problem: Problem) -> None:
        V = problem.features.V.double()
        if torch.linalg.matrix_rank(V) < V.shape[1]:
            raise ValueError("the optimum over M needs features with full column rank (every M = V^T Q^T V); "
                             f"got rank {int(torch.linalg.matrix_rank(V))} < K = {V.shape[1]}")
        spec = kernel_spec(problem)
        self.K = spec.K
        self.sigma1 = spec.sigma.double().cpu() / problem.L**2  # Sigma at L = 1
        self.counts = spec.counts.double().cpu().T.contiguous()  # (K, B): c_n per draw
        self.inv_c = 1.0 / self.counts.clamp(min=1.0)
        self.weights = None if spec.weights is None else spec.weights.double().cpu()  # exact counts: their law
        self.p = spec.p.double().cpu()
        self.tests1 = {name: s.double().cpu() / problem.L**2 for name, s in spec.tests.items()}

    def evaluate(self, M: torch.Tensor, L: float, tau: float, need_grad: bool = True,
                 tests: bool = False):
        """kernel_loss_grad at scores M for Lipschitz constant L and label noise tau (one run)."""
        tau2 = torch.full((1,), tau**2, dtype=torch.float64) if tau > 0 else None
        test_sigmas = {k: (L**2 * s).unsqueeze(0) for k, s in self.tests1.items()} if tests else None
        return kernel_loss_grad(
            M.unsqueeze(0), self.counts.unsqueeze(0), self.inv_c.unsqueeze(0) if tau2 is not None else None,
            (L**2 * self.sigma1).unsqueeze(0), self.p.unsqueeze(0), tau2, test_sigmas, need_grad, full_attn=False,
            weights=None if self.weights is None else self.weights.unsqueeze(0),
        )

    def initial_loss(self, L: float = 1.0) -> float:
        """The loss at M = 0 (uniform scores: attention proportional to the counts), without label noise."""
        return float(self.evaluate(torch.zeros(self.K, self.K, dtype=torch.float64), L, 0.0, False).loss[0])


def population_optimum(objective: ScoreObjective, L: float, tau: float, M0: torch.Tensor | None = None,
                       tol: float = 1e-9, max_iter: int = 2000) -> Optimum:
    """Minimise the loss over M at (L, tau) by BFGS (scipy) from M0 (default 0) until
    ||grad|| <= tol * (L^2 + tau^2) (the loss's scale) or max_iter iterations."""
    if tau <= 0:
        raise ValueError(f"the population optimum is finite only with label noise: tau must be > 0 (got {tau})")
    K = objective.K
    scale = L**2 + tau**2
    x0 = np.zeros(K * K) if M0 is None else M0.detach().double().cpu().reshape(-1).numpy().copy()

    def loss_and_grad(x: np.ndarray) -> tuple[float, np.ndarray]:
        out = objective.evaluate(torch.from_numpy(x).view(K, K), L, tau)
        return float(out.loss[0]) / scale, out.grad[0].reshape(-1).numpy() / scale

    iterations = 0
    for _ in range(4):  # BFGS (dense K^2 x K^2: small) stops on lost precision too; restart from where it ended
        res = minimize(loss_and_grad, x0, jac=True, method="BFGS", options={"maxiter": max_iter, "gtol": tol / 10})
        iterations += int(res.nit)
        x0 = res.x
        final = objective.evaluate(torch.from_numpy(x0.copy()).view(K, K), L, tau)
        gnorm = float(final.grad[0].norm())
        if gnorm <= tol * scale or iterations >= max_iter:
            break
    attn = final.attn_self[0].tolist()
    M = torch.from_numpy(x0.copy()).view(K, K)
    return Optimum(M, attn, min(attn), float(final.loss[0]), gnorm, iterations, gnorm <= tol * scale)


@dataclass(frozen=True)
class Crossing:
    L: float | None  # L_tau: min_k Attn_k at the optimum equals the level (None when not bracketed)
    lo: float  # the final bracket [lo, hi] of the bisection on log L
    hi: float
    min_attn_lo: float  # min_k Attn_k at the optimum at the bracket's ends
    min_attn_hi: float
    all_converged: bool  # every optimum of the bisection met the gradient tolerance
    history: tuple[tuple[float, float], ...] = ()  # (L, min_k Attn_k at the optimum) at every L solved


def attention_crossing(objective: ScoreObjective, tau: float, L_lo: float, L_hi: float, level: float = 0.5,
                       iters: int = 30, tol: float = 1e-9) -> Crossing:
    """Bisect on log L in [L_lo, L_hi] for the L at which min_k Attn_k at the population optimum
    (label noise tau) crosses ``level`` (it rises with L / tau). Each optimum starts from the last
    one at the nearer end of the bracket. L is None when the level is not bracketed."""
    lo, hi = population_optimum(objective, L_lo, tau, tol=tol), population_optimum(objective, L_hi, tau, tol=tol)
    ok = lo.converged and hi.converged
    history = [(L_lo, lo.min_attn), (L_hi, hi.min_attn)]
    if not (lo.min_attn < level <= hi.min_attn):
        return Crossing(None, L_lo, L_hi, lo.min_attn, hi.min_attn, ok, tuple(history))
    a, b = L_lo, L_hi
    for _ in range(iters):
        mid = math.sqrt(a * b)
        start = lo.M if abs(math.log(mid / a)) <= abs(math.log(b / mid)) else hi.M
        opt = population_optimum(objective, mid, tau, M0=start, tol=tol)
        ok = ok and opt.converged
        history.append((mid, opt.min_attn))
        if opt.min_attn < level:
            a, lo = mid, opt
        else:
            b, hi = mid, opt
    # interpolate in log L between the bracket's ends
    frac = (level - lo.min_attn) / (hi.min_attn - lo.min_attn) if hi.min_attn > lo.min_attn else 0.5
    L_cross = math.exp(math.log(a) + frac * (math.log(b) - math.log(a)))
    return Crossing(L_cross, a, b, lo.min_attn, hi.min_attn, ok, tuple(sorted(history)))
