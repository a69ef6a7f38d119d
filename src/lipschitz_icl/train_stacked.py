"""Runs that take their steps together (``Engine.stackable``: small sampled-engine runs of one shape), each trained as
``train.train`` trains it alone.

Per step the engine's ``StepBatch`` fills every live run's gradient at once; then each run, in turn, applies its
own stopping rules and records (``train.observe_step``, the single-run loop's own code) and takes its own optimizer
step. A run that ends leaves the step; a run whose step raised ends ``failed`` alone; Ctrl-C ends the live runs
``interrupted``. So a run's metrics, summary (but ``wall_s``: from the start of the batch) and parameters are those it
has alone (tests/test_sampled_batch.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .config import Config
from .engines.base import Engine
from .interrupts import interrupt_latch
from .optim import make_optimizer
from .recorder import Recorder
from .stopping import RunState, TrainOutcome
from .train import observe_step
from .train_batch import FinishFn, RecordFn, StepFn


def train_stacked(
    cfgs: list[Config],
    engines: list[Engine],
    recorders: list[Recorder],
    on_record: RecordFn | None = None,
    on_finish: FinishFn | None = None,
    on_step: StepFn | None = None,
) -> list[TrainOutcome]:
    """Train the runs of ``engines`` (run i is ``cfgs[i]``; equal ``batch_key``s) stepping together; returns one
    TrainOutcome per run. ``on_finish(i, outcome)`` as each run ends, ``on_step()`` after every step."""
    loop = _StackedLoop(cfgs, engines, recorders, on_record, on_finish)
    try:
        with interrupt_latch() as check_interrupt:  # a Ctrl-C some library swallowed: next step
            while loop.rows:
                check_interrupt()
                loop.advance()
                if on_step is not None:
                    on_step()
    except KeyboardInterrupt:
        loop.end_all("interrupted")
    except Exception as e:  # noqa: BLE001 - recorded in the runs, never a crash
        loop.end_all("failed", f"{type(e).__name__}: {e}")
    return loop.outcomes  # type: ignore[return-value] - every run has ended: each has its outcome


class _StackedLoop:
    """The live runs (``rows``, indices into the configs), their states and optimizers, and the step they are at."""

    def __init__(self, cfgs: list[Config], engines: list[Engine], recorders: list[Recorder],
                 on_record: RecordFn | None, on_finish: FinishFn | None) -> None:
        self.cfgs, self.engines, self.recorders = cfgs, engines, recorders
        self.on_record, self.on_finish = on_record, on_finish
        self.batch = type(engines[0]).stack_steps(engines)
        self.opts = [make_optimizer(c.train.optimizer, e.parameters(), c.train.lr)
                     for c, e in zip(cfgs, engines, strict=True)]
        self.states = [RunState() for _ in cfgs]
        self.outcomes: list[TrainOutcome | None] = [None] * len(cfgs)
        self.rows = list(range(len(cfgs)))
        self.step = 0
        self.start = time.perf_counter()

    def advance(self) -> None:
        """One step of every live run: gradients together, then each run's rules, record and update."""
        for i in self.rows:  # as ``train.train`` counts it: a step interrupted or failed counts
            self.states[i].steps = self.step
        outs = self.batch.forward_backward(self.rows)
        alive = []
        for i, out in zip(self.rows, outs, strict=True):
            state = self.states[i]
            if isinstance(out, Exception):
                state.status, state.error = "failed", f"{type(out).__name__}: {out}"
                self._end(i)
            elif observe_step(self.cfgs[i], self.engines[i], self.recorders[i], state, self.step, out,
                              self._progress(i)):
                self._end(i)
            else:
                alive.append(i)
        for i in alive:
            self.opts[i].step()
        self.rows = alive
        self.step += 1

    def _progress(self, i: int) -> Callable[[int, float, float], None] | None:
        if self.on_record is None:
            return None
        on_record = self.on_record
        return lambda step, loss, attn_min: on_record(i, step, loss, attn_min)

    def end_all(self, status: str, error: str | None = None) -> None:
        """End every live run with ``status`` (Ctrl-C, or an error the step raised for all of them); a run that ended
        earlier in the step keeps its own end."""
        for i in self.rows:
            if self.outcomes[i] is None:
                self.states[i].status, self.states[i].error = status, error
                self._end(i)
        self.rows = []

    def _end(self, i: int) -> None:
        state = self.states[i]
        state.wall_s = time.perf_counter() - self.start
        self.outcomes[i] = state.outcome()
        if self.on_finish is not None:
            self.on_finish(i, self.outcomes[i])
