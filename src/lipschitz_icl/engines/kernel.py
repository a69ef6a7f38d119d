"""The kernel engine: exact population loss for noise-free tokens, in K x K space.

A query of feature k with context counts c gives feature n the attention mass
a_n = c_n e^{M_kn} / sum_m c_m e^{M_km}, with M_kn = v_n^T Q v_k, and after averaging over f
the squared error is (a - e_k)^T Sigma (a - e_k); label noise tau adds tau^2 sum_n a_n^2 / c_n.
The expectation over the query's feature is exact (weights p_k); over counts it uses B fixed
multinomial draws (common random numbers) or the mean-field counts N p.

Gradient descent on Q moves M by -eta G (grad_M) G with G = V^T V, so in ``S`` space the
engine optimises the K x K score matrix directly (cost independent of d and N); in ``Q``
space it keeps Q (d x d), with dL/dQ = V (dL/dM)^T V^T (needed for Adam, whose update is not
equivariant to that change of variables). Loss, gradient and attention come in closed form
from ``kernel_grad.kernel_loss_grad``; ``kernel_loss`` below is the autograd reference.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import torch

from ..contract import einsum
from ..errors import ConfigError
from ..geometry import kernel_metrics
from ..inputs import is_continuous
from ..numba_support import NUMBA_MISSING, numba_installed
from .base import Engine, Objective, ScoreMetrics, SizeCheck, StepOutput
from .kernel_batch import KernelBatch, batch_key
from .kernel_grad import kernel_loss_grad, symmetrize
from .kernel_linear import count_moments, linear_kernel_loss, linear_kernel_loss_grad
from .kernel_spec import EXACT_MAX, KernelSpec, exact_count_vectors, kernel_spec
from .registry import register_engine

if TYPE_CHECKING:
    from ..config import Config
    from ..problem import Problem
    from ..tasks import TaskClass

EXACT_WORK_MAX = 2**32  # multiply-adds a step of engine.counts: exact (count vectors x K^3), about a second on a core
# multiply-adds a step of drawn counts (draws x K^3: the test errors' Sigma times each draw's attention), about ten
# seconds on a core (K = 1000 with the default 256 draws, 2.6e11, took about 30 s a step)
DRAWN_WORK_MAX = 2**36
KERNEL_MODELS = ("reduced", "linear_attention")  # the models with a closed-form population loss here


def kernel_loss(
    M: torch.Tensor,
    counts: torch.Tensor,
    sigma: torch.Tensor,
    p: torch.Tensor,
    tau: float = 0.0,
    queries: slice | None = None,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Autograd reference: population loss of the queries in ``queries`` (their p-weighted share)
    and their attention. M (K, K) scores M[k, n]; counts (B, K); sigma (K, K); p (K,); weights (B,)
    the probability of each count vector (exact counts), or None for the mean over draws."""
    K = M.shape[0]
    q = queries or slice(0, K)
    ks = torch.arange(K, device=M.device)[q]
    log_c = torch.log(counts)  # -inf where c_n = 0: no token of feature n in the prompt
    logits = log_c.unsqueeze(0) + M[q].unsqueeze(1)  # (k, B, n)
    a = torch.softmax(logits, dim=-1)
    e_k = torch.eye(K, dtype=M.dtype, device=M.device)[ks]
    err = a - e_k.unsqueeze(1)  # a - e_k
    quad = einsum("kbn,nm,kbm->kb", err, sigma, err)
    if tau > 0:
        quad = quad + tau**2 * (a.square() / counts.clamp(min=1.0).unsqueeze(0)).sum(-1)
    if weights is None:
        return 0.5 * (p[q] * quad.mean(1)).sum(), a.mean(1)
    return 0.5 * (p[q] * (quad * weights).sum(1)).sum(), torch.einsum("kbn,b->kn", a, weights)


