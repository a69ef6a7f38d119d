"""Controls of the threshold's claims (P4, P4a-P4d, B3) and of P5 and B1: each claim's own rule on its nulls and
its planted case, and why the ones whose outcome the protocol fixes cannot fail."""

import math

import pytest

import lipschitz_icl.papers  # noqa: F401  (registers the built-in claims and their controls)
from lipschitz_icl.experiments.claims import NOT_SUPPORTED, SUPPORTED
from lipschitz_icl.experiments.controls import controls_of
from lipschitz_icl.experiments.delta import power_law_reading
from lipschitz_icl.papers.li2025.threshold import b3_rule, p4_rule, p4a_rule
from lipschitz_icl.papers.li2025.threshold_delta import MIN_SPAN, SLOPE_MARGIN, located_rule

CLAIMS = ["P4", "P4a", "P4b", "P4c", "P4d", "B3", "P5", "B1"]
FIXED = {  # claim -> a substring of why the protocol fixes its outcome
    "P4a": "the rescaled time eta L^2 T_eps is the same at every L",
    "P4b": "closed form of the initial loss",
    "P4d": "L_x is proportional to Delta^-3",
    "B3": "the grid, not the data, sets the verdict",
    "P5": "proportional to Delta^-6 exactly",
    "B1": "the fast phase's -1 cannot hold",
}


@pytest.mark.parametrize("cid", CLAIMS)
def test_each_rule_rejects_its_nulls_and_accepts_its_planted_case(cid):
    made = controls_of(cid)
    assert made.null.verdict == NOT_SUPPORTED and made.planted.verdict == SUPPORTED
    assert all(c.verdict == NOT_SUPPORTED for c in made.extra.values())


@pytest.mark.parametrize("cid", CLAIMS)
def test_can_fail_unless_the_protocol_fixes_the_outcome(cid):
    made = controls_of(cid)
    if cid in FIXED:
        assert not made.can_fail and "the protocol fixes the outcome: " in made.failing()
        assert FIXED[cid] in made.fixed
    else:
        assert made.can_fail and made.failing() == ""


def test_p4a_reads_the_rescaled_time_ratio():
    made = controls_of("P4a")
    assert max(made.null.statistic["max_ratio_by_Delta_reading"].values()) <= 1.25
    assert min(made.planted.statistic["max_ratio_by_Delta_reading"].values()) > 2
    assert "1873, 1902 and 1910" in made.fixed
    assert p4a_rule([3.0], 0, ["a run at 4 steps"]) == (False, False)  # a time inside the first steps: no verdict
    assert p4a_rule([1.1, math.inf], 1, []) == (True, False)  # a censored run counts as a ratio beyond 2


@pytest.mark.parametrize("cid", ["P4b", "P4c", "P4d"])
def test_the_located_readings_read_the_slope_against_one_over_delta_delta(cid):
    made = controls_of(cid)
    assert abs(made.null.statistic["slope"] - 0.04) < 1e-9
    assert abs(made.extra["null_cubic"].statistic["slope"] - 3.0) < 1e-9
    assert abs(made.planted.statistic["slope"] - 1.0) <= SLOPE_MARGIN
    assert made.planted.statistic["Delta_delta_span"] >= MIN_SPAN
    assert set(made.planted.statistic["verdict_by_Delta_reading"].values()) == {SUPPORTED}


def test_the_located_rule_is_the_power_law_reading_the_experiment_used():
    dd, Lx = [0.63, 0.36, 0.2], [0.35, 0.6, 1.1]
    assert located_rule(dd, Lx) == power_law_reading([1 / v for v in dd], Lx, 1.0, SLOPE_MARGIN, min_span=MIN_SPAN)


def test_p4_counts_only_the_readings_that_are_not_forced():
    made = controls_of("P4")
    only_forced = made.extra["null_forced_only"].statistic
    assert set(only_forced["forced_readings"].values()) == {SUPPORTED}
    assert set(only_forced["free_readings"].values()) == {NOT_SUPPORTED}
    assert made.planted.statistic["free_readings"]["P4c"] == SUPPORTED
    assert p4_rule([]) == (False, False)


def test_b3_reads_the_median_and_cv_of_r():
    made = controls_of("B3")
    assert made.null.statistic["cv_r"] > 0.5 and abs(made.null.statistic["cv_r"] - 0.551) < 1e-3
    assert made.extra["null_far"].statistic["median_r"] == 10.0
    assert made.planted.statistic["cv_r"] <= 0.25 and made.planted.statistic["median_r"] == 1.0
    assert "0.55" in made.fixed and "0.49" in made.fixed
    assert b3_rule({"P4b": {"median_r": 1.0, "cv_r": 0.4}}) == (False, False)  # between the margins


def test_p5_reads_each_axis():
    made = controls_of("P5")
    assert set(made.null.statistic["Delta_slope_by_reading"]) == {"rescale", "tilt", "pair"}
    assert all(abs(s + 6) < 1e-9 for s in made.null.statistic["Delta_slope_by_reading"].values())
    assert made.null.statistic["checks"]["Delta"]["disagrees"]
    assert made.extra["null_K"].statistic["KlogK_slope"] > 1.3
    assert made.extra["null_delta"].statistic["checks"]["delta"]["disagrees"]
    assert all(abs(s + 2) < 1e-9 for s in made.planted.statistic["Delta_slope_by_reading"].values())
    assert all(c["agrees"] for c in made.planted.statistic["checks"].values())


def test_b1_reads_the_two_phase_slopes():
    made = controls_of("B1")
    assert abs(made.null.statistic["fast_T1_slope"] + 2) < 0.05
    assert abs(made.extra["null_slow"].statistic["slow_slope"] + 1) < 0.05
    assert abs(made.planted.statistic["fast_T1_slope"] + 1) < 0.05
    assert abs(made.planted.statistic["slow_slope"] + 2) < 0.05
