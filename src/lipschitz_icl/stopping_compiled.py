"""``BatchStates.observe`` and ``wants_record`` as compiled loops over the runs (numba).

The NumPy version makes some forty array operations a step whatever the number of runs, about
30 us: four times the fused kernel step it follows. These loops make the same decisions with the
same floating-point operations (comparisons, and the products eps * loss_0, diverge * loss_0,
r * loss_0 and gap_0 / 2, which numba rounds as NumPy does: no fastmath here), run by run, in
about a microsecond. ``BatchStates(compiled=True)`` uses them; the batched trainer asks for it
when its batch runs the fused step (numba is loaded then). tests/test_stopping_batch.py runs its
random sequences through both and through ``RunState``.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from .engines.kernel_fused import fused_step, fused_update

# the digest of the compiled code that quiet_steps calls from another file (kernel_fused.CALLEE_SOURCES says why)
CALLEE_SOURCES = {"engines/kernel_fused.py": "f98c9f8d7086f4e9"}
_JIT = {"cache": True, "boundscheck": False}
DIVERGED, CONVERGED, TRIVIAL = 1, 2, 3  # stopping_batch's status codes


@numba.njit(**_JIT)
def wants_record(rows: np.ndarray, step: int, T_1: np.ndarray, log_every: np.ndarray, budget: np.ndarray,
                 dense_steps: int, out: np.ndarray) -> None:
    """out[i]: whether ``step`` is recorded for run rows[i] whatever its loss."""
    for i in range(rows.shape[0]):
        r = rows[i]
        out[i] = step % log_every[r] == 0 or step == budget[r] or (T_1[r] < 0 and step < dense_steps)


@numba.njit(**_JIT)
def _start(r: int, loss: float, started: np.ndarray, loss_0: np.ndarray) -> None:
    """The initial loss of a run observed for the first time (not finite: +inf)."""
    if not started[r]:
        loss_0[r] = max(loss, 1e-300) if math.isfinite(loss) else math.inf
        started[r] = True


@numba.njit(**_JIT)
def _diverges(value: float, limit: float) -> bool:
    """A loss that is not finite or above diverge_factor x the initial loss (``limit``)."""
    return not math.isfinite(value) or value > limit


@numba.njit(**_JIT)
def _reaches_t1(r: int, i: int, attn_min: np.ndarray, T_1: np.ndarray, t1_level: np.ndarray) -> bool:
    """Run r (row i) reaches min_k Attn_k >= analysis.t1_level for the first time."""
    return T_1[r] < 0 and attn_min[i] >= t1_level[r]


@numba.njit(**_JIT)
def _target(r: int, eps: np.ndarray, relative: np.ndarray, loss_0: np.ndarray) -> float:
    """Run r's epsilon: relative to its initial loss, or absolute."""
    return eps[r] * loss_0[r] if relative[r] else eps[r]


@numba.njit(**_JIT)
def _half_times(r: int, i: int, step: int, attn_self: np.ndarray, gap_0: np.ndarray, T_half: np.ndarray,
                gap_set: np.ndarray) -> None:
    """T_half[r, k]: the first step with 1 - Attn_k <= (1 - Attn_k(0)) / 2."""
    first = not gap_set[r]
    for k in range(attn_self.shape[1]):
        gap = 1.0 - attn_self[i, k]
        if first:
            gap_0[r, k] = gap
        if T_half[r, k] < 0 and gap <= 0.5 * gap_0[r, k]:
            T_half[r, k] = step
    gap_set[r] = True


@numba.njit(**_JIT)
def _rel_times(r: int, step: int, loss: float, loss_0: float, levels: np.ndarray, T_rel: np.ndarray,
               next_rel: np.ndarray) -> None:
    """T_rel[r, j - 1]: the first step at or below levels[j - 1] * loss_0, for the levels reached from next_rel on."""
    after, top = next_rel[r], levels.shape[0]
    if after > top or not loss <= levels[after - 1] * loss_0:
        return  # its next level not reached (a NaN loss reaches none)
    reached = 0
    for j in range(1, top + 1):
        if loss <= levels[j - 1] * loss_0:
            reached += 1
            if j >= after:
                T_rel[r, j - 1] = step
    next_rel[r] = max(after, reached + 1)


