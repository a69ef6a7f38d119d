"""The theory's quantities for a problem: Delta, delta, the threshold L* and the regime.

    Delta  = min_{k != n} ||v_k - v_n||
    delta  = min_{k != n} sqrt(E_f[(f(v_k) - f(v_n))^2]) / (L ||v_k - v_n||)
    L*     = c / (Delta delta)
    regime = flat if L < L*, sharp if L > L*, near-threshold if |L / L* - 1| < band
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from .problem import Problem
from .tasks import KernelEstimate


@dataclass(frozen=True)
class Theory:
    Delta: float  # Δ
    delta: float  # δ
    delta_se: float  # standard error of δ (0 when Sigma is exact)
    L: float
    L_star: float  # L*
    regime: str

    def as_dict(self) -> dict:
        return asdict(self)


def nondegeneracy(kernel: KernelEstimate, V: torch.Tensor, L: float) -> tuple[float, float]:
    """delta and its standard error, from Sigma (or the Monte-Carlo values behind it)."""
    S = kernel.sigma.double()
    K = S.shape[0]
    dist = torch.cdist(V.T.double(), V.T.double())
    diag = torch.diagonal(S)
    msd = (diag.unsqueeze(0) + diag.unsqueeze(1) - 2 * S).clamp(min=0)  # E_f[(f(v_k) - f(v_n))^2]
    off = ~torch.eye(K, dtype=torch.bool)
    ratio = torch.full_like(S, math.inf)
    ratio[off] = msd[off].sqrt() / (L * dist[off])
    idx = int(torch.argmin(ratio))
    k, n = divmod(idx, K)
    delta = float(ratio[k, n])
    if kernel.F is None or delta == 0:
        return delta, 0.0
    sq = (kernel.F[:, k] - kernel.F[:, n]).double().square()
    se_msd = float(sq.std() / math.sqrt(sq.shape[0]))
    # delta method: d sqrt(m) = dm / (2 sqrt(m))
    return delta, se_msd / (2 * math.sqrt(float(msd[k, n]))) / (L * float(dist[k, n]))


def threshold(Delta: float, delta: float, c: float = 1.0) -> float:
    """L* = c / (Delta delta)."""
    return c / (Delta * delta) if Delta * delta > 0 else math.inf


def regime(L: float, L_star: float, band: float = 0.1) -> str:
    if math.isfinite(L_star) and abs(L / L_star - 1.0) < band:
        return "near-threshold"
    return "flat" if L < L_star else "sharp"


def theory_of(problem: Problem) -> Theory:
    cfg = problem.config
    Delta = problem.features.delta_sep
    delta, se = nondegeneracy(problem.kernel, problem.features.V, problem.L)
    L_star = threshold(Delta, delta, cfg.theory.c)
    return Theory(Delta, delta, se, problem.L, L_star, regime(problem.L, L_star, cfg.theory.band))
