"""The predecessor's new statistics on planted data: H2's phases from an attention curve's dynamics, and
H3's choice between K^2 and K log K by a lack-of-fit test."""

import math

import numpy as np
import pytest

from lipschitz_icl.papers.huang2024.k_dependence import model_fit
from lipschitz_icl.papers.huang2024.phases import growth_events, phase_count

STEPS = np.arange(0, 2001, 5, dtype=float)


def _logistic(start: float, rate: float = 0.02) -> np.ndarray:
    """Attn(t) = sigmoid(rate t + logit(start)): an S-shaped rise from ``start`` towards 1."""
    return 1 / (1 + np.exp(-(rate * STEPS + math.log(start / (1 - start)))))


def test_a_rise_from_below_one_half_has_four_phases_and_one_past_its_saturation_has_one():
    rare, dominant = growth_events(STEPS, _logistic(0.05)), growth_events(STEPS, _logistic(0.85))
    assert phase_count(rare) == 4 and phase_count(dominant) == 1
    # between 1/2 and the saturation point (a logistic decelerates fastest at 1/2 + 1/(2 sqrt 3) = 0.79): two
    assert phase_count(growth_events(STEPS, _logistic(0.6))) == 2
    fastest = math.log(0.95 / 0.05) / 0.02  # where sigmoid(rate t + logit(0.05)) = 1/2
    assert abs(rare[1] - fastest) <= 5 and rare[0] < rare[1] < rare[2] < rare[3]
    assert dominant[:3] == (0, 0, 0) and dominant[3] is not None


def test_a_curve_that_has_not_converged_is_under_way_in_its_last_phase():
    events = growth_events(STEPS[:45], _logistic(0.05)[:45])  # stops at step 220, Attn still about 0.8
    assert events[3] is None and phase_count(events) >= 2


@pytest.mark.parametrize("law,fits", [("K log K", {"K log K": True, "K^2": False}),
                                      ("K^2", {"K log K": False, "K^2": True})])
def test_model_fit_tells_k_squared_from_k_log_k(law, fits):
    Ks = [2, 4, 8, 16, 32]
    T = [3.0 * (K * K if law == "K^2" else K * math.log(K)) for K in Ks]
    got = {m: model_fit(Ks, T, m) for m in fits}
    assert {m: g["fits"] for m, g in got.items()} == fits
    assert got[law]["c"] == pytest.approx(3.0) and got[law]["rms_log"] < 1e-12


def test_model_fit_needs_three_values():
    assert not model_fit([2, 4], [8.0, 32.0], "K^2")["fits"]
