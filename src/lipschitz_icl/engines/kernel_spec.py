"""Everything one kernel-engine run needs, built once from its Problem.

The single-run engine and the batched trainer both start from a KernelSpec, so a run gets the
same initial scores, Sigma, test kernels and count draws whichever path trains it.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ..features import FeatureSet
from ..inputs import ContinuousInputs, records_geometry
from ..models import effective_Q, is_linear, make_model
from ..recent import kept, new_cache, tensor_marks
from ..rng import make_generator
from ..tasks import make_task
from .base import resolve_device
from .kernel_grad import diagonal_of, symmetrize

if TYPE_CHECKING:
    from ..problem import Problem

COUNT_CHUNK = 2**22  # feature ids drawn per call of torch.multinomial (part of the random stream: keep)
EXACT_MAX = 400_000  # count vectors of engine.counts: exact (C(N + K - 1, K - 1)); above it, draw them


def exact_count_vectors(N: int, K: int) -> int:
    """How many count vectors c (c_n >= 0, sum c_n = N) there are: C(N + K - 1, K - 1)."""
    return math.comb(N + K - 1, K - 1)


def exact_counts(N: int, p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Every count vector of N tokens over K features (B, K) with its multinomial probability (B,):
    the expectation over counts without sampling error (``engine.counts: exact``)."""
    K = p.shape[0]
    rows = [c for c in _compositions(N, K)]
    counts = torch.tensor(rows, dtype=torch.float64)
    logp = torch.log(p.double().cpu())
    log_w = math.lgamma(N + 1) - torch.lgamma(counts + 1).sum(1) + torch.where(
        counts > 0, counts * logp, torch.zeros_like(counts)).sum(1)
    return counts.to(p.dtype), torch.exp(log_w).to(p.dtype)


def _compositions(N: int, K: int):
    """The tuples of K non-negative integers summing to N (stars and bars)."""
    for bars in itertools.combinations(range(N + K - 1), K - 1):
        edges = (-1, *bars, N + K - 1)
        yield tuple(edges[i + 1] - edges[i] - 1 for i in range(K))


