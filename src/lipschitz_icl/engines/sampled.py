"""The sampled engine: real prompts (noisy tokens, sampled functions, optional label noise).

Each step draws B prompts of N context tokens and one query (fresh each step, or one fixed set
for full-batch gradient descent), runs the model, and takes 1/2 mean (y_hat - f(x_q))^2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from ..contract import einsum
from ..errors import ConfigError
from ..features import FeatureSet
from ..geometry import prompt_metrics, query_distances
from ..inputs import records_geometry
from ..models import effective_Q, is_linear
from ..rng import make_generator
from ..tasks import TaskClass
from .base import Engine, Objective, SizeCheck, StepOutput
from .kernel_spec import engine_inputs
from .prompts import DRAW_DTYPES, PromptBatch, attention_by_feature, draw_prompts
from .registry import register_engine
from .sampled_batch import STACK_RUNS, SampledBatch, stack_key, stacking_pays

if TYPE_CHECKING:
    from ..config import Config
    from ..problem import Problem


@register_engine
class SampledEngine(Engine):
    """Trains on fresh prompts every step (``resample``), one fixed batch (full-batch GD), or a
    fixed training set of M prompts (``train_prompts``: full batch if batch >= M, else
    minibatches of ``batch`` distinct prompts drawn from the M with the engine's generator)."""

    name = "sampled"
    stack_runs = STACK_RUNS

    @classmethod
    def from_problem(cls, problem: Problem) -> SampledEngine:
        cfg = problem.config
        device, _, fs, test_tasks, model = engine_inputs(problem)
        return cls(
            fs, problem.task, model.to(device), cfg.prompt.N, batch=cfg.engine.batch,
            resample=cfg.resample, tau=cfg.task.label_noise, seed=cfg.seed, test_tasks=test_tasks,
            test_prompts=cfg.eval.functions, device=device, train_prompts=cfg.engine.train_prompts,
            geometry=records_geometry(cfg), draw_dtype=DRAW_DTYPES[cfg.prompt.draw_dtype],
        )

    @classmethod
    def check_config(cls, cfg: Config) -> None:
        if cfg.engine.fused:
            raise ConfigError("engine.fused", "needs engine.kind=kernel (the sampled engine has no fused step)")
        if cfg.engine.train_prompts is not None and cfg.engine.resample:
            raise ConfigError("engine.resample", "cannot be true with a fixed training set (engine.train_prompts)")

    @classmethod
    def stackable(cls, cfg: Config) -> bool:
        """Small runs of the single-matrix models (``sampled_batch.stacking_pays``)."""
        return stacking_pays(cfg)

    @classmethod
    def stack_steps(cls, engines: list[Engine]) -> SampledBatch:
        return SampledBatch(engines)  # type: ignore[arg-type] - equal batch keys: sampled engines

    def batch_key(self) -> tuple:
        return stack_key(self)

    @classmethod
    def working_set(cls, cfg: Config, tasks: dict[str, TaskClass]) -> list[SizeCheck]:
        """A batch of prompts and the test prompts (tokens, or the task's own larger need), and
        the fixed training set when there is one."""
        d, e = cfg.features.d, cfg.engine
        points = cfg.prompt.N + 1  # context tokens and the query
        checks = []
        for field, n, what in (("engine.batch", e.batch, "a batch of prompts"),
                               ("eval.functions", cfg.eval.functions, "the test prompts")):
            for name, task in tasks.items():
                size = 4 * max(n * points * d, task.elements(n, points))
                checks.append((field, f"{what} ({field.split('.')[1]}={n}, N+1={points}, d={d}, "
                               f"{name}={getattr(task, 'name', '?')})", size))
        if e.train_prompts is not None:  # the fixed training set is kept whole
            checks.append(("engine.train_prompts", f"the fixed training set (train_prompts={e.train_prompts}, "
                           f"N+1={points}, d={d})", 2 * e.train_prompts * points * (d + 1)))
        return checks

    def __init__(
        self,
        fs: FeatureSet,
        task: TaskClass,
        model: nn.Module,
        N: int,
        *,
        batch: int,
        resample: bool,
        tau: float,
        seed: int,
        test_tasks: dict[str, TaskClass],
        test_prompts: int,
        device: torch.device,
        train_prompts: int | None = None,
        geometry: bool = False,
        draw_dtype: torch.dtype | None = None,
    ) -> None:
        self.fs, self.task, self.model, self.N, self.B, self.tau = fs, task, model, N, batch, tau
        self.draw_dtype = draw_dtype  # prompt.draw_dtype: the training prompts' draws (test prompts: engine.dtype)
        self.device = device
        self.resample = resample and train_prompts is None
        self.V = fs.V.to(device) if isinstance(fs, FeatureSet) else None  # None: continuous inputs
        self.record_geometry = geometry and effective_Q(model) is not None
        self._distances: tuple[torch.Tensor, torch.Tensor] | None = None  # of the evaluation prompts
        self.gen = make_generator(seed, "prompts")
        self.train_set: PromptBatch | None = None  # the M prompts of a finite training set
        self.last_index: torch.Tensor | None = None  # rows of train_set in the last minibatch
        if train_prompts is not None:
            self.train_set = draw_prompts(fs, task, N, train_prompts, tau, self.gen, device, draw_dtype)
            self.batch = self.train_set if batch >= train_prompts else None
        else:
            self.batch = None if self.resample else self._draw()
        test_gen = make_generator(seed, "test")
        self.test_batches = {
            name: draw_prompts(fs, t, N, test_prompts, tau, test_gen, device) for name, t in test_tasks.items()
        }

    def _draw(self) -> PromptBatch:
        return draw_prompts(self.fs, self.task, self.N, self.B, self.tau, self.gen, self.device, self.draw_dtype)

    def _next_batch(self) -> PromptBatch:
        if self.batch is not None:
            return self.batch
        if self.train_set is None:
            return self._draw()
        M = self.train_set.ids.shape[0]
        idx = torch.randperm(M, generator=self.gen)[: self.B]  # B distinct prompts of the M
        self.last_index = idx
        idx = idx.to(self.device)
        t = self.train_set
        return PromptBatch(t.ids[idx], t.x[idx], t.y[idx])

    def parameters(self) -> list[torch.Tensor]:
        return list(self.model.parameters())

    def _loss(self, batch: PromptBatch) -> tuple[torch.Tensor, torch.Tensor]:
        y_hat, attn = self.model(batch.x[:, :-1], batch.y[:, :-1], batch.x[:, -1])
        return 0.5 * (y_hat - batch.target).square().mean(), attn

    def forward_backward(self) -> StepOutput:
        batch = self._next_batch()
        self.model.zero_grad(set_to_none=True)
        loss, attn = self._loss(batch)
        loss.backward()
        if self.V is None:  # continuous inputs: no feature to aggregate the attention by
            return StepOutput(float(loss.detach()), attn.new_zeros(0, 0))
        by_feature = attention_by_feature(batch.ids, attn.detach(), self.fs.K)
        if by_feature.dim() == 2:
            return StepOutput(float(loss.detach()), by_feature)
        heads = by_feature.reshape(-1, by_feature.shape[-3], self.fs.K, self.fs.K)  # (layers, heads, K, K)
        return StepOutput(float(loss.detach()), heads[-1].mean(0), heads)

    def scores(self) -> torch.Tensor | None:
        Q = effective_Q(self.model)
        if Q is None or self.V is None:
            return None
        return self.V.T @ Q.detach().T @ self.V

    @torch.no_grad()
    def geometry(self) -> dict[str, float]:
        """The geometry metrics of the merged key-query matrix on the fixed evaluation prompts (the
        ``test_error`` prompts), when ``eval.geometry`` asks for them and the model has one."""
        if not self.record_geometry:
            return {}
        b = self.test_batches["test_error"]
        if self._distances is None:  # the evaluation prompts are fixed: their distances once
            self._distances = query_distances(b.x_ctx, b.x_q)
        return prompt_metrics(effective_Q(self.model).detach(), b.x_ctx, b.x_q, is_linear(self.model), self._distances)

    def model_state(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()}

    @torch.no_grad()
    def test_errors(self) -> dict[str, float]:
        return {name: float(self._loss(b)[0]) for name, b in self.test_batches.items()}

    def objective_in_q(self) -> Objective:
        """The merged model's loss on one fixed batch of prompts (the engine's full batch, or the
        next fresh batch when it resamples), in float64: softmax attention (the reduced model's, for
        every softmax model) or, for linear attention, its loss in Gamma."""
        batch = self.batch if self.batch is not None else self._draw()
        x, y = batch.x.double(), batch.y.double()
        target = y[:, -1]  # f(x_q)
        linear = is_linear(self.model)

        def loss_sampled(Q: torch.Tensor) -> torch.Tensor:
            logits = einsum("bnd,de,be->bn", x[:, :-1], Q, x[:, -1])  # x_i^T Q x_q
            weights = logits / logits.shape[-1] if linear else torch.softmax(logits, dim=-1)
            y_hat = (weights * y[:, :-1]).sum(-1)
            return 0.5 * (y_hat - target).square().mean()

        return loss_sampled
