"""R sampled-engine runs stepped together where it pays: many small runs that share their shapes (a suite's seeds
and settings, a sweep's points), each trained exactly as alone.

What is shared is the arithmetic that costs a small run mostly call overhead: the functions of all R runs evaluated
in one call (the task's ``evaluate`` over the runs' rows put together), and one forward and backward pass from the
logits to the loss over the stacked prompts. What stays per run is everything a run's numbers could depend on the
others through: its draws (its own generator, in ``draw_prompts``' order), the products with its matrix (M x_q and
the gradient (dL/d(M x_q))^T x_q, the very ``mm`` that autograd makes alone), its optimizer, its test errors,
geometry and records. Every other operation is row by row, so a run's loss, gradient and parameters are those of
``SampledEngine.forward_backward`` bit for bit (tests/test_sampled_batch.py); a run whose task returns NaN fails
alone, with the message it fails with alone.

Where it pays (``stacking_pays``, the engine's ``stackable``): the single-matrix models (``reduced``,
``linear_attention``; M is Q or Gamma) on fresh or fixed prompts (no finite training set), with at most STACK_TOKENS
tokens a run-step. Measured per run-step (``benchmarks/collins_batched.py``: eight Collins-config runs, relu_net
labels, Adam, d = 3; docs/PERFORMANCE.md, "A batched sampled path for the Collins runs"): 1.73x at 32 prompts of 33
tokens, 1.55x at 64 x 33, 1.49x at 128 x 9, 1.29x at 128 x 33, 1.08x at 512 x 9; slower above that (0.96x at
128 x 129, 0.89x at 512 x 33), where the stacked tensors leave the cache and the draws, which stay per run, dominate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from ..models import effective_Q, is_linear
from ..tasks import check_finite
from .base import StepOutput
from .prompts import add_noise, attention_by_feature, draw_inputs, evaluate_labels

if TYPE_CHECKING:
    from ..config import Config
    from .sampled import SampledEngine

STACK_TOKENS = 4608  # tokens B (N + 1) a run-step at most (measured: 1.08x at 4,608 tokens, 0.96x at 16,512)
STACK_RUNS = 16  # runs stepped together at most (step alone, 32-128 prompts: 2 runs 1.08-1.39x, 8 1.24-2.05x,
# 16 1.32-2.17x, 32 no more)
STACK_MODELS = ("reduced", "linear_attention")  # one parameter, the merged matrix M of x_i^T M x_q


def stacking_pays(cfg: Config) -> bool:
    """Whether runs of ``cfg`` train together (``SampledBatch``) where a suite or sweep has several of its shape."""
    e = cfg.engine
    return (e.kind == "sampled" and cfg.model.kind in STACK_MODELS and e.train_prompts is None
            and e.batch * (cfg.prompt.N + 1) <= STACK_TOKENS)


def stack_key(engine: SampledEngine) -> tuple:
    """Runs with equal keys can be stepped together: one task evaluation (its class and parameters), one shape."""
    task = engine.task
    params = tuple(sorted((k, repr(v)) for k, v in task.params.items()))
    return (type(task).__qualname__, task.L, params, engine.N, engine.B, engine.resample, engine.tau > 0,
            engine.draw_dtype, type(engine.model).__qualname__, effective_Q(engine.model).dtype, str(engine.device))


class SampledBatch:
    """Runs of equal ``stack_key``: ``forward_backward(rows)`` steps the runs ``rows`` (indices into ``engines``),
    each filling its own model's gradient, as ``SampledEngine.forward_backward`` does alone."""

    def __init__(self, engines: Sequence[SampledEngine]) -> None:
        keys = {stack_key(e) for e in engines}
        if len(keys) != 1:
            raise ValueError(f"runs of different shapes cannot be stepped together: {sorted(map(str, keys))}")
        self.engines = list(engines)
        e0 = self.engines[0]
        self.task, self.N, self.draw_dtype, self.linear = e0.task, e0.N, e0.draw_dtype, is_linear(e0.model)
        self._fixed: tuple[tuple[int, ...], tuple] | None = None  # full-batch runs: (their rows, their prompts)

    def forward_backward(self, rows: list[int]) -> list[StepOutput | Exception]:
        """One step of the runs ``rows``: each one's StepOutput, or the error its prompts raised (that run alone)."""
        ids, x, y = self._prompts(rows)
        B = self.engines[rows[0]].B
        outs: list[StepOutput | Exception | None] = [None] * len(rows)
        for j in range(len(rows)):  # a run whose functions are not finite fails alone, as it does alone
            try:
                check_finite(y[j * B:(j + 1) * B], self.task.label)
            except Exception as err:  # noqa: BLE001 - that run's failure, recorded in it
                outs[j] = err
        losses, attn = self._loss_and_grads(rows, x, y)
        for j, i in enumerate(rows):
            if outs[j] is None:
                outs[j] = self._output(self.engines[i], float(losses[j]), ids[j * B:(j + 1) * B], attn[j])
        return outs  # type: ignore[return-value] - every row has its output or its error

    def _prompts(self, rows: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The rows' prompts put together, (R B, N + 1) ids, (R B, N + 1, d) tokens and (R B, N + 1) labels: each
        run's drawn from its own generator (fresh), or its one fixed batch (put together once for these rows)."""
        if self._fixed is not None and self._fixed[0] == tuple(rows):
            return self._fixed[1]
        runs = [self.engines[i] for i in rows]
        if not runs[0].resample:  # full-batch gradient descent: each run's fixed prompts
            fixed = tuple(torch.cat([getattr(e.batch, name) for e in runs]) for name in ("ids", "x", "y"))
            self._fixed = (tuple(rows), fixed)
            return fixed
        drawn = [draw_inputs(e.fs, e.task, e.N, e.B, e.tau, e.gen, e.draw_dtype) for e in runs]
        x = torch.cat([d.x for d in drawn])
        funcs = {k: torch.cat([d.funcs[k] for d in drawn]) for k in drawn[0].funcs}
        y = evaluate_labels(self.task, funcs, x, self.draw_dtype)  # every run's rows in one call
        y = add_noise(y, None if drawn[0].noise is None else torch.cat([d.noise for d in drawn]))
        device = runs[0].device
        return torch.cat([d.ids for d in drawn]).to(device), x.to(device), y.to(device)

    def _loss_and_grads(self, rows: list[int], x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each run's loss 1/2 mean (y_hat - f(x_q))^2 (R,) and attention (R, B, N); its gradient in its own M.grad."""
        R = len(rows)
        mats = [effective_Q(self.engines[i].model) for i in rows]  # M: Q (reduced) or Gamma (linear attention)
        x = x.view(R, -1, self.N + 1, x.shape[-1])
        y = y.view(R, -1, self.N + 1)
        x_q = x[:, :, -1]  # (R, B, d)
        with torch.no_grad():
            mx = torch.stack([q @ M.T for q, M in zip(x_q, mats, strict=True)])  # M x_q, each run's own product
        mx.requires_grad_(True)
        logits = torch.matmul(x[:, :, :-1], mx.unsqueeze(-1)).squeeze(-1)  # x_i^T M x_q, (R, B, N)
        weights = logits / logits.shape[-1] if self.linear else torch.softmax(logits, dim=-1)
        y_hat = (weights * y[:, :, :-1]).sum(-1)
        losses = 0.5 * (y_hat - y[:, :, -1]).square().mean(-1)  # (R,)
        losses.sum().backward()  # d(sum)/d(loss_r) = 1: each run's gradient is its own loss's
        for M, g, q in zip(mats, mx.grad, x_q, strict=True):
            M.grad = torch.mm(g.t(), q)  # dL/dM = (dL/d(M x_q))^T x_q, as autograd's mm backward computes it alone
        return losses.detach(), weights.detach()

    def _output(self, engine: SampledEngine, loss: float, ids: torch.Tensor, attn: torch.Tensor) -> StepOutput:
        """A run's StepOutput from its slice of the step, as ``SampledEngine.forward_backward`` makes it."""
        if engine.V is None:  # continuous inputs: no feature to aggregate the attention by
            return StepOutput(loss, attn.new_zeros(0, 0))
        return StepOutput(loss, attention_by_feature(ids, attn, engine.fs.K))