@numba.njit(**_JIT)
def observe(rows, step, loss, attn_min, attn_self, has_self, record, ended, budget, diverge, eps, relative,
            t1_level, status, started, loss_0, last_loss, last_attn, T_1, T_eps, gap_0, T_half, gap_set, T_rel,
            next_rel, levels) -> None:  # noqa: ANN001 - numba arrays; see BatchStates for each one's meaning
    """``BatchStates.observe`` run by run. ``record`` holds ``wants_record`` on entry and what to record on exit;
    ``ended`` whether each run ends at this step."""
    for i in range(rows.shape[0]):
        r, value = rows[i], loss[i]
        _start(r, value, started, loss_0)
        diverged = _diverges(value, diverge[r] * loss_0[r])
        ended[i] = diverged
        if diverged:
            status[r] = DIVERGED
            record[i] = False
            continue
        if _reaches_t1(r, i, attn_min, T_1, t1_level):
            T_1[r] = step
            record[i] = True
        if has_self:
            _half_times(r, i, step, attn_self, gap_0, T_half, gap_set)
        _rel_times(r, step, value, loss_0[r], levels, T_rel, next_rel)
        last_loss[r], last_attn[r] = value, attn_min[i]
        if value <= _target(r, eps, relative, loss_0):
            status[r] = CONVERGED if step else TRIVIAL  # met at step 0: nothing was learned
            T_eps[r] = step
            record[i] = True
            ended[i] = True
        elif step == budget[r]:
            ended[i] = True


@numba.njit(**_JIT)
def _quiet(r: int, i: int, step: int, loss: np.ndarray, attn_min: np.ndarray, diverge: np.ndarray, eps: np.ndarray,
           relative: np.ndarray, t1_level: np.ndarray, started: np.ndarray, loss_0: np.ndarray,
           T_1: np.ndarray) -> bool:
    """Whether ``observe`` would neither record nor end run r (row i) at this step, when no record was wanted."""
    value = loss[i]  # (the budget's last step is a record step: quiet_steps stops before it)
    return (started[r] and not _diverges(value, diverge[r] * loss_0[r])
            and not _reaches_t1(r, i, attn_min, T_1, t1_level) and not value <= _target(r, eps, relative, loss_0))


@numba.njit(**_JIT)
def quiet_steps(first, last, rows, fused, lr, state, levels, dense_steps, record, ended) -> int:  # noqa: ANN001
    """Steps ``first``, ``first + 1``, ... up to ``last`` of a fused batch (``fused``: the arguments of
    ``kernel_fused.fused_step``; ``state``: BatchStates' arrays) for as long as no run wants a record,
    diverges, reaches T_1, converges or ends: each such step is the fused step, ``observe`` (which changes
    only T_half, T_rel and the last loss and attention then) and the update, as the trainer makes it.
    Returns the first step it did not make (its state untouched): the trainer makes that one itself."""
    (budget, log_every, diverge, eps, relative, t1_level, status, started, loss_0, last_loss, last_attn, T_1, T_eps,
     gap_0, T_half, gap_set, T_rel, next_rel) = state
    M, summary, grad = fused[0], fused[8], fused[10]
    step = first
    while step <= last:
        wants_record(rows, step, T_1, log_every, budget, dense_steps, record)
        if record.any() or not fused_step(*fused):  # a record, or a loss the trainer must redo
            return step
        loss, attn_min, attn_self = summary[:, 0], summary[:, 1], summary[:, 2:]
        for i in range(rows.shape[0]):
            if not _quiet(rows[i], i, step, loss, attn_min, diverge, eps, relative, t1_level, started,
                          loss_0, T_1):
                return step
        observe(rows, step, loss, attn_min, attn_self, True, record, ended, budget, diverge, eps, relative,
                t1_level, status, started, loss_0, last_loss, last_attn, T_1, T_eps, gap_0, T_half, gap_set, T_rel,
                next_rel, levels)
        fused_update(M, lr, grad)
        step += 1
    return step
