"""The bootstrap intervals and equivalence margins the claim experiments use (experiments/uncertainty.py)."""

import math

import numpy as np

from lipschitz_icl.experiments.measure import falling_crossing
from lipschitz_icl.experiments.uncertainty import (
    Margin,
    bootstrap_interval,
    bootstrap_loglog_slope,
    ratio_spread,
)


def test_bootstrap_interval_is_seeded_and_covers_the_mean():
    vals = list(np.random.default_rng(1).normal(3.0, 1.0, 40))
    a, b = bootstrap_interval(vals, seed=5), bootstrap_interval(vals, seed=5)
    assert a == b
    assert a[0] < np.mean(vals) < a[1]
    assert a[1] - a[0] < 1.0  # about 4 standard errors of a mean of 40


def test_bootstrap_interval_degenerate_inputs():
    assert bootstrap_interval([2.0]) == [2.0, 2.0]
    assert bootstrap_interval([1.0, None, float("nan"), 1.0]) == [1.0, 1.0]
    assert all(math.isnan(v) for v in bootstrap_interval([None]))


def test_slope_interval_by_groups_is_wide_when_seeds_disagree():
    x = [1, 2, 4, 8] * 2
    y = [t**-2 for t in x[:4]] + [t**-1 for t in x[4:]]  # seed 0: slope -2, seed 1: slope -1
    slope, iv = bootstrap_loglog_slope(x, y, groups=[0] * 4 + [1] * 4, seed=0)
    assert -2 < slope < -1
    assert iv[0] <= -1.9 and iv[1] >= -1.1
    exact, iv2 = bootstrap_loglog_slope(x[:4], y[:4])
    assert abs(exact + 2) < 1e-12 and abs(iv2[0] + 2) < 1e-9 and abs(iv2[1] + 2) < 1e-9


def test_slope_drops_censored_points():
    slope, iv = bootstrap_loglog_slope([1, 2, 4, 8], [1.0, 0.25, None, 1 / 64])
    assert abs(slope + 2) < 1e-12


def test_margin_decides_only_on_the_whole_interval():
    m = Margin(-2.0, 0.2)
    assert m.decide([-2.1, -1.9]) == (True, False)
    assert m.decide([-2.5, -2.3]) == (False, True)
    assert m.decide([-2.3, -2.0]) == (False, False)  # straddles an edge: undecided
    assert m.decide([math.nan, 1.0]) == (False, False)


def test_ratio_spread():
    assert ratio_spread([1.0, 4.0, 2.0]) == 4.0
    assert math.isnan(ratio_spread([3.0, None]))


def test_falling_crossing_interpolates_and_censors():
    assert abs(falling_crossing([0.0, 0.5, 1.0], [0.9, 0.7, 0.3], 0.5) - 0.75) < 1e-12
    assert falling_crossing([0.0, 1.0], [0.9, 0.6], 0.5) is None  # never below: censored at the grid's end
    assert falling_crossing([0.0, 1.0], [0.4, 0.3], 0.5) == 0.0
