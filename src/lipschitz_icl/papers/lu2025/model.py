"""The reduced linear attention of Lu et al. fit by ridge regression on n = tau d^2 prompts, and its exact errors.

Setting (the authors' scalings): x ~ N(0, I_d/d), y = w^T x + eps with eps ~ N(0, rho) (noise sqrt(rho)), N = alpha d
context pairs, tasks from a pool of k = kappa d vectors, normalised to ||w|| = sqrt(d) as in their code. The model is
yh = x_q^T Gamma h with h = (1/N) sum_n y_n x_n (the core's ``gamma`` form); the paper's H_Z adds a column
x_q (1/N) sum_n y_n^2 (``augmented``; Gamma_paper is d x (d+1)). In the paper's scale the features are
H = [d x_q h^T, x_q ybar2] and the ridge is Gamma_paper = argmin sum_mu (y_q - <Gamma_paper, H>)^2 + (n/d) lambda
||Gamma_paper||_F^2 (their ``learn_Gamma_fast_NEW``); the core's Gamma is d times its d x d block. At lambda = 0 it is
the minimiser of the sampled engine's loss on the same fixed prompts (checked in the tests).

Prompts enter only through (h, ybar2, x_q, y_q), which ``draw_statistics`` samples exactly in O(d) per prompt (the
authors' rotation trick: along w-hat, sum_n y_n x_n and sum_n y_n^2 come from chi variables; across it, Gaussian),
so the cost does not grow with N. ``statistics_of`` computes the same from explicitly drawn prompts.

Errors are exact for the fitted Gamma: e_ICL on fresh tasks w ~ N(0, I) and e_IDG on the pool, both including rho
(``linattn.single_error`` for the gamma form; the authors' ``gen_err_analytical_NEW`` for the augmented one)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ...linattn import GaussianTask, pool_of, single_error
from ...rng import make_generator


@dataclass(frozen=True)
class LuSetting:
    """One point (d, alpha, kappa, tau, rho, lambda); kappa = inf: a fresh task per prompt."""

    d: int
    alpha: float  # N / d
    kappa: float  # k / d (math.inf: no pool)
    tau: float  # n / d^2
    rho: float  # label-noise variance
    ridge: float  # lambda

    @property
    def n_context(self) -> int:
        return int(round(self.alpha * self.d))

    def counts(self, authors: bool = False) -> tuple[int, int]:
        """(k, n): pool size and prompts. Ours: k = round(kappa d), n = round(tau d^2). The authors' ``authors``:
        k = floor(kappa d) and each task repeated round(tau d^2 / k) times (n = their product)."""
        d, n = self.d, int(round(self.tau * self.d ** 2))
        if math.isinf(self.kappa):
            return n, n
        k = max(int(self.kappa * d + (0 if authors else 0.5)), 1)
        return (k, int(round(n / k)) * k) if authors else (k, n)

    def effective(self, authors: bool = False) -> tuple[float, float]:
        """(kappa, tau) of the drawn counts, k/d and n/d^2 (the theory is read there)."""
        k, n = self.counts(authors)
        return (self.kappa if math.isinf(self.kappa) else k / self.d), n / self.d ** 2

    def task(self, pool: torch.Tensor | None = None) -> GaussianTask:
        """The core's task: Lambda = I/d, N, noise sqrt(rho), the pool (None: w ~ N(0, I))."""
        return GaussianTask.make([1.0 / self.d] * self.d, self.n_context, math.sqrt(self.rho), pool=pool)


def normalised_pool(k: int, d: int, gen: torch.Generator) -> torch.Tensor:
    """k task vectors w ~ N(0, I_d) rescaled to ||w|| = sqrt(d) (the authors' draw)."""
    pool = pool_of(k, d, gen)
    return pool / pool.norm(dim=1, keepdim=True) * math.sqrt(d)


