"""The run progress bar's ETA: the time to the expected stop (loss <= eps), extrapolated from the
recent log-loss slope, never a time to the step budget alone."""

from __future__ import annotations

import math

import pytest

from lipschitz_icl.cli.common import StopEta, format_eta


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _feed(eta: StopEta, clock: Clock, losses: list[tuple[int, float]], sec_per_step: float = 0.01):
    out = None
    for step, loss in losses:
        clock.t = step * sec_per_step
        out = eta.update(step, loss)
    return out


def test_geometric_decay_extrapolates_to_eps_not_to_the_budget():
    clock = Clock()
    eta = StopEta(eps=1e-3, budget=100_000, clock=clock)
    # loss = e^{-step/100}: reaches 1e-3 at step 100 ln 1000 = 690.8
    left = _feed(eta, clock, [(s, math.exp(-s / 100)) for s in range(0, 60, 10)])
    assert left == pytest.approx((100 * math.log(1000) - 50) * 0.01, rel=1e-6)  # far below the 1000 s budget


def test_no_estimate_without_a_falling_loss_or_enough_records():
    clock = Clock()
    assert _feed(StopEta(1e-3, 1000, clock=clock), clock, [(0, 1.0), (10, 0.5)]) is None
    assert _feed(StopEta(1e-3, 1000, clock=clock), clock, [(s, 1.0) for s in range(0, 50, 10)]) is None
    assert _feed(StopEta(1e-3, 1000, clock=clock), clock, [(s, 1 + s) for s in range(0, 50, 10)]) is None


def test_extrapolation_past_the_budget_stops_at_the_budget():
    clock = Clock()
    eta = StopEta(eps=1e-30, budget=100, clock=clock)
    left = _feed(eta, clock, [(s, math.exp(-s / 100)) for s in range(0, 60, 10)])
    assert left == pytest.approx(50 * 0.01)


def test_relative_eps_targets_eps_times_the_first_loss():
    clock = Clock()
    eta = StopEta(eps=0.5, budget=10_000, relative=True, clock=clock)
    left = _feed(eta, clock, [(s, 8 * math.exp(-s / 100)) for s in range(0, 30, 10)])
    assert left == pytest.approx((100 * math.log(2) - 20) * 0.01, rel=1e-6)


def test_format_eta():
    assert format_eta(None) == ""
    assert format_eta(65.2) == "eta 1:05"
    assert format_eta(3 * 3600 + 62) == "eta 3:01:02"
