"""The batched trainer: many kernel-engine runs (gd or sgd, S space) in one tensor program.

Each run keeps its own stopping rules, exactly as in ``train.train``: it ends when its loss
reaches its epsilon (converged), when its budget is spent (budget), or when its loss is not
finite or exceeds its ``diverge_factor`` times its initial loss (diverged). A run that ends
leaves the batch, so its metrics stop and the others go on at their own cost. ``train.train``
sends every single S-space gd/sgd kernel run through here with one run, so a run gets the
same numbers alone and in a batch.

Per step the host reads one small tensor (the R losses and R values of min_k Attn_k); the
rest stays on the device. Metrics go to each run's Recorder at its log steps.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from .config import Config
from .engines.kernel_batch import KernelBatch
from .recorder import Recorder

RecordFn = Callable[[int, int, float, float], None]  # (run index, step, loss, min_k Attn_k)
FinishFn = Callable[[int], None]  # (run index)


@dataclass
class _State:
    status: str = "budget"
    steps: int = 0
    wall_s: float = 0.0
    loss_0: float | None = None
    last_loss: float | None = None
    last_attn: float | None = None
    T_1: int | None = None
    T_eps: int | None = None
    test_errors: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    final_M: torch.Tensor | None = None  # (K, K) scores when the run ended


def train_kernel_batch(
    cfgs: list[Config],
    batch: KernelBatch,
    recorders: list[Recorder],
    on_record: RecordFn | None = None,
    on_finish: FinishFn | None = None,
) -> list:
    """Train every run of ``batch`` (row i is ``cfgs[i]``); returns one TrainOutcome per run."""
    from .train import TrainOutcome, target_loss

    R = len(cfgs)
    states = [_State() for _ in range(R)]
    rows = list(range(R))  # the run behind each row of the batch
    start = time.perf_counter()
    max_steps = max(c.train.steps for c in cfgs)
    step = 0

    def finish(ended: list[int], status: str | None = None, error: str | None = None) -> None:
        now = time.perf_counter() - start
        for j in ended:
            st = states[rows[j]]
            st.steps, st.wall_s, st.final_M = step, now, batch.M[j].detach().clone()
            if status is not None:
                st.status, st.error = status, error
        if on_finish is not None:
            for j in ended:
                on_finish(rows[j])

    try:
        for step in range(max_steps + 1):  # noqa: B007 - step is read by finish()
            batch.redraw_counts()
            full = any(step % cfgs[i].train.log_every == 0 or step == cfgs[i].train.steps for i in rows)
            out = batch.step(full)
            amin = out.attn_self.amin(-1)  # min_k Attn_k per run
            losses, mins = torch.stack([out.loss, amin]).tolist()
            ended, record = [], []
            for j, i in enumerate(rows):
                st, tc, loss = states[i], cfgs[i].train, losses[j]
                if st.loss_0 is None:
                    st.loss_0 = max(loss, 1e-300) if math.isfinite(loss) else math.inf
                if not math.isfinite(loss) or loss > tc.diverge_factor * st.loss_0:
                    st.status = "diverged"
                    ended.append(j)
                    continue
                if st.T_1 is None and mins[j] >= cfgs[i].analysis.t1_level:
                    st.T_1 = step
                done = loss <= target_loss(tc, st.loss_0)
                st.last_loss, st.last_attn = loss, mins[j]
                if step % tc.log_every == 0 or done or step == tc.steps:
                    record.append(j)
                if done:
                    st.status, st.T_eps = "converged", step
                    ended.append(j)
                elif step == tc.steps:
                    ended.append(j)
            if record:
                _record(step, out, batch, record, rows, states, losses, mins, recorders, full, on_record)
            if ended:
                finish(ended)
                alive = sorted(set(range(len(rows))) - set(ended))
                rows = [rows[j] for j in alive]
                if not rows:
                    break
                batch.keep(alive)
            batch.update()
    except KeyboardInterrupt:
        finish(list(range(len(rows))), "interrupted")
        rows = []
    except Exception as e:  # noqa: BLE001 - recorded in the run, never a crash
        finish(list(range(len(rows))), "failed", f"{type(e).__name__}: {e}")
        rows = []
    if rows:  # the loop ran out (cannot happen: every run ends at its budget)
        finish(list(range(len(rows))))
    outcomes = []
    for st in states:
        outcomes.append(
            TrainOutcome(
                status=st.status, steps=st.steps, wall_s=st.wall_s, final_loss=_finite(st.last_loss),
                min_attn=_finite(st.last_attn), T_1=st.T_1, T_eps=st.T_eps,
                test_errors={k: v for k, v in st.test_errors.items() if math.isfinite(v)}, error=st.error,
                final_scores=st.final_M,
            )
        )
    return outcomes


def _record(step, out, batch, record, rows, states, losses, mins, recorders, full, on_record) -> None:
    """Record the rows in ``record`` at this step: one host transfer for all of them. Steps
    computed without the full attention (a run that converged between log steps) evaluate it."""
    idx = torch.tensor(record, device=out.loss.device)
    ev = out if full else batch.evaluate(record)
    pick = (lambda t: t.index_select(0, idx)) if full else (lambda t: t)
    tests = {k: pick(v) for k, v in ev.tests.items()}
    g = out.grad.index_select(0, idx)
    grad_norm = g.square().sum(-1).sum(-1).sqrt()  # norm of the step direction G (dL/dM) G
    names = list(tests)
    scal = torch.stack([*(tests[n] for n in names), grad_norm]).tolist()
    attn = pick(ev.attn).detach().double().cpu().numpy()
    scores = batch.M.index_select(0, idx).detach().double().cpu().numpy()
    for pos, j in enumerate(record):
        i = rows[j]
        te = {n: scal[c][pos] for c, n in enumerate(names)}
        states[i].test_errors = te
        recorders[i].record(step, losses[j], attn[pos], scores[pos], {**te, "grad_norm": scal[-1][pos]})
        if on_record is not None:
            on_record(i, step, losses[j], mins[j])


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None