def pretraining_tasks(s: LuSetting, gen: torch.Generator, authors: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(pool (k, d), task of each prompt (n, d)): uniform draws from the pool, or (``authors``) each pool task
    repeated n/k times; kappa = inf: one fresh task per prompt (the pool is then those tasks)."""
    k, n = s.counts(authors)
    pool = normalised_pool(k, s.d, gen)
    if math.isinf(s.kappa):
        return pool, pool
    if authors:
        return pool, pool.repeat(n // k, 1)
    return pool, pool[torch.randint(k, (n,), generator=gen)]


def draw_statistics(tasks: torch.Tensor, s: LuSetting, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """For each task w (rows), one prompt's h = (1/N) sum y_n x_n, ybar2 = (1/N) sum y_n^2, x_q and y_q, exact in
    distribution: with z_n = sqrt(d) x_n, u_n = w-hat . z_n, c = ||w||/sqrt(d), y_n = c u_n + eps_n; eps . u =
    ||eps|| a, ||u||^2 = a^2 + chi^2_{N-1}; the part of sum y_n z_n across w-hat is ||y|| times a Gaussian. The
    chi^2 variables come from numpy's sampler (seeded from ``gen``), not as sums of N squared normals."""
    n, d = tasks.shape
    big_n, sigma = s.n_context, math.sqrt(s.rho)
    r = tasks.norm(dim=1)
    what, c = tasks / r[:, None], r / math.sqrt(d)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=tasks.dtype)

    a = randn(n)
    chi2 = np.random.default_rng(int(torch.randint(2 ** 62, (1,), generator=gen)))  # numpy's exact chi^2 sampler
    q2 = torch.from_numpy(chi2.chisquare(big_n - 1, n)) if big_n > 1 else torch.zeros(n, dtype=tasks.dtype)
    e_norm = sigma * torch.from_numpy(chi2.chisquare(big_n, n)).sqrt()  # ||eps||, sigma chi_N
    along = c * (a ** 2 + q2) + e_norm * a  # sum y_n u_n
    y2 = (c * a + e_norm) ** 2 + c ** 2 * q2  # ||y||^2
    g = randn(n, d)
    across = g - what * (g * what).sum(1, keepdim=True)
    h = (what * along[:, None] + y2.sqrt()[:, None] * across) / (big_n * math.sqrt(d))
    zq = randn(n, d)
    yq = c * (zq * what).sum(1) + sigma * randn(n)
    return {"h": h, "ybar2": y2 / big_n, "xq": zq / math.sqrt(d), "yq": yq}


def statistics_of(x: torch.Tensor, y: torch.Tensor, xq: torch.Tensor, yq: torch.Tensor) -> dict[str, torch.Tensor]:
    """The same statistics from explicit prompts (contexts x (B, N, d), labels y (B, N))."""
    return {"h": torch.einsum("bn,bnd->bd", y, x) / x.shape[1], "ybar2": (y ** 2).mean(1), "xq": xq, "yq": yq}


def feature_factors(stats: dict[str, torch.Tensor], augmented: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The paper's H_Z, flattened row-major, is x_q (x) r per prompt: (x_q (B, d), r (B, d+1) = [d h, ybar2]
    (augmented) or (B, d) = d h)."""
    xq, h = stats["xq"], stats["h"]
    d = xq.shape[1]
    return xq, torch.cat([d * h, stats["ybar2"][:, None]], 1) if augmented else d * h


def _pair_products(v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(v_i v_k for i <= k as rows, shape (m(m+1)/2, B), in triu order; the (m, m) index of each pair, symmetric)."""
    m = v.shape[1]
    rows = v.T.contiguous()
    i, k = torch.triu_indices(m, m)
    index = torch.empty(m, m, dtype=torch.long)
    index[i, k] = index[k, i] = torch.arange(len(i))
    return torch.cat([rows[j] * rows[j:] for j in range(m)]), index


