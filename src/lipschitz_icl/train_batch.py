"""The batched trainer: many runs of one engine (kernel runs trained by gd or sgd in S space)
in one tensor program.

Each run keeps its own stopping rules, those of ``stopping.RunState.observe`` (``train.train``'s),
applied to all runs at once by ``stopping_batch.BatchStates``:
it ends when its loss reaches its epsilon (converged), when its budget is spent (budget), or
when its loss is not finite or exceeds its ``diverge_factor`` times its initial loss (diverged).
A run that ends leaves the batch, so its metrics stop and the others go on at their own cost.
``train.train`` sends every single run its engine calls batchable through here with one run,
so a run gets the same numbers alone and in a batch.

Per step the host reads one small tensor (the R losses, min_k Attn_k and Attn_k); the
rest stays on the device. Metrics are held in ``batch_records.BatchRecords`` and go to each run's
Recorder, as one block, when the run ends; a Recorder with a tracker is also sent each record as it is made.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch

from .batch_records import BatchRecords
from .config import Config
from .engines.base import Engine, EngineBatch
from .interrupts import interrupt_latch
from .recorder import Recorder
from .stopping import TrainOutcome
from .stopping_batch import BatchStates

RecordFn = Callable[[int, int, float, float], None]  # (run index, step, loss, min_k Attn_k)
FinishFn = Callable[[int, TrainOutcome], None]  # (run index, its outcome), as the run stops
StepFn = Callable[[], None]  # after the batch's steps (a caller's clock: store what stopped, say)
QUIET_CAP = 1000  # steps made in one compiled call at most, so that a Ctrl-C is seen within milliseconds


def train_batched(
    cfgs: list[Config],
    engines: list[Engine],
    recorders: list[Recorder],
    on_record: RecordFn | None = None,
    on_finish: FinishFn | None = None,
    on_step: StepFn | None = None,
) -> list[TrainOutcome]:
    """Train the runs of ``engines`` (run i is ``cfgs[i]``; equal ``batch_key``s) as one batch;
    returns one TrainOutcome per run, with the scores it ended at as ``final_scores``."""
    batch = type(engines[0]).stack(engines, [c.train.lr for c in cfgs])
    states = BatchStates(cfgs, compiled=bool(getattr(batch, "fused", False)))
    loop = _BatchLoop(cfgs, batch, states, recorders, on_record, on_finish, on_step)
    loop.run()
    return loop.outcomes  # type: ignore[return-value] - every run has ended: each has its outcome


class _BatchLoop:
    """The step loop over a batch whose rows are the runs still training (``rows[j]`` is the run
    behind row j)."""

    def __init__(self, cfgs: list[Config], batch: EngineBatch, states: BatchStates, recorders: list[Recorder],
                 on_record: RecordFn | None, on_finish: FinishFn | None, on_step: StepFn | None = None) -> None:
        self.batch, self.states, self.recorders = batch, states, recorders
        self.on_record, self.on_finish, self.on_step = on_record, on_finish, on_step
        self.last_step = max(c.train.steps for c in cfgs)
        self.records = BatchRecords(len(cfgs), batch.M.shape[-1], self.last_step + 1)
        self.rows = np.arange(len(cfgs))
        self.outcomes: list[TrainOutcome | None] = [None] * len(cfgs)  # each run's, made once as it ends
        self.handed: set[int] = set()  # the runs given to ``on_finish``
        self.tracked = any(r.tracker is not None for r in recorders)  # some run is watched live (--tracker)
        # fused batches with compiled stopping rules: the steps at which nothing is recorded, compiled end to end
        quiet = getattr(batch, "quiet_inputs", None)
        self.quiet_inputs = quiet if states.compiled is not None else None
        self.step = 0
        self.start = time.perf_counter()

    def run(self) -> None:
        try:
            with interrupt_latch() as check_interrupt:  # a Ctrl-C some library swallowed: next step
                while self.step <= self.last_step:
                    check_interrupt()
                    self._quiet_steps()
                    if not self._advance():
                        break
                    if self.on_step is not None:
                        self.on_step()
                    self.step += 1
        except KeyboardInterrupt:
            if not len(self.rows):  # every run had ended before the interrupt surfaced: the caller stops
                raise
            self._finish(np.arange(len(self.rows)), "interrupted")
            self.rows = self.rows[:0]
        except Exception as e:  # noqa: BLE001 - recorded in the run, never a crash
            self._finish(np.arange(len(self.rows)), "failed", f"{type(e).__name__}: {e}")
            self.rows = self.rows[:0]
        if len(self.rows):  # the loop ran out (cannot happen: every run ends at its budget)
            self._finish(np.arange(len(self.rows)))

    def _quiet_steps(self) -> None:
        """Fused batches: the steps from ``self.step`` on at which no run records or ends, made in one compiled
        loop with the same operations (``stopping_compiled.quiet_steps``); ``self.step`` becomes the first step
        that the trainer makes itself."""
        inputs = None if self.quiet_inputs is None else self.quiet_inputs()
        if inputs is not None:
            self.step = self.states.quiet_steps(self.rows, self.step, self.last_step, *inputs, cap=QUIET_CAP)

    def _advance(self) -> bool:
        """One step of every run in the batch. False when no run is left."""
        batch, step, rows = self.batch, self.step, self.rows
        # 1. fresh random draws (count draws for sgd) for every run that resamples
        batch.redraw()
        # 2. loss, Attn_k and gradient of every run; at any run's log step also the full
        #    attention and the test errors
        wanted = self.states.wants_record(rows, step)
        full = bool(wanted.any())
        out = batch.step(full, wanted if full else None)  # test errors of the runs that record (``_record``)
        # 3. one host read (losses, min_k Attn_k and every Attn_k), then the stopping rules of every run
        host = out.summary_table().detach().to("cpu", torch.float64).numpy()
        losses, mins = host[:, 0], host[:, 1]
        record, ended = self.states.observe(rows, step, losses, mins, host[:, 2:], wanted)
        # 4. record the runs at their log steps
        if record.any():
            self._record(out, np.flatnonzero(record), losses, mins, wanted if full else None)
        # 5. the runs that ended leave the batch
        if ended.any():
            self._finish(np.flatnonzero(ended))
            alive = np.flatnonzero(~ended)
            self.rows = rows[alive]
            if not len(self.rows):
                return False
            batch.keep(alive.tolist())
        # 6. one gradient step of size eta on every run left
        batch.update()
        return True

    def _finish(self, ended: np.ndarray, status: str | None = None, error: str | None = None) -> None:
        """Close the runs in rows ``ended``: their step, wall time, final scores, records (and status). A run closed
        already (a Ctrl-C while the caller took an earlier one: the batch ends again) keeps its own end, and each run
        is handed to ``on_finish`` once."""
        fresh = np.array([self.outcomes[i] is None for i in self.rows[ended].tolist()], dtype=bool)
        closing, runs = ended[fresh], self.rows[ended[fresh]]
        self.states.finish(runs, self.step, time.perf_counter() - self.start, status, error)
        for j, i in zip(closing.tolist(), runs.tolist(), strict=True):
            self.states.final_scores[i] = self.batch.M[j].detach().clone()
            self.records.hand_over(i, self.recorders[i])
        for i in runs.tolist():
            self.outcomes[i] = self.states.outcome(i)
        if self.on_finish is not None:
            for i in self.rows[ended].tolist():
                if i not in self.handed:
                    self.handed.add(i)
                    self.on_finish(i, self.outcomes[i])

    def _record(self, out, record: np.ndarray, losses: np.ndarray, mins: np.ndarray, wanted: np.ndarray | None
                ) -> None:
        """Record the rows in ``record`` at this step: one host transfer for all of them. The attention and test
        errors of the rows whose step was full (``wanted``; None: no row's) come from the step; a row recorded without
        wanting it (a run that ended between its log steps) is evaluated apart, as it is where no row of its batch
        records at this step: a run's numbers never depend on the runs it trains beside."""
        idx = torch.as_tensor(record, device=out.loss.device)
        stepped = np.zeros(len(record), dtype=bool) if wanted is None else wanted[record]
        if stepped.all():
            tests, attn = self.batch.test_errors(record.tolist(), out), out.attn.index_select(0, idx)
        else:
            ev = self.batch.evaluate(record[~stepped].tolist())
            tests, attn = ev.tests, ev.attn
            if stepped.any():  # both kinds: each row's values put in its place in ``record``
                at = torch.as_tensor(stepped, device=out.loss.device)
                mine = self.batch.test_errors(record[stepped].tolist(), out)
                tests = {n: _placed(at, mine[n], tests[n]) for n in tests}
                attn = _placed(at, out.attn.index_select(0, idx[at]), attn)
        names = list(tests)
        g = out.grad.index_select(0, idx)
        grad_norm = g.square().sum(-1).sum(-1).sqrt()  # norm of the step direction G (dL/dM) G
        scal = torch.stack([*(tests[n] for n in names), grad_norm]).detach().to("cpu", torch.float64).numpy()
        attn = attn.detach().to("cpu", torch.float64).numpy()
        scores = self.batch.M.index_select(0, idx).detach().to("cpu", torch.float64).numpy()
        runs = self.rows[record]
        self.states.set_test_errors(runs, names, scal[:-1])
        scalars = np.concatenate([losses[record, None], scal.T], axis=1)  # (r, C): loss, tests, grad_norm
        self.records.add(runs, self.step, scalars, (*names, "grad_norm"), attn, scores)
        if self.tracked:
            for j, i in enumerate(runs.tolist()):
                self.recorders[i].send(self.step, scalars[j], (*names, "grad_norm"), attn[j], scores[j])
        if self.on_record is not None:
            for j, i in zip(record.tolist(), runs.tolist(), strict=True):
                self.on_record(i, self.step, float(losses[j]), float(mins[j]))


def _placed(at: torch.Tensor, chosen: torch.Tensor, others: torch.Tensor) -> torch.Tensor:
    """One tensor of len(at) rows: ``chosen``'s rows where ``at`` (bool) is true, ``others``' where it is false."""
    placed = others.new_empty((len(at), *others.shape[1:]))
    placed[at], placed[~at] = chosen, others
    return placed
