"""The two engines that evaluate a linear-attention model's loss, one registry (``register_linear_engine``).

- ``exact``: the population loss E[(y_q - yh)^2] over Gaussian prompts from moments, no sampling. For a
  single-layer form (yh = x_q^T Gamma h) it is the closed form
      tr(Lq Omega) - 2 tr(Lq Gamma Lambda Omega) + tr(Gamma^T Lq Gamma E[h h^T]) + sigma^2,
  with E[h h^T] from ``GaussianTask.context_moment`` (exact for finite N). For ``gd_layers`` with L > 1 it is
  exact in w, x_q and the label noise and an average over ``context_draws`` fixed draws of the context's sample
  covariance, closed under the problem's reflections (its expectation has no short closed form): a quadrature
  that ``refined`` doubles.
- ``sampled``: the mean of (y_q - yh)^2 over drawn prompts: fresh ones at every step (``batch``), or a fixed
  finite set (``n_prompts``) drawn once.

The gradient of either is torch's autograd of the loss (float64), or for gd_layers on the exact engine with
``compiled=True`` the closed-form backward of ``gd_compiled`` (numba)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import ClassVar

import torch

from ..contract import einsum
from ..errors import UserInputError
from ..numba_support import NUMBA_MISSING, numba_installed
from ..registry_names import bind
from ..rng import make_generator
from .forms import Form, Params, gamma_of, predict
from .task import DTYPE, GaussianTask, check_count
from .tokens import token_predict

_ENGINES: dict[str, type[LinearEngine]] = {}


def register_linear_engine(cls: type[LinearEngine]) -> type[LinearEngine]:
    """Class decorator: make ``cls`` available by its ``name``."""
    bind(_ENGINES, cls.name, cls, "linear-attention engine")
    return cls


def linear_engine_names() -> list[str]:
    return sorted(_ENGINES)


def linear_engine(name: str, task: GaussianTask, seed: int = 0, **options) -> LinearEngine:
    """The engine ``name`` for prompts of ``task`` (options: batch, n_prompts, context_draws)."""
    cls = _ENGINES.get(name)
    if cls is None:
        raise UserInputError(f"engine {name!r}: no such linear-attention engine "
                             f"(allowed: {', '.join(linear_engine_names())})")
    return cls(task, seed, **options)


def exact_single_loss(gamma: torch.Tensor, task: GaussianTask) -> torch.Tensor:
    """The population E[(y_q - x_q^T Gamma h)^2] under ``task``, in closed form."""
    lq, lam, om = task.lam_q, task.cov, task.omega()
    return (torch.trace(lq @ om) - 2 * torch.trace(lq @ gamma @ lam @ om)
            + torch.trace(gamma.T @ lq @ gamma @ task.context_moment()) + task.noise ** 2)


def gd_layers_loss(preconditioners: torch.Tensor, task: GaussianTask, covs: torch.Tensor) -> torch.Tensor:
    """E[(y_q - yh)^2] of L preconditioned GD steps, exact in w, x_q and noise, averaged over the sample
    covariances ``covs`` (S, D, D). With P_l = prod_{j > l}(I - A_j Lh): w - w_L = P_{-1} w - sum_l P_l A_l e,
    e = (1/N) sum_n eps_n x_n, E[e e^T | X] = sigma^2 Lh / N."""
    eye = torch.eye(task.dim, dtype=DTYPE)
    # the first layer from I and 0 without multiplying by them: (I - A_1 Lh) I and (I - A_1 Lh) 0 + A_1 are these
    # numbers exactly, and skipping them saves two of the batched products (and their backward)
    err = eye - preconditioners[0] @ covs  # prod (I - A_l Lh)
    noise_map = preconditioners[0].expand_as(covs)  # sum_l P_l A_l, built alongside
    for a in preconditioners[1:]:
        step = eye - a @ covs
        err, noise_map = step @ err, step @ noise_map + a
    lq, om = task.lam_q, task.omega()
    signal = einsum("sij,jk,slk,li->s", err, om, err, lq)  # tr(Lq E Omega E^T)
    noise = einsum("sij,sjk,slk,li->s", noise_map, covs, noise_map, lq) * task.noise ** 2 / task.n_context
    return (signal + noise).mean() + task.noise ** 2


SIGN_GROUP_MAX_DIM = 7  # up to 2^6 = 64 distinct reflections of each context draw


def sign_flips(dim: int, gen: torch.Generator) -> torch.Tensor:
    """(F, D) sign patterns S with a last entry of +1: S and -S give the same reflected matrix (R Lh R with
    R = U S U^T), so these are the 2^(D-1) distinct reflections for D <= SIGN_GROUP_MAX_DIM, else 64 random ones."""
    if dim <= SIGN_GROUP_MAX_DIM:
        codes = torch.arange(2 ** (dim - 1))[:, None] >> torch.arange(dim)[None] & 1  # the last bit is always 0
        return (1 - 2 * codes).to(DTYPE)
    codes = torch.randint(2, (2 ** (SIGN_GROUP_MAX_DIM - 1), dim), generator=gen)
    codes[:, -1] = 0
    return (1 - 2 * codes).to(DTYPE)


@dataclass
class LinearEngine:
    """Base: ``loss(form, params)`` is the training objective (a scalar tensor with a graph)."""

    task: GaussianTask
    seed: int = 0
    name: ClassVar[str] = ""

    def loss(self, form: Form, params: Params) -> torch.Tensor:
        raise NotImplementedError


@register_linear_engine
@dataclass
class ExactEngine(LinearEngine):
    """The population loss from moments (see the module docstring)."""

    context_draws: int = 4096  # sample covariances for gd_layers with L > 1
    compiled: bool = False  # gd_layers with L > 1 by gd_compiled (numba): ~1e-15 from torch's, 2.9x less CPU
    name: ClassVar[str] = "exact"

    def __post_init__(self) -> None:
        self._covs: torch.Tensor | None = None
        self._compiled = None  # gd_compiled.CompiledGdLayers over these draws, built at the first loss
        if self.compiled and not numba_installed():
            raise UserInputError(f"compiled: {NUMBA_MISSING}; allowed: False")

    def covs(self) -> torch.Tensor:
        """The fixed draws of Lh = (1/N) sum_n x_n x_n^T (made once), closed under the problem's symmetry: each
        draw comes with its reflections R Lh R, R = U S U^T for the sign flips S in Lambda's eigenbasis U (R Lambda
        R = Lambda, so Lh and R Lh R are equally likely). With all 2^(D-1) distinct reflections (D <=
        SIGN_GROUP_MAX_DIM) the quadrature is exactly invariant under A -> R A R, as the expectation is; above that,
        64 random reflections of each draw make it invariant in expectation only."""
        if self._covs is None:
            gen = make_generator(self.seed, "linattn:context-covs")
            root, n, d = torch.linalg.cholesky(self.task.cov), self.task.n_context, self.task.dim
            flips = sign_flips(d, gen)
            base = max(-(-self.context_draws // len(flips)), 1)
            x = torch.randn(base, n, d, generator=gen, dtype=DTYPE) @ root.T
            covs = x.transpose(1, 2) @ x / n
            _, u = torch.linalg.eigh(self.task.cov)
            refl = u[None] * flips[:, None, :] @ u.T[None]  # (F, D, D): U S U^T
            self._covs = (refl[:, None] @ covs[None] @ refl[:, None]).reshape(-1, d, d)
        return self._covs

    def loss(self, form: Form, params: Params) -> torch.Tensor:
        if form.kind == "full":
            raise UserInputError("engine exact: the full residual-stream form has no moment formula here "
                                 "(allowed: merged, separate, gd_layers, gamma; train full on the sampled engine)")
        if form.single_layer:
            return exact_single_loss(gamma_of(form, params), self.task)
        if not self.compiled:
            return gd_layers_loss(params["A"], self.task, self.covs())
        if self._compiled is None:  # numba is optional ([fused]) and costs ~0.4 s to import: only when asked
            module = importlib.import_module(".gd_compiled", __package__)
            self._compiled = module.CompiledGdLayers(self.task, self.covs())
        return self._compiled(params["A"])

    def refined(self) -> ExactEngine:
        """The same engine with twice the context draws (for a multi-layer reading's refinement check)."""
        return ExactEngine(self.task, self.seed + 1, self.context_draws * 2, self.compiled)


@register_linear_engine
@dataclass
class SampledEngine(LinearEngine):
    """Mean squared error on drawn prompts: ``batch`` fresh prompts a step, or a fixed set of ``n_prompts``."""

    batch: int = 1024
    n_prompts: int | None = None  # a fixed finite training set (drawn once); None: fresh prompts every step
    name: ClassVar[str] = "sampled"

    def __post_init__(self) -> None:
        for field, value in (("batch", self.batch), ("n_prompts", self.n_prompts)):
            if value is not None:
                check_count(field, value)
        self._gen = make_generator(self.seed, "linattn:prompts")
        self._fixed = None if self.n_prompts is None else self.task.draw(int(self.n_prompts), self._gen)

    def prompts(self):
        return self._fixed if self._fixed is not None else self.task.draw(int(self.batch), self._gen)

    def loss(self, form: Form, params: Params) -> torch.Tensor:
        x, y, xq, yq = self.prompts()
        model = token_predict if form.kind == "full" else predict
        return ((yq - model(form, params, x, y, xq)) ** 2).mean()