def draw_counts(fs: FeatureSet, N: int, B: int, gen: torch.Generator) -> torch.Tensor:
    """B multinomial(N, p) count vectors c (B, K) float: the context counts of B prompts."""
    out = torch.zeros(B, fs.K, dtype=fs.V.dtype)
    rows_per = max(1, COUNT_CHUNK // max(N, 1))
    for start in range(0, B, rows_per):
        rows = min(rows_per, B - start)
        ids = torch.multinomial(fs.p.cpu(), rows * N, replacement=True, generator=gen).view(rows, N)
        out[start : start + rows].scatter_add_(1, ids, torch.ones(rows, N, dtype=out.dtype))
    return out


def cast_features(fs: FeatureSet | ContinuousInputs, dtype: torch.dtype) -> FeatureSet | ContinuousInputs:
    """The features with V and p in ``dtype`` (continuous inputs: drawn in ``dtype``)."""
    if isinstance(fs, ContinuousInputs):
        return fs.with_dtype(dtype)
    if fs.V.dtype == dtype and fs.p.dtype == dtype:
        return fs  # shared read-only (``problem.build_inputs``), with what it computed once
    return FeatureSet(fs.V.to(dtype), fs.p.to(dtype), fs.noise)


@dataclass
class KernelSpec:
    fs: FeatureSet  # features in the training dtype (CPU; count draws use fs.p)
    N: int
    draws: int
    mean_field: bool
    resample: bool
    space: str  # "S" (train M = V^T Q^T V) or "Q"
    tau: float  # label noise tau
    count_gen: torch.Generator
    counts: torch.Tensor  # (B, K) initial counts, on device (B = 1 for mean field)
    sigma: torch.Tensor  # (K, K) symmetric Sigma, on device
    tests: dict[str, torch.Tensor]  # name -> (K, K) symmetric Sigma of the unseen functions
    p: torch.Tensor  # (K,) p_k, on device
    gram: torch.Tensor | None  # G = V^T V on device, None when G = I (no preconditioning)
    M0: torch.Tensor  # (K, K) initial scores M = V^T Q0^T V, on device
    Q0: torch.Tensor  # (d, d) initial Q, on device
    device: torch.device
    fused: bool = False  # engine.fused: the compiled step (kernel_fused)
    weights: torch.Tensor | None = None  # (B,) probability of each count vector (engine.counts: exact), on device
    linear: bool = False  # model.kind=linear_attention: the scores are v_n^T Gamma v_k (kernel_linear)
    geometry: bool = False  # eval.geometry: the recorder derives the geometry metrics from the scores
    diag_memo: tuple = ()  # (sigma, its version, its diagonal_of): shared by the copies of a kept spec

    def sigma_diagonal(self) -> torch.Tensor | None:
        """``diagonal_of(sigma)`` (1, K) when Sigma is diagonal, else None: computed once for a Sigma (the copies
        of a kept spec, the twins of an engine share it), again where Sigma was replaced or changed in place by torch
        (its version counter; a kept spec changed otherwise is built again by ``kernel_spec``, ``spec_mark``)."""
        memo = self.diag_memo
        if not memo or memo[0] is not self.sigma or memo[1] != self.sigma._version:
            self.diag_memo = memo = (self.sigma, self.sigma._version, diagonal_of(self.sigma.unsqueeze(0)))
        return memo[2]

    @property
    def K(self) -> int:
        return self.fs.K

    @property
    def dtype(self) -> torch.dtype:
        return self.sigma.dtype

    def new_counts(self) -> torch.Tensor:
        """The next count draws: (B, K) on device (mean field: N p, always the same)."""
        if self.mean_field:
            return (self.N * self.fs.p).unsqueeze(0).to(self.device)
        if self.weights is not None:  # exact: every count vector, always the same
            return exact_counts(self.N, self.fs.p)[0].to(self.device)
        return draw_counts(self.fs, self.N, self.draws, self.count_gen).to(self.device)

    def count_inputs(self, counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The counts as ``kernel_loss_grad`` takes them: c (K, B), feature first, and, with label
        noise, 1 / max(c, 1)."""
        c = counts.T.contiguous()
        return c, (1.0 / c.clamp(min=1.0) if self.tau > 0 else None)


def engine_inputs(problem: Problem) -> tuple[torch.device, torch.dtype, FeatureSet, dict, torch.nn.Module]:
    """What every engine starts from: device, dtype, the features in that dtype, the task classes
    of the unseen-function tests (metric name -> class), and the model at initialisation."""
    cfg = problem.config
    dtype = problem.dtype
    test_tasks = {"test_error": problem.task}
    if cfg.eval.other_class:
        test_tasks["test_error_other"] = make_task(cfg.eval.other_class, cfg.task.L, cfg.features.d)
    model = make_model(cfg.model, cfg.features.d, make_generator(cfg.seed, "init"), dtype, "cpu")
    return resolve_device(cfg.engine.device), dtype, cast_features(problem.features, dtype), test_tasks, model


# what only the training loop reads: runs that differ in nothing else have the same KernelSpec
LOOP_ONLY = {"name": True, "analysis": True, "theory": True,
             "train": {"lr", "steps", "eps", "eps_mode", "log_every", "diverge_factor"}}
RECENT_SPECS = 64  # specs kept for the next configs that differ only in their training loop (a sweep's step sizes)
KEPT_ELEMENTS = 2**16  # only specs this small are kept (count draws and test Sigmas): at most 32 MB in all
_RECENT_SPECS: dict[tuple, tuple[KernelSpec, tuple]] = new_cache()  # oldest first; never handed out (copies are)


def kernel_spec(problem: Problem) -> KernelSpec:
    """Everything a kernel run needs, from its problem. Configs that differ only in what the training loop reads
    (``LOOP_ONLY``: eta, budget, epsilon, logging) get the same spec, built once: a copy sharing its tensors
    (read only) with a generator of its own for later count draws."""
    cfg = problem.config
    if cfg.features.kind == "file":  # read again each time: the file may have changed
        return _kernel_spec(problem)
    key = (cfg.model_dump_json(exclude=LOOP_ONLY), id(problem.features))  # the features: shared by build_inputs
    spec = kept(_RECENT_SPECS, key, lambda: _kernel_spec(problem), RECENT_SPECS,
                lambda s: s.counts.numel() + sum(t.numel() for t in s.tests.values()) <= KEPT_ELEMENTS, spec_mark)
    count_gen = torch.Generator(device=spec.count_gen.device)
    count_gen.set_state(spec.count_gen.get_state())
    return dataclasses.replace(spec, count_gen=count_gen)


def spec_mark(spec: KernelSpec) -> tuple:
    """What changes when a tensor that copies of a kept spec share is changed in place (``recent.kept``)."""
    return tensor_marks(spec.fs.V, spec.fs.p, spec.counts, spec.weights, spec.sigma, *spec.tests.values(), spec.p,
                        spec.gram, spec.M0, spec.Q0)


def _kernel_spec(problem: Problem) -> KernelSpec:
    cfg = problem.config
    device, dtype, fs, test_tasks, model = engine_inputs(problem)
    test_gen = make_generator(cfg.seed, "test")
    tests = {}
    for name, task in test_tasks.items():
        F = task.values_on(task.sample(cfg.eval.functions, test_gen, torch.float64), problem.features.V)
        tests[name] = symmetrize(F.T @ F / F.shape[0]).to(dtype).to(device)  # Sigma of the unseen functions
    space = cfg.engine.space
    if space == "auto":
        space = "Q" if cfg.train.optimizer == "adam" else "S"
    V = fs.V.to(device)
    Q0 = effective_Q(model).detach().to(device)  # Q^(0) (Gamma^(0) for linear attention)
    G = fs.gram.to(device)
    identity = torch.equal(G, torch.eye(fs.K, dtype=G.dtype, device=device))
    spec = KernelSpec(
        fs=fs, N=cfg.prompt.N, draws=cfg.engine.draws, mean_field=cfg.engine.counts == "mean_field",
        resample=cfg.resample and cfg.engine.counts == "multinomial", space=space, tau=cfg.task.label_noise,
        count_gen=make_generator(cfg.seed, "counts"), counts=torch.empty(0),
        sigma=symmetrize(problem.kernel.sigma.double()).to(dtype).to(device), tests=tests,
        p=fs.p.to(device), gram=None if identity else G, M0=V.T @ Q0.T @ V, Q0=Q0, device=device,
        fused=cfg.engine.fused, linear=is_linear(model), geometry=records_geometry(cfg),
    )
    spec.sigma_diagonal()  # memoised before the spec is kept: its copies inherit it
    if cfg.engine.counts == "exact":
        spec.counts, weights = exact_counts(cfg.prompt.N, fs.p)
        spec.counts, spec.weights = spec.counts.to(device), weights.to(device)
    else:
        spec.counts = spec.new_counts()
    return spec