@register_engine
class KernelEngine(Engine):
    """One kernel-engine run. Training in S space with gd/sgd goes through the batched trainer
    (``train_batch``), which shares ``kernel_loss_grad`` with this class."""

    name = "kernel"

    @classmethod
    def from_problem(cls, problem: Problem) -> KernelEngine:
        return cls(kernel_spec(problem))

    def twin(self) -> KernelEngine:
        """The engine of the same kernel spec (``kernel_spec`` would hand out this one's kept spec again), with a
        count generator of its own in the state this one's has before it draws."""
        count_gen = torch.Generator(device=self.spec.count_gen.device)
        count_gen.set_state(self.spec.count_gen.get_state())
        return KernelEngine(dataclasses.replace(self.spec, count_gen=count_gen))

    @classmethod
    def check_config(cls, cfg: Config) -> None:
        if is_continuous(cfg.features.kind):
            raise ConfigError("engine.kind", f"the kernel engine needs a finite feature set (features.kind="
                              f"{cfg.features.kind} is continuous); allowed: engine.kind=sampled, or features.kind "
                              "orthonormal, gaussian, simplex or file")
        if cfg.model.kind not in KERNEL_MODELS:
            raise ConfigError(
                "engine.kind",
                f"the kernel engine supports model.kind=reduced or linear_attention only (got {cfg.model.kind}; "
                "use engine.kind=sampled)",
            )
        for field, value, default in (("engine.train_prompts", cfg.engine.train_prompts, None),
                                      ("prompt.draw_dtype", cfg.prompt.draw_dtype, "engine")):
            if value != default:
                raise ConfigError(field, "needs engine.kind=sampled (the kernel engine has no prompts)")
        if cfg.engine.counts == "exact" and cfg.model.kind != "reduced":
            raise ConfigError("engine.counts", f"exact counts are for model.kind=reduced (got {cfg.model.kind}: its "
                              "loss needs only the counts' first two moments); allowed: multinomial, mean_field")
        if cfg.engine.counts == "exact":
            cls._check_exact(cfg.prompt.N, cfg.features.K)
        if cfg.engine.counts == "multinomial":
            cls._check_drawn(cfg.engine.draws, cfg.features.K)
        if cfg.engine.fused:
            cls._check_fused(cfg)

    @staticmethod
    def _check_exact(N: int, K: int) -> None:
        """engine.counts: exact enumerates C(N + K - 1, K - 1) count vectors, and every step takes about
        K^3 multiply-adds for each (Sigma times each query's attention): both are bounded, before any is made."""
        n = exact_count_vectors(N, K)
        if n > EXACT_MAX:
            raise ConfigError("engine.counts", f"exact: N={N}, K={K} has {n:,} count vectors (allowed: at most "
                              f"{EXACT_MAX:,}); use engine.counts=multinomial (draws) or mean_field")
        work = n * K**3
        if work > EXACT_WORK_MAX:
            raise ConfigError("engine.counts", f"exact: N={N}, K={K} has {n:,} count vectors, about {work:.2g} "
                              f"multiply-adds a step ({n:,} x K^3; allowed: at most {EXACT_WORK_MAX:.2g}, about a "
                              "second a step); use engine.counts=multinomial (draws) or mean_field")

    @staticmethod
    def _check_drawn(draws: int, K: int) -> None:
        """Drawn counts: every step takes about K^3 multiply-adds for each draw; bounded before any is made."""
        work = draws * K**3
        if work > DRAWN_WORK_MAX:
            raise ConfigError("engine.draws", f"{draws} count draws at K={K} take about {work:.2g} multiply-adds a "
                              f"step (draws x K^3; allowed: at most {DRAWN_WORK_MAX:.2g}, about ten seconds a step); "
                              "use fewer draws or engine.counts=mean_field")

    @classmethod
    def fusable(cls, cfg: Config) -> bool:
        """Whether ``engine.fused: true`` is allowed for this config (numba aside): a kernel-engine
        run of the batched trainer's setting on the CPU, with drawn (or mean-field) counts."""
        return (cfg.engine.kind == "kernel" and cls.batchable(cfg) and cfg.engine.device == "cpu"
                and cfg.engine.counts != "exact")

    @classmethod
    def _check_fused(cls, cfg: Config) -> None:
        """engine.fused: true needs the batched trainer's setting, the CPU, and numba."""
        if cfg.model.kind != "reduced":
            raise ConfigError("engine.fused", f"needs model.kind=reduced (got {cfg.model.kind}); allowed: false")
        if not cls.batchable(cfg):
            raise ConfigError("engine.fused", "needs train.optimizer gd or sgd in S space (engine.space auto or S; "
                              f"got optimizer={cfg.train.optimizer}, space={cfg.engine.space}); allowed: false")
        if cfg.engine.counts == "exact":
            raise ConfigError("engine.fused", "takes drawn or mean-field counts (got engine.counts=exact); "
                              "allowed: false")
        if cfg.engine.device != "cpu":
            raise ConfigError("engine.fused", f"runs on the CPU only (got engine.device={cfg.engine.device}); "
                              "allowed: false, or engine.device=cpu")
        if not numba_installed():
            raise ConfigError("engine.fused", f"{NUMBA_MISSING}; allowed: false")

    @classmethod
    def working_set(cls, cfg: Config, tasks: dict[str, TaskClass]) -> list[SizeCheck]:
        """The B count draws (and the multinomial sampling behind them) and the test functions'
        values on the K features."""
        K, d, N, e, M = cfg.features.K, cfg.features.d, cfg.prompt.N, cfg.engine, cfg.eval.functions
        checks = []
        if e.counts == "exact":
            n = exact_count_vectors(N, K)
            checks.append(("engine.counts", f"every count vector (exact: {n:,} for N={N}, K={K})", 8 * n * K))
        if e.counts == "multinomial":
            checks.append(("engine.draws", f"the kernel engine's count draws (draws={e.draws}, K={K})",
                           8 * e.draws * K))
            checks.append(("engine.draws", f"the multinomial sampling (draws={e.draws}, N={N})", e.draws * N))
        for task in tasks.values():
            checks.append(("eval.functions", f"the test functions on the features (functions={M}, K={K}, d={d})",
                           2 * task.elements(M, K)))
        return checks

    @classmethod
    def batchable(cls, cfg: Config) -> bool:
        """The reduced model in S space (``auto`` means S unless Adam) with plain gradient steps (gd or
        sgd). Linear attention trains in the optimizer loop (its step is a few K x K products)."""
        return cfg.train.optimizer in ("gd", "sgd") and cfg.engine.space != "Q" and cfg.model.kind == "reduced"

    @classmethod
    def stack(cls, engines: list[Engine], lrs: list[float]) -> KernelBatch:
        return KernelBatch([e.spec for e in engines], lrs)

    def batch_key(self) -> tuple:
        return batch_key(self.spec)

    def load_final_scores(self, scores: torch.Tensor | None) -> None:
        if scores is not None:  # into M's data, unrecorded (a no_grad block cost ~12 us a run)
            self.M.detach().copy_(scores)

    def __init__(self, spec: KernelSpec) -> None:
        self.spec = spec
        self.fs, self.N, self.tau = spec.fs, spec.N, spec.tau
        self.device = spec.device
        self.V = spec.fs.V.to(spec.device)
        self.p = spec.p
        self.sigma = spec.sigma  # Sigma, the task kernel on the features (symmetric)
        self.sigma_diag = spec.sigma_diagonal()  # (1, K) when Sigma is diagonal
        self.test_sigmas = spec.tests
        self.mean_field, self.resample, self.draws = spec.mean_field, spec.resample, spec.draws
        self.count_gen = spec.count_gen
        self.counts = spec.counts
        self.space = spec.space
        if self.space == "S":
            self.M = spec.M0.clone().requires_grad_(True)  # M = V^T Q^T V
            self._params = [self.M]
        else:
            self.Q = spec.Q0.clone().requires_grad_(True)
            self._params = [self.Q]

    def parameters(self) -> list[torch.Tensor]:
        return self._params

    def _scores(self) -> torch.Tensor:
        if self.space == "S":
            return self.M.detach()
        return self.V.T @ self.Q.detach().T @ self.V

    def scores(self) -> torch.Tensor:
        return self._scores()

    def model_state(self) -> dict[str, torch.Tensor]:
        """{"Q": Q} ({"Gamma": Gamma} for linear attention). In S space Q is the minimum-norm matrix
        with V^T Q^T V = M: Q = V^{+T} M^T V^+ (exact whenever M is of that form, which GD from
        V^T Q0^T V keeps)."""
        name = "Gamma" if self.spec.linear else "Q"
        if self.space == "Q":
            return {name: self.Q.detach().cpu().clone()}
        V_pinv = self.fs.pinv if self.V is self.fs.V else torch.linalg.pinv(self.V)  # V^+, (K, d)
        return {name: (V_pinv.T @ self.M.detach().T @ V_pinv).cpu()}

    def score_metrics(self) -> ScoreMetrics | None:
        """With eval.geometry: the geometry metrics of each recorded M, on the run's first count draws
        (its fixed evaluation draws), computed when the table is made."""
        if not self.spec.geometry:
            return None
        V, counts, p, linear = self.V, self.spec.counts, self.p, self.spec.linear
        return lambda M: kernel_metrics(M, V, counts, p, linear)

    def _forward(self, tests: dict[str, torch.Tensor] | None, need_grad: bool):
        """kernel_loss_grad with this run alone (R = 1)."""
        c, inv_c = self.spec.count_inputs(self.counts)
        tau2 = None if self.tau == 0 else torch.full((1,), self.tau**2, dtype=self.sigma.dtype, device=self.device)
        weights = None if self.spec.weights is None else self.spec.weights.unsqueeze(0)
        return kernel_loss_grad(
            self._scores().unsqueeze(0), c.unsqueeze(0), None if inv_c is None else inv_c.unsqueeze(0),
            self.sigma.unsqueeze(0), self.p.unsqueeze(0), tau2,
            {k: v.unsqueeze(0) for k, v in (tests or {}).items()}, need_grad, full_attn=need_grad,
            sigma_diag=self.sigma_diag, weights=weights,
        )

    def _linear(self, sigma: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Linear attention's loss, dL/dM and attention under ``sigma`` at the current counts."""
        c_mean, c2 = count_moments(self.counts)
        return linear_kernel_loss_grad(self._scores(), c_mean, c2, sigma, self.p, self.N, self.tau)

    def forward_backward(self) -> StepOutput:
        if self.resample and not self.mean_field:
            self.counts = self.spec.new_counts()
        if self.spec.linear:
            loss, g, attn = self._linear(self.sigma)
        else:
            out = self._forward(None, True)
            loss, g, attn = out.loss[0], out.grad[0], out.attn[0]  # g = dL/dM
        if self.space == "Q":
            self.Q.grad = self.V @ g.T @ self.V.T  # dL/dQ = V (dL/dM)^T V^T
        elif self.spec.gram is not None:
            self.M.grad = self.spec.gram @ g @ self.spec.gram  # S space: the preconditioned step G grad G
        else:
            self.M.grad = g
        return StepOutput(float(loss), attn)

    @torch.no_grad()
    def evaluate(self, sigma: torch.Tensor) -> float:
        """The loss at the current scores under another Sigma (e.g. of unseen functions)."""
        if self.spec.linear:
            return float(self._linear(symmetrize(sigma))[0])
        return float(self._forward({"x": symmetrize(sigma)}, False).tests["x"][0])

    def test_errors(self) -> dict[str, float]:
        if self.spec.linear:
            return {name: float(self._linear(s)[0]) for name, s in self.test_sigmas.items()}
        out = self._forward(self.test_sigmas, False)
        return {name: float(v[0]) for name, v in out.tests.items()}

    def objective_in_q(self) -> Objective:
        """The exact population loss with this engine's counts (its B draws or N p), in float64."""
        V, counts = self.V.double(), self.counts.double()
        sigma, p, tau, N, linear = self.sigma.double(), self.p.double(), self.tau, self.N, self.spec.linear
        weights = None if self.spec.weights is None else self.spec.weights.double()

        def loss_kernel(Q: torch.Tensor) -> torch.Tensor:
            M = V.T @ Q.T @ V  # M_kn = v_n^T Q v_k (Gamma for linear attention)
            if linear:
                return linear_kernel_loss(M, counts, sigma, p, N, tau)
            return kernel_loss(M, counts, sigma, p, tau, weights=weights)[0]

        return loss_kernel
