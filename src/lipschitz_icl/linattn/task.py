"""In-context linear regression on Gaussian inputs, the setting of the linear-attention papers.

A prompt holds N context pairs (x_n, y_n) and a query x_q: x ~ N(0, Lambda) in R^D, y_n = w^T x_n + eps_n with
eps ~ N(0, sigma^2), and the task vector w drawn per prompt from N(0, I_D) or, for a finite pool of kappa tasks
(Lu et al.), uniformly from a fixed pool. A test distribution may differ from training in its context and query
covariances (a covariate or query shift, Zhang-Frei-Bartlett), its context length M, or its tasks.

Everything the exact engine needs is a second moment: Omega = E[w w^T] (I, or the pool's mean of w w^T) and the
Wishart moment E[Lh Omega Lh] of the context's sample covariance Lh = (1/N) sum x_n x_n^T."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ..errors import UserInputError
from ..rng import make_generator

DTYPE = torch.float64


def check_count(name: str, value) -> None:
    """A count the linear-attention core takes (N, heads, steps, a batch...): a whole number >= 1, else a
    UserInputError naming it."""
    if int(value) != value or value < 1:
        raise UserInputError(f"{name}: must be a whole number >= 1 (got {value})")


def rotated(eigs, seed: int, stream: str) -> torch.Tensor:
    """U diag(eigs) U^T, U the Q factor of a Gaussian matrix drawn from the named stream (seed, stream): a
    covariance with these eigenvalues whose eigenvectors are not the axes."""
    d = len(eigs)
    u, _ = torch.linalg.qr(torch.randn(d, d, generator=make_generator(seed, stream), dtype=DTYPE))
    return u @ torch.diag(torch.as_tensor(eigs, dtype=DTYPE)) @ u.T


def _as_cov(cov: torch.Tensor | list | tuple, dim: int | None = None) -> torch.Tensor:
    """A covariance from a vector (its eigenvalues: a diagonal matrix) or a symmetric positive matrix."""
    t = torch.as_tensor(cov, dtype=DTYPE)
    if t.ndim == 1:
        t = torch.diag(t)
    if t.ndim != 2 or t.shape[0] != t.shape[1] or (dim is not None and t.shape[0] != dim):
        raise UserInputError(f"covariance: expected {dim or 'D'} eigenvalues or a {dim or 'D'} x {dim or 'D'} "
                             f"matrix (got shape {tuple(t.shape)})")
    if not torch.allclose(t, t.T) or torch.linalg.eigvalsh(t).min() <= 0:
        raise UserInputError("covariance: must be symmetric positive definite")
    return t


@dataclass(frozen=True)
class GaussianTask:
    """One distribution of prompts. ``cov`` is Lambda (context and query), ``query_cov`` a different query
    covariance (None: Lambda), ``pool`` a (kappa, D) tensor of task vectors (None: w ~ N(0, I_D)), ``noise`` sigma
    (label noise standard deviation), ``n_context`` N."""

    cov: torch.Tensor  # Lambda, D x D
    n_context: int  # N
    noise: float = 0.0  # sigma
    pool: torch.Tensor | None = None  # (kappa, D) task vectors, or None for w ~ N(0, I_D)
    query_cov: torch.Tensor | None = None  # Lambda_q, or None for Lambda

    @classmethod
    def make(cls, cov, n_context: int, noise: float = 0.0, pool=None, query_cov=None) -> GaussianTask:
        """A checked task: ``cov`` as eigenvalues (diagonal) or a matrix; bad input is a UserInputError."""
        lam = _as_cov(cov)
        check_count("n_context", n_context)
        if noise < 0:
            raise UserInputError(f"noise: must be >= 0 (got {noise})")
        if pool is not None:
            pool = torch.as_tensor(pool, dtype=DTYPE)
            if pool.ndim != 2 or pool.shape[1] != lam.shape[0] or pool.shape[0] < 1:
                raise UserInputError(f"pool: expected a (kappa, {lam.shape[0]}) array of task vectors "
                                     f"(got shape {tuple(pool.shape)})")
        q = None if query_cov is None else _as_cov(query_cov, lam.shape[0])
        return cls(lam, int(n_context), float(noise), pool, q)

    @property
    def dim(self) -> int:
        return int(self.cov.shape[0])

    @property
    def lam_q(self) -> torch.Tensor:
        """Lambda_q, the query's covariance."""
        return self.cov if self.query_cov is None else self.query_cov

    def omega(self) -> torch.Tensor:
        """Omega = E[w w^T]: I_D, or the pool's (1/kappa) sum_i w_i w_i^T."""
        if self.pool is None:
            return torch.eye(self.dim, dtype=DTYPE)
        return self.pool.T @ self.pool / self.pool.shape[0]

    def context_moment(self) -> torch.Tensor:
        """E[h h^T] for h = (1/N) sum_n y_n x_n: E[Lh Omega Lh] + sigma^2 Lambda / N, where for Gaussian x
        E[Lh A Lh] = (1 + 1/N) Lambda A Lambda + tr(A Lambda) Lambda / N (A symmetric)."""
        lam, om, n = self.cov, self.omega(), self.n_context
        return ((1 + 1 / n) * lam @ om @ lam + torch.trace(om @ lam) * lam / n + self.noise ** 2 * lam / n)

    def shifted(self, cov=None, n_context: int | None = None, query_cov=None, pool=None) -> GaussianTask:
        """The same task with some of its parts replaced (a test distribution)."""
        return replace(self,
                       cov=self.cov if cov is None else _as_cov(cov, self.dim),
                       n_context=self.n_context if n_context is None else int(n_context),
                       query_cov=self.query_cov if query_cov is None else _as_cov(query_cov, self.dim),
                       pool=self.pool if pool is None else torch.as_tensor(pool, dtype=DTYPE))

    def draw(self, batch: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``batch`` prompts: contexts X (B, N, D), labels y (B, N), queries xq (B, D), query labels yq (B,)."""
        d, n = self.dim, self.n_context
        root = torch.linalg.cholesky(self.cov)
        root_q = torch.linalg.cholesky(self.lam_q)
        x = torch.randn(batch, n, d, generator=gen, dtype=DTYPE) @ root.T
        xq = torch.randn(batch, d, generator=gen, dtype=DTYPE) @ root_q.T
        if self.pool is None:
            w = torch.randn(batch, d, generator=gen, dtype=DTYPE)
        else:
            w = self.pool[torch.randint(self.pool.shape[0], (batch,), generator=gen)]
        eps = self.noise * torch.randn(batch, n + 1, generator=gen, dtype=DTYPE)
        y = torch.einsum("bnd,bd->bn", x, w) + eps[:, :n]
        yq = (xq * w).sum(-1) + eps[:, n]
        return x, y, xq, yq


def white(dim: int, n_context: int, trace: float = 1.0, **kw) -> GaussianTask:
    """Lambda = (trace / D) I_D."""
    return GaussianTask.make([trace / dim] * dim, n_context, **kw)


def pool_of(kappa: int, dim: int, gen: torch.Generator) -> torch.Tensor:
    """A pool of kappa task vectors w_i ~ N(0, I_D)."""
    return torch.randn(kappa, dim, generator=gen, dtype=DTYPE)
