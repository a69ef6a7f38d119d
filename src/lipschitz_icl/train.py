"""Training: gradient descent (the paper's algorithm), SGD on fresh batches, or Adam.

The loop stops at the step budget or when the loss reaches epsilon. A non-finite or exploding
loss ends the run as ``diverged``; Ctrl-C (KeyboardInterrupt) as ``interrupted``; an error
raised inside the engine (a task returning NaN, say) as ``failed``. Every metric recorded
before that is kept.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from .config import Config
from .engines.base import Engine
from .engines.kernel import KernelEngine
from .engines.kernel_batch import KernelBatch
from .recorder import Recorder
from .train_batch import train_kernel_batch

ProgressFn = Callable[[int, float, float], None]  # (step, loss, min_k Attn_k)


@dataclass
class TrainOutcome:
    status: str  # converged | budget | diverged | interrupted | failed
    steps: int  # updates done (the step at which the run ended)
    wall_s: float
    final_loss: float | None
    min_attn: float | None  # final min_k Attn_k
    T_1: int | None  # first step with min_k Attn_k >= analysis.t1_level
    T_eps: int | None  # first step with loss <= eps (eps times the initial loss when eps_mode=relative)
    test_errors: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    final_scores: torch.Tensor | None = None  # (K, K) scores at the end (batched kernel trainer only)


def target_loss(tc, loss_0: float) -> float:
    """The loss a run stops at: eps, or eps times the initial loss when eps_mode=relative."""
    return tc.eps * loss_0 if tc.eps_mode == "relative" else tc.eps


def make_optimizer(cfg: Config, params: list[torch.Tensor]) -> torch.optim.Optimizer:
    if cfg.train.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.train.lr)
    return torch.optim.SGD(params, lr=cfg.train.lr)  # gd and sgd: plain steps of size eta


def _grad_norm(params: list[torch.Tensor]) -> float:
    return math.sqrt(sum(float(p.grad.square().sum()) for p in params if p.grad is not None))


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def batchable(cfg: Config, engine: Engine) -> bool:
    """Runs the batched kernel trainer handles: kernel engine in S space with gd or sgd."""
    return isinstance(engine, KernelEngine) and engine.space == "S" and cfg.train.optimizer in ("gd", "sgd")


def train(
    cfg: Config,
    engine: Engine,
    recorder: Recorder,
    progress: ProgressFn | None = None,
) -> TrainOutcome:
    if batchable(cfg, engine):
        # the same code path as lipschitz_icl.batch.run_many, with one run
        on_record = None if progress is None else (lambda i, step, loss, attn_min: progress(step, loss, attn_min))
        outcome = train_kernel_batch([cfg], KernelBatch([engine.spec], [cfg.train.lr]), [recorder], on_record)[0]
        if outcome.final_scores is not None:
            with torch.no_grad():
                engine.M.copy_(outcome.final_scores)
        return outcome
    tc = cfg.train
    opt = make_optimizer(cfg, engine.parameters())
    start = time.perf_counter()
    status, error = "budget", None
    T_1 = T_eps = None
    last_loss = last_attn = None
    test_errors: dict[str, float] = {}
    step = 0
    loss_0 = None
    try:
        for step in range(tc.steps + 1):
            out = engine.forward_backward()
            if loss_0 is None:
                loss_0 = max(out.loss, 1e-300) if math.isfinite(out.loss) else math.inf
                eps = target_loss(tc, loss_0)
            if not math.isfinite(out.loss) or out.loss > tc.diverge_factor * loss_0:
                status = "diverged"
                break
            attn_min = float(torch.diagonal(out.attn).min())
            if T_1 is None and attn_min >= cfg.analysis.t1_level:
                T_1 = step
            done = out.loss <= eps
            last_loss, last_attn = out.loss, attn_min
            if step % tc.log_every == 0 or done or step == tc.steps:
                test_errors = engine.test_errors()
                extra = {**test_errors, "grad_norm": _grad_norm(engine.parameters())}
                recorder.record(step, out.loss, out.attn, engine.scores(), extra, heads=out.heads)
                if progress is not None:
                    progress(step, out.loss, attn_min)
            if done:
                status, T_eps = "converged", step
                break
            if step == tc.steps:
                break
            opt.step()
    except KeyboardInterrupt:
        status = "interrupted"
    except Exception as e:  # noqa: BLE001 - recorded in the run, never a crash
        status, error = "failed", f"{type(e).__name__}: {e}"
    return TrainOutcome(
        status=status,
        steps=step,
        wall_s=time.perf_counter() - start,
        final_loss=_finite(last_loss),
        min_attn=_finite(last_attn),
        T_1=T_1,
        T_eps=T_eps,
        test_errors={k: v for k, v in test_errors.items() if math.isfinite(v)},
        error=error,
    )


def interrupted_outcome(recorder: Recorder) -> TrainOutcome:
    """The outcome of a run interrupted outside the training loop: whatever the recorder holds."""
    df = recorder.frame()
    steps = int(df.step.max()) if len(df) else 0

    def last(metric: str) -> float | None:
        rows = df[df.metric == metric]
        return _finite(float(rows.value.iloc[-1])) if len(rows) else None

    return TrainOutcome("interrupted", steps, 0.0, last("loss"), last("attn_min"), None, None)
