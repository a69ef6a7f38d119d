"""The batched trainer: many runs of one engine (kernel runs trained by gd or sgd in S space)
in one tensor program.

Each run keeps its own stopping rules, the same ``stopping.RunState.observe`` as ``train.train``:
it ends when its loss reaches its epsilon (converged), when its budget is spent (budget), or
when its loss is not finite or exceeds its ``diverge_factor`` times its initial loss (diverged).
A run that ends leaves the batch, so its metrics stop and the others go on at their own cost.
``train.train`` sends every single run its engine calls batchable through here with one run,
so a run gets the same numbers alone and in a batch.

Per step the host reads one small tensor (the R losses, min_k Attn_k and Attn_k); the
rest stays on the device. Metrics go to each run's Recorder at its log steps.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from .config import Config
from .engines.base import Engine, EngineBatch
from .interrupts import interrupt_latch
from .recorder import Recorder
from .stopping import RunState, TrainOutcome

RecordFn = Callable[[int, int, float, float], None]  # (run index, step, loss, min_k Attn_k)
FinishFn = Callable[[int, TrainOutcome], None]  # (run index, its outcome), as the run stops
StepFn = Callable[[], None]  # after every step of the batch (a caller's clock: store what stopped, say)


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
    states = [RunState() for _ in cfgs]
    _BatchLoop(cfgs, batch, states, recorders, on_record, on_finish, on_step).run()
    return [st.outcome() for st in states]


class _BatchLoop:
    """The step loop over a batch whose rows are the runs still training (``rows[j]`` is the run
    behind row j)."""

    def __init__(self, cfgs: list[Config], batch: EngineBatch, states: list[RunState], recorders: list[Recorder],
                 on_record: RecordFn | None, on_finish: FinishFn | None, on_step: StepFn | None = None) -> None:
        self.cfgs, self.batch, self.states, self.recorders = cfgs, batch, states, recorders
        self.on_record, self.on_finish, self.on_step = on_record, on_finish, on_step
        self.rows = list(range(len(cfgs)))
        self.step = 0
        self.start = time.perf_counter()

    def run(self) -> None:
        try:
            with interrupt_latch() as check_interrupt:  # a Ctrl-C some library swallowed: next step
                for step in range(max(c.train.steps for c in self.cfgs) + 1):
                    check_interrupt()
                    self.step = step
                    if not self._advance():
                        break
                    if self.on_step is not None:
                        self.on_step()
        except KeyboardInterrupt:
            if not self.rows:  # every run had ended before the interrupt surfaced: the caller stops
                raise
            self._finish(list(range(len(self.rows))), "interrupted")
            self.rows = []
        except Exception as e:  # noqa: BLE001 - recorded in the run, never a crash
            self._finish(list(range(len(self.rows))), "failed", f"{type(e).__name__}: {e}")
            self.rows = []
        if self.rows:  # the loop ran out (cannot happen: every run ends at its budget)
            self._finish(list(range(len(self.rows))))

    def _advance(self) -> bool:
        """One step of every run in the batch. False when no run is left."""
        cfgs, batch, step = self.cfgs, self.batch, self.step
        # 1. fresh random draws (count draws for sgd) for every run that resamples
        batch.redraw()
        # 2. loss, Attn_k and gradient of every run; at any run's log step also the full
        #    attention and the test errors
        full = any(self.states[i].wants_record(cfgs[i], step) for i in self.rows)
        out = batch.step(full)
        # 3. one host read (losses, min_k Attn_k and every Attn_k), then each run's stopping rules
        host = out.summary_table().tolist()
        losses, mins = [h[0] for h in host], [h[1] for h in host]
        record, ended = [], []
        for j, i in enumerate(self.rows):
            rec, end = self.states[i].observe(cfgs[i], step, losses[j], mins[j], host[j][2:])
            if rec:
                record.append(j)
            if end:
                ended.append(j)
        # 4. record the runs at their log steps
        if record:
            self._record(out, record, losses, mins, full)
        # 5. the runs that ended leave the batch
        if ended:
            self._finish(ended)
            alive = sorted(set(range(len(self.rows))) - set(ended))
            self.rows = [self.rows[j] for j in alive]
            if not self.rows:
                return False
            batch.keep(alive)
        # 6. one gradient step of size eta on every run left
        batch.update()
        return True

    def _finish(self, ended: list[int], status: str | None = None, error: str | None = None) -> None:
        """Close the runs in rows ``ended``: their step, wall time, final scores (and status)."""
        now = time.perf_counter() - self.start
        for j in ended:
            st = self.states[self.rows[j]]
            st.steps, st.wall_s, st.final_scores = self.step, now, self.batch.M[j].detach().clone()
            if status is not None:
                st.status, st.error = status, error
        if self.on_finish is not None:
            for j in ended:
                self.on_finish(self.rows[j], self.states[self.rows[j]].outcome())

    def _record(self, out, record: list[int], losses: list[float], mins: list[float], full: bool) -> None:
        """Record the rows in ``record`` at this step: one host transfer for all of them. Steps
        computed without the full attention (a run that converged between log steps) evaluate it."""
        idx = torch.tensor(record, device=out.loss.device)
        ev = out if full else self.batch.evaluate(record)
        pick = (lambda t: t.index_select(0, idx)) if full else (lambda t: t)
        tests = {k: pick(v) for k, v in ev.tests.items()}
        g = out.grad.index_select(0, idx)
        grad_norm = g.square().sum(-1).sum(-1).sqrt()  # norm of the step direction G (dL/dM) G
        names = list(tests)
        scal = torch.stack([*(tests[n] for n in names), grad_norm]).tolist()
        attn = pick(ev.attn).detach().double().cpu().numpy()
        scores = self.batch.M.index_select(0, idx).detach().double().cpu().numpy()
        for pos, j in enumerate(record):
            i = self.rows[j]
            te = {n: scal[c][pos] for c, n in enumerate(names)}
            self.states[i].test_errors = te
            self.recorders[i].record(self.step, losses[j], attn[pos], scores[pos], {**te, "grad_norm": scal[-1][pos]})
            if self.on_record is not None:
                self.on_record(i, self.step, losses[j], mins[j])
