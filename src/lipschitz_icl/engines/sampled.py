"""The sampled engine: real prompts (noisy tokens, sampled functions, optional label noise).

Each step draws B prompts of N context tokens and one query (fresh each step, or one fixed set
for full-batch gradient descent), runs the model, and takes 1/2 mean (y_hat - f(x_q))^2.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..features import FeatureSet
from ..tasks import TaskClass, check_finite
from .base import Engine, StepOutput, make_generator


@dataclass
class PromptBatch:
    ids: torch.Tensor  # (B, N + 1) feature ids; the last is the query's
    x: torch.Tensor  # (B, N + 1, d) tokens
    y: torch.Tensor  # (B, N + 1) labels y_i = f(x_i) + tau eps_i (the query's label is clean)

    @property
    def target(self) -> torch.Tensor:
        return self.y[:, -1]  # f(x_q)


def draw_prompts(
    fs: FeatureSet, task: TaskClass, N: int, B: int, tau: float, gen: torch.Generator,
    device: torch.device | str = "cpu",
) -> PromptBatch:
    ids = fs.sample_ids((B, N + 1), gen)
    x = fs.tokens(ids, gen)
    funcs = task.sample(B, gen, x.dtype)
    y = check_finite(task.evaluate(funcs, x), task.label)
    if tau > 0:
        noise = tau * torch.randn(B, N, generator=gen, dtype=y.dtype)
        y = torch.cat([y[:, :N] + noise, y[:, N:]], dim=1)
    return PromptBatch(ids.to(device), x.to(device), y.to(device))


def attention_by_feature(ids: torch.Tensor, attn: torch.Tensor, K: int) -> torch.Tensor:
    """Average attention mass that queries of feature k put on context tokens of feature n."""
    ctx, q = ids[:, :-1], ids[:, -1]
    mass = torch.zeros(attn.shape[0], K, dtype=attn.dtype, device=attn.device)
    mass.scatter_add_(1, ctx, attn)  # (B, n)
    sums = torch.zeros(K, K, dtype=attn.dtype, device=attn.device).index_add_(0, q, mass)
    n_q = torch.bincount(q, minlength=K).to(attn.dtype).unsqueeze(1)
    return sums / n_q  # NaN for a query feature absent from the batch


class SampledEngine(Engine):
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
    ) -> None:
        self.fs, self.task, self.model, self.N, self.B, self.tau = fs, task, model, N, batch, tau
        self.resample, self.device = resample, device
        self.V = fs.V.to(device)
        self.gen = make_generator(seed, "prompts")
        self.batch = None if resample else self._draw()
        test_gen = make_generator(seed, "test")
        self.test_batches = {
            name: draw_prompts(fs, t, N, test_prompts, tau, test_gen, device) for name, t in test_tasks.items()
        }

    def _draw(self) -> PromptBatch:
        return draw_prompts(self.fs, self.task, self.N, self.B, self.tau, self.gen, self.device)

    def parameters(self) -> list[torch.Tensor]:
        return list(self.model.parameters())

    def _loss(self, batch: PromptBatch) -> tuple[torch.Tensor, torch.Tensor]:
        y_hat, attn = self.model(batch.x[:, :-1], batch.y[:, :-1], batch.x[:, -1])
        return 0.5 * (y_hat - batch.target).square().mean(), attn

    def forward_backward(self) -> StepOutput:
        batch = self._draw() if self.resample else self.batch
        self.model.zero_grad(set_to_none=True)
        loss, attn = self._loss(batch)
        loss.backward()
        return StepOutput(float(loss.detach()), attention_by_feature(batch.ids, attn.detach(), self.fs.K))

    def scores(self) -> torch.Tensor:
        Q = self.model.Q.detach()
        return self.V.T @ Q.T @ self.V

    @torch.no_grad()
    def test_errors(self) -> dict[str, float]:
        return {name: float(self._loss(b)[0]) for name, b in self.test_batches.items()}
