"""The stopping rules of ``stopping.RunState`` for R runs at once, as arrays over the runs.

The batched trainer observes every run still training with one call per step: the same rules, in
the same order and with the same floating-point operations as ``RunState.observe`` (a run's
outcome is equal, field for field, to the one ``RunState`` gives for its sequence of losses and
attention; tests/test_stopping_batch.py checks it on random sequences). Arrays are indexed by the
run (0..R-1); ``rows`` names the runs a call is about. A time not reached yet is -1.

``BatchStates(compiled=True)`` makes the same calls through ``stopping_compiled`` (numba loops over the
runs, the same operations): the batched trainer asks for it when its batch runs the compiled kernel step, so
that numba is loaded already (importing it costs ~0.4 s).
"""

from __future__ import annotations

import importlib
import math

import numpy as np
import torch

from .config import Config
from .stopping import DENSE_STEPS, REL_MAX_J, TrainOutcome, finite_or_none, rel_key, rel_level

STATUSES = ("budget", "diverged", "converged", "trivial", "interrupted", "failed")  # status codes 0..5
BUDGET, DIVERGED, CONVERGED, TRIVIAL = 0, 1, 2, 3
# T_rel levels r = 10^(-j/8), j = 1..REL_MAX_J, computed as RunState computes them
REL_LEVELS = np.array([rel_level(j) for j in range(1, REL_MAX_J + 1)])
REL_KEYS = [rel_key(level) for level in REL_LEVELS.tolist()]
_NO_GAPS, _NO_TIMES = np.empty((0, 0)), np.empty((0, 0), dtype=np.int64)  # stand-ins when Attn_k is not given


