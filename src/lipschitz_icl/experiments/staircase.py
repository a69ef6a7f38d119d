"""Reading a loss curve as a staircase: its plateaus and its drops (the linear-attention suites).

A plateau is a stretch of the curve where the loss stands still: its slope |dL/dt| stays below ``FLAT`` of the
steepest slope of the curve for at least ``MIN_LENGTH`` of the time from the first drop's start to the last
drop's end. The initial and the final level are not counted; an intermediate plateau is one whose level lies
strictly between them (more than ``MARGIN`` of the total drop from each). One abrupt drop has no intermediate
plateau; saddle-to-saddle dynamics through r saddles has r. Drop times are where the loss crosses the middle of
each step between consecutive levels."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .measure import falling_crossing

FLAT = 0.02  # a slope below 2% of the steepest one is standing still
MIN_RECORDS = 3  # a stop lasts at least 3 records (a lone slow record in a noisy curve is no plateau)
MARGIN = 0.03  # an intermediate level is more than 3% of the total drop from the start and the end
MERGE = 0.02  # two flat stretches whose levels differ by less than 2% of the total drop are one plateau


@dataclass(frozen=True)
class Staircase:
    levels: list[float]  # the loss of each plateau, initial and final included, in time order
    starts: list[float]  # when each plateau begins
    drops: list[float]  # the time of each drop (between consecutive levels)

    @property
    def intermediate(self) -> list[float]:
        return self.levels[1:-1]

    def as_dict(self) -> dict:
        return {"levels": self.levels, "intermediate": self.intermediate, "plateau_starts": self.starts,
                "drop_times": self.drops}


def _flat_runs(flat: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) index of each run of True."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], flat.astype(int), [0]])))
    return list(zip(edges[::2], edges[1::2] - 1, strict=True))


def staircase(t, loss) -> Staircase:
    """The plateaus of the curve (t increasing, loss recorded at each t) and its drop times."""
    t, loss = np.asarray(t, float), np.asarray(loss, float)
    slope = np.abs(np.gradient(loss, t))
    steep = slope.max()
    total = loss[0] - loss[-1]
    if steep == 0 or total <= 0:
        return Staircase([float(loss[0])], [float(t[0])], [])
    runs = [(a, b) for a, b in _flat_runs(slope < FLAT * steep)
            if a == 0 or b == len(t) - 1 or b - a + 1 >= MIN_RECORDS]
    levels, starts = [float(loss[0])], [float(t[0])]
    for a, b in runs:
        level = float(loss[a + int(np.argmin(slope[a:b + 1]))])  # where it stands stillest: nearest the saddle
        if abs(level - levels[-1]) < MERGE * total:
            continue
        levels.append(level)
        starts.append(float(t[a]))
    end = float(loss[-1])
    if abs(levels[-1] - end) >= MERGE * total:
        levels.append(end)
        starts.append(float(t[-1]))
    keep = [0] + [i for i in range(1, len(levels) - 1)
                  if end + MARGIN * total < levels[i] < loss[0] - MARGIN * total] + [len(levels) - 1]
    levels, starts = [levels[i] for i in keep], [starts[i] for i in keep]
    drops = [crossing(t, loss, (hi + lo) / 2) for hi, lo in zip(levels, levels[1:], strict=False)]
    return Staircase(levels, starts, drops)


def crossing(t, loss, level: float) -> float:
    """The first time the loss falls below ``level``, interpolated between records (``measure.falling_crossing``);
    nan when it never does."""
    found = falling_crossing(np.asarray(t, float).tolist(), np.asarray(loss, float).tolist(), level)
    return math.nan if found is None else found


def sigmoid_steps(t, levels, drop_times, width: float) -> np.ndarray:
    """A synthetic staircase: from levels[0], a logistic drop of ``width`` to each next level at each drop time
    (the controls' planted and null curves)."""
    t = np.asarray(t, float)
    out = np.full_like(t, levels[0])
    for hi, lo, at in zip(levels, levels[1:], drop_times, strict=False):
        out -= (hi - lo) / (1 + np.exp(-(t - at) / width))
    return out
