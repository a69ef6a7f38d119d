"""The theory's quantities for a problem: Delta, delta, the threshold L* and the regime.

    Delta  = min_{k != n} ||v_k - v_n||
    delta  = min_{k != n} sqrt(E_f[(f(v_k) - f(v_n))^2]) / (L ||v_k - v_n||)
    L*     = c / (Delta delta)
    regime = flat if L < L*, sharp if L > L*, near-threshold if |L / L* - 1| < band
    T_f    = K log(K/eps) / (eta delta^2 L^2 Delta^2)   flat-regime time scale (constant unknown)
    eta_max = 2 / lambda_max, lambda_max the top eigenvalue of the loss Hessian at Q^(0)

Delta, delta, L*, the regime and T_f need a finite feature set: with continuous inputs
(features.kind sphere, gaussian_inputs) they are None and ``theory_undefined`` says why; eta_max,
from the sampled engine's objective, is still defined. A degenerate class (delta = 0, e.g. task.kind=sign_split
on orthonormal features) has L* = inf, no regime and no T_f, and ``theory_undefined`` says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields

import torch

from .config import Config
from .engines import build_engine
from .engines.base import Objective
from .models import effective_Q, make_model
from .problem import Problem, build_problem
from .recent import kept, new_cache
from .rng import make_generator
from .tasks import KernelEstimate

# why Delta, delta, L* and the regime are null for continuous inputs (summary and theory field ``theory_undefined``)
CONTINUOUS_THEORY = ("Delta, delta, L* and the regime need a finite feature set; features.kind={kind} draws "
                     "tokens from a continuous distribution")
# why L* is infinite and the regime and T_f undefined for a degenerate class (task.kind=sign_split on orthonormal
# features, say): the theory's guarantee assumes delta > 0
DEGENERATE_THEORY = ("delta = 0: two features get the same value from every function of task.kind={kind} "
                     "(E_f[(f(v_k) - f(v_n))^2] = 0), so L* = 1/(Delta delta) is infinite, the regime and T_f are "
                     "undefined, and the paper's guarantee (Attn_k -> 1) does not apply")


@dataclass(frozen=True)
class Theory:
    Delta: float | None  # Δ (None: continuous inputs)
    delta: float | None  # δ
    delta_se: float | None  # standard error of δ (0 when Sigma is exact)
    L: float
    L_star: float | None  # L*
    regime: str | None
    undefined: str | None = None  # why the quantities above are None (continuous inputs), or the regime (delta = 0)

    def as_dict(self) -> dict:
        out = {name: getattr(self, name) for name in _THEORY_FIELDS}  # numbers and text: no deep copy (asdict's)
        why = out.pop("undefined")
        return out if why is None else {**out, "theory_undefined": why}


_THEORY_FIELDS = tuple(f.name for f in fields(Theory))  # read once: dataclasses.fields costs ~5 us a call


def nondegeneracy(kernel: KernelEstimate, V: torch.Tensor, L: float) -> tuple[float, float]:
    """delta and its standard error, from Sigma (or the Monte-Carlo values behind it). An exact Sigma gives the
    same numbers for the same Sigma, V and L (a sweep's seeds and step sizes): kept for the next configs."""
    if kernel.F is not None or kernel.sigma.numel() + V.numel() > KEPT_ELEMENTS:
        return _nondegeneracy(kernel, V, L)
    key = (kernel.sigma.double().cpu().numpy().tobytes(), V.double().cpu().numpy().tobytes(), V.shape, float(L))
    return kept(_RECENT_DELTAS, key, lambda: _nondegeneracy(kernel, V, L), RECENT_DELTAS)


RECENT_DELTAS = 256  # (delta, its standard error) of exact kernels kept
KEPT_ELEMENTS = 2**12  # only for Sigma and V this small (the key holds their bytes): at most 8 MB of keys
_RECENT_DELTAS: dict[tuple, tuple[tuple[float, float], None]] = new_cache()  # oldest first


def _nondegeneracy(kernel: KernelEstimate, V: torch.Tensor, L: float) -> tuple[float, float]:
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
    if problem.kernel is None:  # continuous inputs: no features to separate, no Sigma on them
        return Theory(None, None, None, problem.L, None, None, CONTINUOUS_THEORY.format(kind=cfg.features.kind))
    Delta = problem.features.delta_sep
    delta, se = nondegeneracy(problem.kernel, problem.features.V, problem.L)
    L_star = threshold(Delta, delta, cfg.theory.c)  # infinite when delta = 0: no division
    if delta == 0:  # a degenerate class: the theory has no threshold and no regime to report
        return Theory(Delta, delta, se, problem.L, L_star, None, DEGENERATE_THEORY.format(kind=cfg.task.kind))
    return Theory(Delta, delta, se, problem.L, L_star, regime(problem.L, L_star, cfg.theory.band))


# --------------------------------------------------------------------------- time scale


def flat_time_scale(K: int, eps: float, eta: float, delta: float, L: float, Delta: float) -> float:
    """The flat-regime convergence time scale T_f = K log(K/eps) / (eta delta^2 L^2 Delta^2).

    A *scale*: the paper's bound holds up to a constant that is not known, so only ratios of
    T_f between settings (and slopes of log T against log L, log eta, log Delta) are meaningful.
    """
    denom = eta * delta**2 * L**2 * Delta**2
    if denom <= 0 or eps <= 0:
        return math.inf
    return K * math.log(K / eps) / denom


# --------------------------------------------------------------------------- stability at init


def training_objective_at_init(problem: Problem) -> tuple[Objective, torch.Tensor]:
    """The objective the configured engine trains, as a function of Q (d x d), and Q^(0).

    Asked of the engine (``Engine.objective_in_q``): for the kernel engine the exact population
    loss with the engine's counts (its B multinomial draws or the mean-field counts N p); for the
    sampled engine the loss on one fixed batch of prompts (the engine's full batch, or its first
    fresh batch when it resamples). Computed in float64.

    Always the merged-Q (reduced) objective: for model.kind=factored it is taken at
    Q_eff^(0) = W_K^T W_Q / sqrt(d_k), for model.kind=transformer at Q = 0.
    """
    cfg = problem.config
    engine = build_engine(problem)
    model = make_model(cfg.model, cfg.features.d, make_generator(cfg.seed, "init"), torch.float64, "cpu")
    Q0 = effective_Q(model)
    Q0 = torch.zeros(cfg.features.d, cfg.features.d, dtype=torch.float64) if Q0 is None else Q0.detach()
    return engine.objective_in_q(), Q0.to(engine.device)


@dataclass(frozen=True)
class TopEigen:
    value: float  # lambda_max, the largest (signed) eigenvalue
    iterations: int  # Hessian-vector products used
    converged: bool


def _power(
    hvp: Callable[[torch.Tensor], torch.Tensor], v: torch.Tensor, shift: float, iters: int, tol: float
) -> tuple[float, float, torch.Tensor, int, bool]:
    """Power iteration on H + shift I. Returns (Rayleigh quotient, |Hv|/|v|, v, iterations, converged)."""
    v = v / v.norm()
    prev = math.nan
    rq = norm = 0.0
    for it in range(1, iters + 1):
        w = hvp(v) + shift * v
        rq = float((v * w).sum())
        norm = float(w.norm())
        if norm == 0.0:
            return 0.0, 0.0, v, it, True
        v = w / norm
        if math.isfinite(prev) and abs(rq - prev) <= tol * max(abs(rq), 1e-300):
            return rq, norm, v, it, True
        prev = rq
    return rq, norm, v, iters, False


def _lanczos(
    hvp: Callable[[torch.Tensor], torch.Tensor], v: torch.Tensor, iters: int, tol: float
) -> tuple[float, int, bool]:
    """Lanczos on H from v: the top Ritz value, iterations, converged. Converged when the
    residual bound beta_j |s_j| of the top Ritz pair is <= tol |theta| (or the Krylov space is
    invariant). Three-term recurrence without reorthogonalisation: O(n) memory; lost
    orthogonality only duplicates Ritz values, it does not spoil the extreme one."""
    q = v / v.norm()
    q_prev = torch.zeros_like(q)
    alphas: list[float] = []
    betas: list[float] = []
    theta = 0.0
    for it in range(1, iters + 1):
        w = hvp(q)
        alpha = float((q * w).sum())
        w = w - alpha * q - (betas[-1] if betas else 0.0) * q_prev
        alphas.append(alpha)
        T = torch.diag(torch.tensor(alphas, dtype=torch.float64))
        if betas:
            off = torch.tensor(betas, dtype=torch.float64)
            T = T + torch.diag(off, 1) + torch.diag(off, -1)
        evals, evecs = torch.linalg.eigh(T)
        theta = float(evals[-1])
        beta = float(w.norm())
        scale = max(abs(float(evals[0])), abs(theta), 1e-300)
        if beta <= 1e-12 * scale or beta * abs(float(evecs[-1, -1])) <= tol * max(abs(theta), 1e-300):
            return theta, it, True
        betas.append(beta)
        q_prev, q = q, w / beta
    return theta, iters, False


def hessian_top_eigenvalue_at(
    loss_fn: Callable[[torch.Tensor], torch.Tensor],
    x0: torch.Tensor,
    iters: int = 100,
    tol: float = 1e-6,
    seed: int = 0,
    method: str = "lanczos",
) -> TopEigen:
    """lambda_max, the largest eigenvalue of the Hessian of loss_fn at x0, from Hessian-vector
    products (double backward; the Hessian is never formed).

    method="lanczos" (default): the Krylov refinement of power iteration, which takes the best
    vector of the same Krylov space instead of the last one; it resolves the clustered,
    +- symmetric spectra that the Hessian at Q = 0 has (e.g. the quickstart's) in a few dozen
    products. method="power": plain power iteration; it finds the eigenvalue of largest
    magnitude, so when that is negative, or when the Rayleigh quotient falls short of |Hv|
    (a +-lambda pair), it runs again on H + rho I (rho the spectral radius), whose top
    eigenvalue is lambda_max + rho.
    """
    x = x0.detach().clone().requires_grad_(True)
    (g,) = torch.autograd.grad(loss_fn(x), x, create_graph=True)

    def hvp(v: torch.Tensor) -> torch.Tensor:
        (hv,) = torch.autograd.grad(g, x, grad_outputs=v, retain_graph=True)
        return hv.detach()

    v0 = torch.randn(x.shape, generator=make_generator(seed, "power-iteration"), dtype=x.dtype).to(x.device)
    if method == "lanczos":
        return TopEigen(*_lanczos(hvp, v0, iters, tol))
    if method != "power":
        raise ValueError(f"method must be 'lanczos' or 'power' (got {method!r})")
    rq, rho, v, n1, ok1 = _power(hvp, v0, 0.0, iters, tol)
    if rq > 0 and abs(rq - rho) <= max(1e-3, 10 * tol) * rho:
        return TopEigen(rq, n1, ok1)
    mu, _, _, n2, ok2 = _power(hvp, v0, rho, iters, tol)
    return TopEigen(mu - rho, n1 + n2, ok1 and ok2)


def hessian_top_eigenvalue_at_init(
    problem: Problem, iters: int = 100, tol: float = 1e-6, method: str = "lanczos"
) -> TopEigen:
    """lambda_max of the loss Hessian at Q^(0), in Q coordinates (d x d), for the configured engine."""
    loss_fn, Q0 = training_objective_at_init(problem)
    return hessian_top_eigenvalue_at(loss_fn, Q0, iters, tol, seed=problem.config.seed, method=method)


def eta_max(problem: Problem, iters: int = 100, tol: float = 1e-6, method: str = "lanczos") -> float:
    """Largest stable gradient-descent step at initialisation, eta_max = 2 / lambda_max.

    lambda_max is the top eigenvalue of the loss Hessian at Q^(0) w.r.t. Q, from Hessian-vector
    products (Lanczos by default, or power iteration; see hessian_top_eigenvalue_at). GD on
    M = V^T Q V in the kernel engine's S space is the same algorithm, so Q coordinates are the
    right ones.
    Infinite when lambda_max <= 0 (no curvature to go unstable on, locally).
    """
    lam = hessian_top_eigenvalue_at_init(problem, iters, tol, method).value
    return 2.0 / lam if lam > 0 else math.inf


# --------------------------------------------------------------------------- report


def theory_report(
    cfg_or_problem: Config | Problem, iters: int = 100, tol: float = 1e-6, method: str = "lanczos"
) -> dict:
    """Everything the theory says about a config: Delta, delta (+ se), L, L*, regime, the flat
    time scale T_f (uses train.eps and train.lr; a scale, constant unknown), lambda_max and
    eta_max = 2 / lambda_max at Q^(0), and the threshold settings c and band."""
    problem = cfg_or_problem if isinstance(cfg_or_problem, Problem) else build_problem(cfg_or_problem)
    cfg = problem.config
    th = theory_of(problem)
    top = hessian_top_eigenvalue_at_init(problem, iters, tol, method)
    K = problem.features.K if problem.finite else None
    return {
        **th.as_dict(),
        "T_f": None if th.undefined else flat_time_scale(K, cfg.train.eps, cfg.train.lr, th.delta, th.L, th.Delta),
        "eta_max": 2.0 / top.value if top.value > 0 else math.inf,
        "lambda_max": top.value,
        "lambda_converged": top.converged,
        "c": cfg.theory.c,
        "band": cfg.theory.band,
        "K": K,
        "d": problem.features.d,
        "eps": cfg.train.eps,
        "lr": cfg.train.lr,
        "engine": cfg.engine.kind,
    }