class BatchStates:
    """What the stopping rules know about R runs as they train (one ``RunState`` per run, as arrays)."""

    def __init__(self, cfgs: list[Config], compiled: bool = False) -> None:
        R = len(cfgs)
        # the numba loops (stopping_compiled), imported only when asked for: the import costs ~0.4 s
        self.compiled = importlib.import_module(".stopping_compiled", __package__) if compiled else None
        self.budget = np.array([c.train.steps for c in cfgs], dtype=np.int64)
        self.log_every = np.array([c.train.log_every for c in cfgs], dtype=np.int64)
        self.diverge = np.array([c.train.diverge_factor for c in cfgs], dtype=np.float64)
        self.eps = np.array([c.train.eps for c in cfgs], dtype=np.float64)  # epsilon
        self.relative = np.array([c.train.eps_mode == "relative" for c in cfgs])
        self.t1_level = np.array([c.analysis.t1_level for c in cfgs], dtype=np.float64)
        self.status = np.full(R, BUDGET, dtype=np.int64)
        self.steps = np.zeros(R, dtype=np.int64)
        self.wall_s = np.zeros(R)
        self.started = np.zeros(R, dtype=bool)
        self.loss_0 = np.full(R, np.nan)  # the initial loss
        self.last_loss = np.full(R, np.nan)  # NaN: none yet
        self.last_attn = np.full(R, np.nan)  # min_k Attn_k at the last step that was not diverged
        self.T_1 = np.full(R, -1, dtype=np.int64)
        self.T_eps = np.full(R, -1, dtype=np.int64)
        self.gap_0: np.ndarray | None = None  # (R, K) 1 - Attn_k at the first step observed
        self.T_half: np.ndarray | None = None  # (R, K) first step with 1 - Attn_k <= gap_0 / 2
        self.gap_set = np.zeros(R, dtype=bool)
        self.T_rel = np.full((R, REL_MAX_J), -1, dtype=np.int64)  # column j - 1: level 10^(-j/8)
        self.next_rel = np.ones(R, dtype=np.int64)  # the next T_rel level j to reach
        self.test_errors: dict[str, np.ndarray] = {}  # name -> (R,) at the last recorded step (NaN: none)
        self.errors: list[str | None] = [None] * R
        self.final_scores: list[torch.Tensor | None] = [None] * R

    def wants_record(self, rows: np.ndarray, step: int) -> np.ndarray:
        """Whether ``step`` is recorded for each run of ``rows`` whatever its loss (``RunState.wants_record``)."""
        if self.compiled is not None:
            out = np.empty(len(rows), dtype=bool)
            self.compiled.wants_record(rows, step, self.T_1, self.log_every, self.budget, DENSE_STEPS, out)
            return out
        dense = (self.T_1[rows] < 0) & (step < DENSE_STEPS)
        return (step % self.log_every[rows] == 0) | (step == self.budget[rows]) | dense

    def observe(self, rows: np.ndarray, step: int, loss: np.ndarray, attn_min: np.ndarray,
                attn_self: np.ndarray | None, wanted: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``RunState.observe`` for the runs ``rows`` at ``step``: their losses (r,), min_k Attn_k (r,)
        and Attn_k (r, K) or None; ``wanted``: ``wants_record(rows, step)`` when the caller has it already.
        Returns (record this step, the run ends here), each (r,)."""
        if self.compiled is not None:
            return self._observe_compiled(rows, step, loss, attn_min, attn_self, wanted)
        self._start(rows, loss)
        loss_0 = self.loss_0[rows]
        diverged = ~np.isfinite(loss) | (loss > self.diverge[rows] * loss_0)
        if diverged.any():
            self.status[rows[diverged]] = DIVERGED
            live = ~diverged
            rows_live, loss_live, attn_live, loss_0_live = rows[live], loss[live], attn_min[live], loss_0[live]
            self_live = None if attn_self is None else attn_self[live]
        else:  # the common case: the same arrays, without copies made by indexing
            live = ~diverged
            rows_live, loss_live, attn_live, loss_0_live, self_live = rows, loss, attn_min, loss_0, attn_self
        record = self.wants_record(rows, step) if wanted is None else wanted.copy()
        t1_hit = live & (self.T_1[rows] < 0) & (attn_min >= self.t1_level[rows])
        if t1_hit.any():
            self.T_1[rows[t1_hit]] = step
            record |= t1_hit
        if self_live is not None:
            self._half_times(rows_live, step, self_live)
        self._rel_times(rows_live, step, loss_live, loss_0_live)
        target = np.where(self.relative[rows], self.eps[rows] * loss_0, self.eps[rows])
        done = live & (loss <= target)
        self.last_loss[rows_live], self.last_attn[rows_live] = loss_live, attn_live
        if done.any():
            self.status[rows[done]] = CONVERGED if step else TRIVIAL  # met at step 0: nothing was learned
            self.T_eps[rows[done]] = step
        return live & (record | done), diverged | (live & (done | (step == self.budget[rows])))

    def _observe_compiled(self, rows: np.ndarray, step: int, loss: np.ndarray, attn_min: np.ndarray,
                          attn_self: np.ndarray | None, wanted: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """``observe`` by ``stopping_compiled.observe`` (contiguous float64 inputs: one compiled signature)."""
        record = self.wants_record(rows, step) if wanted is None else wanted.copy()
        ended = np.empty(len(rows), dtype=bool)
        if attn_self is not None:
            self._half_time_arrays(attn_self.shape[1])
        has_self = attn_self is not None
        gap_0, T_half = (self.gap_0, self.T_half) if has_self else (_NO_GAPS, _NO_TIMES)  # noqa: N806
        self.compiled.observe(
            np.ascontiguousarray(rows, dtype=np.int64), step, np.ascontiguousarray(loss, dtype=np.float64),
            np.ascontiguousarray(attn_min, dtype=np.float64),
            np.ascontiguousarray(attn_self, dtype=np.float64) if has_self else _NO_GAPS, has_self, record, ended,
            self.budget, self.diverge, self.eps, self.relative, self.t1_level, self.status, self.started,
            self.loss_0, self.last_loss, self.last_attn, self.T_1, self.T_eps, gap_0, T_half, self.gap_set,
            self.T_rel, self.next_rel, REL_LEVELS)
        return record, ended

    def quiet_steps(self, rows: np.ndarray, first: int, last: int, fused: tuple, lr: np.ndarray, cap: int) -> int:
        """Make steps first.. of a fused batch (``KernelBatch.quiet_inputs``) in one compiled loop for as long as
        none of ``rows`` records or ends, at most ``cap`` of them; returns the first step not made."""
        if self.compiled is None or self.T_half is None:
            return first
        state = (self.budget, self.log_every, self.diverge, self.eps, self.relative, self.t1_level, self.status,
                 self.started, self.loss_0, self.last_loss, self.last_attn, self.T_1, self.T_eps, self.gap_0,
                 self.T_half, self.gap_set, self.T_rel, self.next_rel)
        flags = np.empty(len(rows), dtype=bool), np.empty(len(rows), dtype=bool)
        return self.compiled.quiet_steps(first, min(last, first + cap - 1), np.ascontiguousarray(rows, np.int64),
                                         fused, lr, state, REL_LEVELS, DENSE_STEPS, *flags)

    def _start(self, rows: np.ndarray, loss: np.ndarray) -> None:
        """The initial loss of the runs observed for the first time (not finite: +inf)."""
        first = ~self.started[rows]
        if first.any():
            l0 = loss[first]
            with np.errstate(invalid="ignore"):
                self.loss_0[rows[first]] = np.where(np.isfinite(l0), np.maximum(l0, 1e-300), np.inf)
            self.started[rows[first]] = True

    def _half_times(self, rows: np.ndarray, step: int, attn_self: np.ndarray) -> None:
        """T_half[k]: first step with 1 - Attn_k <= (1 - Attn_k(0)) / 2."""
        self._half_time_arrays(attn_self.shape[1])
        waiting = self.T_half[rows] < 0
        first = ~self.gap_set[rows]
        if not (waiting.any() or first.any()):  # every half time of these runs is known already
            return
        gap = 1.0 - attn_self
        self.gap_0[rows[first]] = gap[first]
        self.gap_set[rows] = True
        hit = waiting & (gap <= 0.5 * self.gap_0[rows])
        r, k = np.nonzero(hit)
        self.T_half[rows[r], k] = step

    def _half_time_arrays(self, K: int) -> None:
        """gap_0 and T_half (R, K), made at the first step that gives Attn_k."""
        if self.T_half is None:
            self.gap_0 = np.zeros((len(self.budget), K))
            self.T_half = np.full_like(self.gap_0, -1, dtype=np.int64)

    def _rel_times(self, rows: np.ndarray, step: int, loss: np.ndarray, loss_0: np.ndarray) -> None:
        """T_rel: first step at or below each level r * loss_0. The thresholds fall with j, so the levels
        reached are j = 1..n: the new ones are next_rel..n."""
        after = self.next_rel[rows]  # the next level to reach (REL_MAX_J + 1: all reached)
        pending = after <= REL_MAX_J
        if not (pending & (loss <= REL_LEVELS[np.minimum(after, REL_MAX_J) - 1] * loss_0)).any():
            return  # no run reaches its next level at this step (a NaN loss reaches none)
        reached = loss[:, None] <= REL_LEVELS[None, :] * loss_0[:, None]
        j = np.arange(1, REL_MAX_J + 1)
        new = reached & (j[None, :] >= after[:, None])
        r, col = np.nonzero(new)
        self.T_rel[rows[r], col] = step
        self.next_rel[rows] = np.maximum(after, reached.sum(1) + 1)

    def finish(self, rows: np.ndarray, step: int, wall_s: float, status: str | None = None,
               error: str | None = None) -> None:
        """Close the runs ``rows`` at ``step`` (and give them ``status``: interrupted, failed)."""
        self.steps[rows], self.wall_s[rows] = step, wall_s
        if status is not None:
            self.status[rows] = STATUSES.index(status)
            for i in rows.tolist():
                self.errors[i] = error

    def outcome(self, i: int) -> TrainOutcome:
        """Run i's outcome, as ``RunState.outcome`` gives it."""
        return TrainOutcome(
            status=STATUSES[self.status[i]], steps=int(self.steps[i]), wall_s=float(self.wall_s[i]),
            final_loss=finite_or_none(float(self.last_loss[i])), min_attn=finite_or_none(float(self.last_attn[i])),
            T_1=_time(self.T_1[i]), T_eps=_time(self.T_eps[i]),
            T_half=[] if self.T_half is None or not self.gap_set[i] else [_time(t) for t in self.T_half[i]],
            T_rel={REL_KEYS[j]: int(self.T_rel[i, j]) for j in np.flatnonzero(self.T_rel[i] >= 0).tolist()},
            test_errors={k: float(v[i]) for k, v in self.test_errors.items() if math.isfinite(v[i])},
            error=self.errors[i], final_scores=self.final_scores[i],
        )

    def set_test_errors(self, rows: np.ndarray, names: list[str], values: np.ndarray) -> None:
        """The test errors (len(names), r) of the runs ``rows`` at the step they are recorded at."""
        for name, column in zip(names, values, strict=True):
            self.test_errors.setdefault(name, np.full(len(self.budget), np.nan))[rows] = column


def _time(t: np.integer) -> int | None:
    return None if t < 0 else int(t)
