"""Training: gradient descent (the paper's algorithm), SGD on fresh batches, or Adam.

The stopping rules (``stopping``) are those of the batched trainer: the loop stops at the step
budget or when the loss reaches epsilon; a non-finite or exploding loss ends the run as
``diverged``; Ctrl-C (KeyboardInterrupt) as ``interrupted``; an error raised inside the engine
(a task returning NaN, say) as ``failed``. Every metric recorded before that is kept.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch

from .config import Config
from .engines.base import Engine, StepOutput
from .interrupts import interrupt_latch
from .optim import make_optimizer
from .recorder import Recorder
from .stopping import RunState, TrainOutcome, finite_or_none, target_loss
from .train_batch import train_batched

__all__ = ["ProgressFn", "TrainOutcome", "interrupted_outcome", "make_optimizer", "target_loss", "train"]

ProgressFn = Callable[[int, float, float], None]  # (step, loss, min_k Attn_k)


def _grad_norm(params: list[torch.Tensor]) -> float:
    return math.sqrt(sum(float(p.grad.square().sum()) for p in params if p.grad is not None))


def train(
    cfg: Config,
    engine: Engine,
    recorder: Recorder,
    progress: ProgressFn | None = None,
) -> TrainOutcome:
    """Train one run. Runs the engine can batch take the batched trainer, with one run (the same
    code path as ``lipschitz_icl.batch.run_many``); the rest the optimizer loop below."""
    if engine.batchable(cfg):
        on_record = None if progress is None else (lambda i, step, loss, attn_min: progress(step, loss, attn_min))
        outcome = train_batched([cfg], [engine], [recorder], on_record)[0]
        engine.load_final_scores(outcome.final_scores)
        return outcome
    state = RunState()
    start = time.perf_counter()
    try:
        with interrupt_latch() as check_interrupt:
            _optimise(cfg, engine, recorder, progress, state, check_interrupt)
    except KeyboardInterrupt:
        state.status = "interrupted"
    except Exception as e:  # noqa: BLE001 - recorded in the run, never a crash
        state.status, state.error = "failed", f"{type(e).__name__}: {e}"
    state.wall_s = time.perf_counter() - start
    return state.outcome()


def _optimise(cfg: Config, engine: Engine, recorder: Recorder, progress: ProgressFn | None, state: RunState,
              check_interrupt: Callable[[], None]) -> None:
    """The optimizer loop: evaluate, apply the stopping rules, record at log steps, step."""
    opt = make_optimizer(cfg.train.optimizer, engine.parameters(), cfg.train.lr)
    for step in range(cfg.train.steps + 1):
        check_interrupt()  # a Ctrl-C that some library swallowed is raised here
        state.steps = step
        out = engine.forward_backward()  # the loss and attention at this step, gradients filled
        if observe_step(cfg, engine, recorder, state, step, out, progress):
            return
        opt.step()


def observe_step(cfg: Config, engine: Engine, recorder: Recorder, state: RunState, step: int, out: StepOutput,
                 progress: ProgressFn | None = None) -> bool:
    """A step's stopping rules and, at a log step, its record (test errors, gradient norm, geometry, scores), from
    ``out`` and the engine's model before its update. True when the run ends here."""
    attn_self = torch.diagonal(out.attn).tolist()  # Attn_k (none for continuous inputs)
    attn_min = float(torch.diagonal(out.attn).min()) if attn_self else math.nan
    record, ended = state.observe(cfg, step, out.loss, attn_min, attn_self)
    if record:
        state.test_errors = engine.test_errors()
        extra = {**state.test_errors, "grad_norm": _grad_norm(engine.parameters()), **engine.geometry()}
        recorder.record(step, out.loss, out.attn, engine.scores(), extra, heads=out.heads)
        if progress is not None:
            progress(step, out.loss, attn_min)
    return ended


def interrupted_outcome(recorder: Recorder) -> TrainOutcome:
    """The outcome of a run interrupted outside the training loop: whatever the recorder holds."""
    df = recorder.frame()
    steps = int(df.step.max()) if len(df) else 0

    def last(metric: str) -> float | None:
        rows = df[df.metric == metric]
        return finite_or_none(float(rows.value.iloc[-1])) if len(rows) else None

    return TrainOutcome("interrupted", steps, 0.0, last("loss"), last("attn_min"), None, None)
