"""The asymptotic theory of Lu et al. (PNAS 2025): e_ICL and e_IDG of the ridge-fitted linear attention in the limit
d -> infinity at fixed alpha = N/d, kappa = k/d, tau = n/d^2, label-noise variance rho and ridge lambda.

Reimplemented from the authors' ``theory_runs/common.py`` (github mletey/incontext-cleanup @ c690222):

- x* = (1 + rho)/alpha;  M_kappa(x) = 2 / ((x + 1 - 1/kappa) + sqrt((x + 1 - 1/kappa)^2 + 4x/kappa)), the Stieltjes
  transform of a Wishart (Marchenko-Pastur) law of ratio kappa at -x (``stieltjes``; kappa = inf: 1/(1 + x)).
- ridgeless (lambda -> 0): ``ridgeless_icl`` (two branches, tau < 1 and tau > 1; it diverges at tau = 1, the
  sample-wise double descent) and ``ridgeless_idg``.
- ridge lambda > 0: eps > 0 solves 1 - tau + tau lambda/eps - eps S(eps + x*) = 0 (``ridge_eps``), then
  ``ridge_icl``. The authors take the smallest positive root of scipy's fsolve from 100 starts in [1e-4, 10]; here
  the root is bracketed on a log grid and polished by brentq (same root, checked in the tests).

Errors include the label noise (their minimum is rho)."""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

INF = math.inf


def stieltjes(x: float, kappa: float) -> float:
    """M_kappa(x) (the authors' M_kappa and S_Wishart(x, 1, kappa)); kappa = inf gives 1/(1 + x)."""
    if math.isinf(kappa):
        return 1.0 / (1.0 + x)
    b = x + 1 - 1 / kappa
    return 2.0 / (b + math.sqrt(b * b + 4 * x / kappa))


def stieltjes_prime(x: float, kappa: float) -> float:
    """dM_kappa/dx (the authors' S_Wishart_derivative)."""
    s = stieltjes(x, kappa)
    if math.isinf(kappa):
        return -s * s
    return -0.5 * s * s * (1 + (x + 1 + 1 / kappa) / math.sqrt((x + 1 - 1 / kappa) ** 2 + 4 * x / kappa))


def ridgeless_icl(alpha: float, kappa: float, tau: float, rho: float) -> float:
    """e_ICL at lambda -> 0 (the authors' ridgeless_icl); tau = 1 is a pole."""
    xs = (1 + rho) / alpha  # x*
    ms = stieltjes(xs, kappa)  # m*
    mu = xs * stieltjes(xs, kappa / tau)  # mu*
    if tau < 1:
        return (tau * (1 + xs) / (1 - tau) * (1 - tau * (1 - mu) ** 2 - (xs - rho) / xs * mu)
                - 2 * tau * (1 - mu) + rho + 1)
    ks = 1.0 if math.isinf(kappa) else 1 / (1 - kappa * (ms / (kappa + ms)) ** 2)  # k*
    return ((ks - 1 / (tau - 1)) * (1 + xs) * (xs * ms) ** 2 + (3 - 2 * tau) / (tau - 1) * ms * xs ** 2
            + ((1 + rho) / (tau - 1) * ms + 1) * xs + rho * ms / (tau - 1) + rho)


def ridgeless_idg(alpha: float, kappa: float, tau: float, rho: float) -> float:
    """e_IDG (tasks from the pretraining pool) at lambda -> 0 (the authors' ridgeless_idg)."""
    if math.isinf(kappa):  # no pool: the pretraining tasks are fresh, e_IDG = e_ICL
        return ridgeless_icl(alpha, kappa, tau, rho)
    xs = (1 + rho) / alpha
    if tau > 1:
        return tau * (rho + xs * (1 - xs * stieltjes(xs, kappa))) / (tau - 1)
    b = xs + 1 - tau / kappa
    mu = 2 * xs / (b + math.sqrt(4 * xs * tau / kappa + b * b))
    eps = (1 - tau) * xs / (tau * mu)
    c = 1 / (1 - kappa / (1 + kappa * eps / (1 - tau)) ** 2)
    return tau * ((xs + eps) ** 2 / eps
                  + (rho + xs - 2 * xs * (1 - tau) * (xs / eps + 1)) / (1 - tau - c * (1 - tau) ** 2))