def fit(stats: dict[str, torch.Tensor], ridge: float, augmented: bool = False) -> torch.Tensor:
    """Gamma_paper (d x d or d x (d+1)) by ridge: (H^T H + (n/d) lambda I)^-1 H^T y.

    Each row of H is a Kronecker product x_q (x) r (r = d h, or [d h, ybar2]), so H^T H = sum_mu (x_q x_q^T) (x)
    (r r^T): its entry ((i, j), (k, l)) is sum_mu x_qi x_qk r_j r_l, a product of the pairs i <= k and j <= l only,
    about a quarter of the arithmetic of forming H and H^T H (and without H's n x d(d+1) numbers in memory)."""
    (xq, right), yq = feature_factors(stats, augmented), stats["yq"]
    n, d = xq.shape
    (pq, iq), (pr, ir) = _pair_products(xq), _pair_products(right)
    m = right.shape[1]
    gram = (pq @ pr.T)[iq[:, None, :, None], ir[None, :, None, :]].reshape(d * m, d * m)
    gram.diagonal().add_(n / d * ridge)
    rhs = ((xq * yq[:, None]).T @ right).reshape(-1)  # H^T y
    return torch.linalg.solve(gram, rhs).reshape(d, -1)


def core_gamma(gamma_paper: torch.Tensor) -> torch.Tensor:
    """The core's Gamma (yh = x_q^T Gamma h): d times the paper's d x d block."""
    d = gamma_paper.shape[0]
    return d * gamma_paper[:, :d]


def paper_error(gamma_paper: torch.Tensor, alpha: float, mu: torch.Tensor, second: torch.Tensor, rho: float) -> float:
    """The authors' gen_err_analytical_NEW: 1 + rho - (2/d) tr(Gamma A) + ((1 + rho)/d) tr(Gamma^T Gamma B), with
    A = [R; (1 + rho) mu^T], B = [[I/alpha + (1 + 1/l) R/(1 + rho), (1 + 2/l) mu], [(1 + 2/l) mu^T, (1 + rho)(1 +
    2/l)]], l = alpha d; mu, R the test tasks' mean and second moment (ICL: 0, I). Exact when tr R = d. A d x d
    Gamma is padded with a zero column."""
    d = gamma_paper.shape[0]
    g = gamma_paper if gamma_paper.shape[1] == d + 1 else torch.cat([gamma_paper, gamma_paper.new_zeros(d, 1)], 1)
    ell = alpha * d
    a = torch.cat([second, (1 + rho) * mu[None, :]], 0)
    b = torch.zeros(d + 1, d + 1, dtype=g.dtype)
    b[:d, :d] = torch.eye(d, dtype=g.dtype) / alpha + (1 + 1 / ell) * second / (1 + rho)
    b[d, :d] = b[:d, d] = (1 + 2 / ell) * mu
    b[d, d] = (1 + rho) * (1 + 2 / ell)
    return float(1 + rho - 2 / d * torch.trace(g @ a) + (1 + rho) / d * torch.trace(g.T @ g @ b))


def errors(gamma_paper: torch.Tensor, s: LuSetting, pool: torch.Tensor) -> dict[str, float]:
    """e_ICL (fresh w ~ N(0, I)) and e_IDG (w uniform on the pool) of the fitted Gamma, exact, noise included."""
    d = s.d
    if gamma_paper.shape[1] == d:  # the gamma form: the core's closed form
        gamma = core_gamma(gamma_paper)
        return {"icl": single_error(gamma, s.task()), "idg": single_error(gamma, s.task(pool))}
    mean, second = pool.mean(0), pool.T @ pool / pool.shape[0]
    return {"icl": paper_error(gamma_paper, s.alpha, torch.zeros(d, dtype=pool.dtype), torch.eye(d, dtype=pool.dtype),
                               s.rho),
            "idg": paper_error(gamma_paper, s.alpha, mean, second, s.rho)}


def simulate(s: LuSetting, seed: int, augmented: bool = False, authors: bool = False,
             stream: str = "lu:pretraining") -> dict[str, float]:
    """One independent draw (pool, pretraining prompts) at ``s``: the ridge fit and its exact e_ICL, e_IDG."""
    gen = make_generator(seed, f"{stream}:{s}")
    pool, tasks = pretraining_tasks(s, gen, authors)
    gamma = fit(draw_statistics(tasks, s, gen), s.ridge, augmented)
    out = errors(gamma, s, pool)
    kappa, tau = s.effective(authors)
    return {**out, "gtask": out["icl"] - out["idg"], "kappa_eff": kappa, "tau_eff": tau}
