"""The records of a batch of runs as they train: one row of arrays per run, written for every run
recorded at a step with one assignment per array, handed to the run's Recorder as one block when
the run ends (``Recorder.record_block``): no Python work per run and step.

Arrays grow by doubling along the record axis (at most one record per step of the longest budget).
"""

from __future__ import annotations

import numpy as np

from .recorder import Recorder

FIRST_CAPACITY = 64  # records per run held before the arrays first grow


class BatchRecords:
    """Records of R runs: steps (R, S), scalars (R, S, C) [loss, *names], attention and scores (R, S, K, K)."""

    def __init__(self, R: int, K: int, most: int) -> None:
        self.most = most  # records a run can have at most (its budget + 1)
        self.count = np.zeros(R, dtype=np.int64)  # records held per run
        self.names: tuple[str, ...] | None = None  # the extras' names, fixed at the first record
        cap = min(most, FIRST_CAPACITY)
        self.steps = np.zeros((R, cap), dtype=np.int64)
        self.attn = np.zeros((R, cap, K, K))
        self.scores = np.zeros((R, cap, K, K))
        self.scalars: np.ndarray | None = None  # (R, S, C), made at the first record

    def add(self, runs: np.ndarray, step: int, scalars: np.ndarray, names: tuple[str, ...], attn: np.ndarray,
            scores: np.ndarray) -> None:
        """Record ``runs`` at ``step``: scalars (r, C) [loss, *extras named ``names``], attn and scores (r, K, K)."""
        if self.scalars is None:
            self.names = names
            self.scalars = np.zeros((*self.steps.shape, scalars.shape[1]))
        elif names != self.names:
            raise ValueError(f"a batch records one set of metrics (had {self.names}, got {names})")
        slot = self.count[runs]
        if len(slot) and slot.max() >= self.steps.shape[1]:
            self._grow()
        self.steps[runs, slot] = step
        self.scalars[runs, slot] = scalars
        self.attn[runs, slot] = attn
        self.scores[runs, slot] = scores
        self.count[runs] += 1

    def _grow(self) -> None:
        cap = min(self.most, 2 * self.steps.shape[1])
        for name in ("steps", "scalars", "attn", "scores"):
            old = getattr(self, name)
            new = np.zeros((old.shape[0], cap, *old.shape[2:]), dtype=old.dtype)
            new[:, : old.shape[1]] = old
            setattr(self, name, new)

    def hand_over(self, run: int, recorder: Recorder) -> None:
        """Give run ``run``'s records to its recorder (copies), as one block."""
        T = int(self.count[run])
        if T == 0 or self.scalars is None:
            return
        recorder.record_block(self.steps[run, :T].copy(), self.scalars[run, :T].copy(), self.names or (),
                              self.attn[run, :T].copy(), self.scores[run, :T].copy())
        self.count[run] = 0