def _consistency(eps: float, xs: float, tau: float, kappa: float, ridge: float) -> float:
    """1 - tau + tau lambda / eps - eps S(eps + x*): its smallest positive root is eps."""
    return 1 - tau + tau * ridge / eps - eps * stieltjes(eps + xs, kappa)


def ridge_eps(alpha: float, kappa: float, tau: float, rho: float, ridge: float) -> float:
    """The smallest positive root eps of the self-consistency equation (ridge lambda > 0)."""
    xs = (1 + rho) / alpha
    grid = np.logspace(-12, 4, 800)
    vals = np.array([_consistency(e, xs, tau, kappa, ridge) for e in grid])
    change = np.nonzero(np.sign(vals[:-1]) != np.sign(vals[1:]))[0]
    if len(change) == 0:
        raise ValueError(f"no positive root of the self-consistency (alpha={alpha}, kappa={kappa}, tau={tau}, "
                         f"rho={rho}, lambda={ridge})")
    i = int(change[0])
    return float(brentq(_consistency, grid[i], grid[i + 1], args=(xs, tau, kappa, ridge), xtol=1e-15, rtol=1e-13))


def ridge_icl(alpha: float, kappa: float, tau: float, rho: float, ridge: float) -> float:
    """e_ICL with ridge lambda > 0 (the authors' ridge_icl)."""
    xs = (1 + rho) / alpha
    eps = ridge_eps(alpha, kappa, tau, rho, ridge)
    nu = xs + eps
    s, sp = stieltjes(nu, kappa), stieltjes_prime(nu, kappa)
    ce = ((rho + nu - nu ** 2 * s - eps * (1 - 2 * nu * s - nu ** 2 * sp))
          / (1 - 2 * eps * s - eps ** 2 * sp - tau))
    return (xs + 1) * (1 - 2 * nu * s - nu ** 2 * sp - ce * (s + eps * sp)) - 2 * (1 - nu * s) + 1 + rho


def e_icl(alpha: float, kappa: float, tau: float, rho: float, ridge: float = 0.0) -> float:
    """The asymptotic e_ICL(alpha, kappa, tau, rho, lambda): ridgeless at lambda = 0, else the ridge formula."""
    return ridgeless_icl(alpha, kappa, tau, rho) if ridge == 0 else ridge_icl(alpha, kappa, tau, rho, ridge)


def e_idg(alpha: float, kappa: float, tau: float, rho: float) -> float:
    """The asymptotic e_IDG (ridgeless; the authors give no ridge form of it)."""
    return ridgeless_idg(alpha, kappa, tau, rho)


def icl_limit(alpha: float, rho: float) -> float:
    """e_ICL as tau, kappa -> infinity: rho + x*/(1 + x*), x* = (1 + rho)/alpha (the Bayes-like floor)."""
    xs = (1 + rho) / alpha
    return rho + xs / (1 + xs)


def kappa_half(alpha: float, tau: float, rho: float, lo: float = 1e-3, hi: float = 1e3) -> tuple[float, float]:
    """(kappa_1/2, level): the task diversity where the ridgeless e_ICL crosses half-way between its limits as
    kappa -> 0 (memorisation; evaluated at kappa = ``lo``) and kappa -> infinity (``hi``). e_ICL falls with kappa."""
    top, bottom = ridgeless_icl(alpha, lo, tau, rho), ridgeless_icl(alpha, hi, tau, rho)
    level = 0.5 * (top + bottom)
    root = brentq(lambda lk: ridgeless_icl(alpha, math.exp(lk), tau, rho) - level, math.log(lo), math.log(hi))
    return math.exp(root), level
