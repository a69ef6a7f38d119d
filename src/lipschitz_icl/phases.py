"""Two phases, read so that one smooth law does not pass (the claims' phase reading: H1, P1, P8).

``analysis.n_phases`` compares the mean rate of r = -log(1 - min_k Attn_k) before T_1 with the mean rate after it:
any law that slows down passes, a single power law included, and the share of runs passing moves with where a run
is cut. This reading asks for what a fast phase followed by a creep has and one smooth law has not:

    resolved   T_1 (first step with min_k Attn_k >= 1/2) at or after MIN_STEPS: a fast phase inside the first few
               steps cannot be told from the start (None: unresolved, never a verdict either way);
    one regime the fast phase does not decelerate: the rate of r over the second half of [0, T_1] is at least
               1 / FAST_DECELERATION of the rate over the first half (a power law from the start decelerates
               throughout: by 1.95x over [0, T_1] for 1 - Attn = (1 + t/c)^(-1/2), whatever c);
    a creep    the rate of r over [WINDOW/2 T_1, WINDOW T_1] is below 1 / SLOW_FACTOR of the rate over [0, T_1]: a
               window fixed by T_1, not by where the run stopped, so a run cut at eps 1e-2 and one cut at 1e-3 read
               the same (a run that stops before WINDOW T_1 has no creep to read: None, censored). The window
               starts past the turn: in the kernel runs the rate of r peaks just after T_1 (1.2x the fast rate over
               [T_1, 2 T_1]) and then falls about as 1/t (0.56, 0.21, 0.07, 0.02 of it over [2, 5], [5, 10],
               [10, 30], [30, 100] T_1), so a window from T_1 itself mixes the turn into the creep. WINDOW was
               chosen after looking at that profile (docs/CLAIMS_METHOD.md says so); SLOW_FACTOR is the analysis'
               PHASE_FACTOR, fixed before.

n_phases = 2 when all three hold, 1 when T_1 is resolved and the window read but one of the last two fails."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from .analysis import first_step, min_attention, phase_rate

MIN_STEPS = 10  # T_1 below this is inside the first few steps: unresolved
FAST_DECELERATION = 1.5  # the fast phase's rate may fall at most this much between the halves of [0, T_1]
SLOW_FACTOR = 3.0  # the creep is at least this much slower than the fast phase
WINDOW = 10  # the creep is read over [WINDOW / 2 * T_1, WINDOW * T_1]


@dataclass(frozen=True)
class PhaseReading:
    n_phases: int | None  # 2, 1, or None (unresolved or censored: no verdict)
    T_1: int | None
    early_rate: float | None  # rate of r over [0, T_1 / 2]
    late_rate: float | None  # over [T_1 / 2, T_1]
    fast_rate: float | None  # over [0, T_1]
    slow_rate: float | None  # over [WINDOW / 2 * T_1, WINDOW * T_1]
    window_end: int | None
    why: str  # one line: what decided it

    def as_dict(self) -> dict:
        return asdict(self)


def read_phases(steps: np.ndarray, attn: np.ndarray, T_1: int | None = None, level: float = 0.5) -> PhaseReading:
    """The two-phase reading of one min_k Attn_k curve (see the module doc); ``T_1``: the trainer's exact step
    when known, else the first recorded step at or above ``level``."""
    s = np.asarray(steps, dtype=np.int64)
    a = np.asarray(attn, dtype=np.float64)
    T_1 = first_step(s, a, level) if T_1 is None else int(T_1)
    none = dict(early_rate=None, late_rate=None, fast_rate=None, slow_rate=None, window_end=None)
    if T_1 is None:
        return PhaseReading(None, None, **none, why="T_1 not reached (censored)")
    if T_1 < MIN_STEPS:
        return PhaseReading(None, T_1, **none, why=f"T_1 = {T_1} < {MIN_STEPS} steps: the fast phase is unresolved")
    start, last, mid = int(s[0]), int(s[-1]), T_1 // 2
    early, late = phase_rate(s, a, start, mid), phase_rate(s, a, mid, T_1)
    fast = phase_rate(s, a, start, T_1)
    end = WINDOW * T_1
    slow = phase_rate(s, a, WINDOW * T_1 // 2, end) if last >= end else None
    rates = dict(early_rate=early, late_rate=late, fast_rate=fast, slow_rate=slow, window_end=end)
    if slow is None or None in (early, late, fast):
        return PhaseReading(None, T_1, **rates, why=f"the run stops at {last} < {WINDOW} T_1 = {end}: no creep to read "
                            "(censored)")
    if early > 0 and late * FAST_DECELERATION < early:
        return PhaseReading(1, T_1, **rates, why=f"the rise decelerates {early / max(late, 1e-300):.3g}x before T_1 "
                            f"(more than {FAST_DECELERATION:g}x): one law slowing down, not a fast phase")
    if fast <= SLOW_FACTOR * slow:
        return PhaseReading(1, T_1, **rates, why=f"the rate over [{end // 2}, {end}] is {slow / fast:.3g} of the "
                            f"fast rate (a creep needs below 1/{SLOW_FACTOR:g})")
    return PhaseReading(2, T_1, **rates, why=f"a steady fast rise to T_1 = {T_1}, then a creep {fast / slow:.3g}x "
                        f"slower over [{end // 2}, {end}]")


def read_run_phases(metrics: pd.DataFrame, T_1: int | None = None) -> PhaseReading:
    """``read_phases`` of a run's min_k Attn_k (its tidy metrics table; ``T_1`` from its summary when known)."""
    return read_phases(*min_attention(metrics), T_1)
