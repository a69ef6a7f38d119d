"""Controls of the write-up's claims (B2, B4-B7) and of the open questions R1, R2, R3a: each claim's own rule on its
nulls (the claim false) and its planted case (the claim true), the statistic each reads, and whether the rule can
fail (or why not)."""

import math

import pytest

import lipschitz_icl.papers  # noqa: F401  (registers the claims and their controls)
from lipschitz_icl.experiments.claims import NOT_SUPPORTED, SUPPORTED
from lipschitz_icl.experiments.controls import controls_of
from lipschitz_icl.papers.questions.imbalanced import r3a_rule
from lipschitz_icl.papers.writeup.early_rate import b4_rule
from lipschitz_icl.papers.writeup.linear_vs_nonlinear import b6_rule

NULLS = {  # claim -> the nulls its rule rejects ("not supported")
    "B2": ["null", "null_L2"], "B4": ["null", "null_form"], "B5": ["null", "null_reversed"], "B6": ["null"],
    "B7": ["null", "null_no_gain"], "R1": ["null", "null_grows"], "R2": ["null_accelerating"],
    "R3a": ["null", "null_dominant_never"],
}
CAN_FAIL = {"B5", "B7", "R1", "R3a"}
CANNOT_FAIL = {  # claim -> a substring of why not
    "B2": "errors falling as n^-0.55, next to the rival rate sqrt(d/n) and far above O(d/n) at large n) is "
          "supported",
    "B4": "the protocol fixes the outcome: f = L g makes the runs at L = 1, 2, 4 one trajectory",
    "B6": "is supported; the protocol fixes the outcome: at a fixed eta every class's runs over L are one trajectory",
    "R2": "(a factored run rising at one constant speed from 1/K to 1 (no slowdown after 1/2)) is supported",
}


def _case(cid: str, name: str):
    made = controls_of(cid)
    return {"null": made.null, "planted": made.planted, **made.extra}[name]


@pytest.mark.parametrize("cid", sorted(NULLS))
def test_each_rule_rejects_its_nulls_and_accepts_its_planted_case(cid):
    assert all(_case(cid, name).verdict == NOT_SUPPORTED for name in NULLS[cid])
    assert controls_of(cid).planted.verdict == SUPPORTED


@pytest.mark.parametrize("cid", sorted(CAN_FAIL | set(CANNOT_FAIL)))
def test_can_fail_or_the_reason_it_cannot(cid):
    made = controls_of(cid)
    assert made.can_fail is (cid in CAN_FAIL)
    assert (made.failing() == "") if cid in CAN_FAIL else (CANNOT_FAIL[cid] in made.failing())


def test_b2_cannot_tell_d_over_n_from_the_rival_sqrt_rate():
    floor, rival, l2, planted = (_case("B2", n).statistic for n in ("null", "null_rival_rate", "null_L2", "planted"))
    assert floor["flat_n_slope"] == pytest.approx(0.0, abs=1e-12) and l2["error_ratio_sharp_over_flat"] == 16.0
    # a rate next to the rival sqrt(d/n) lies inside the support band [-1.5, -0.5], far from d/n's -1
    assert rival["flat_n_slope"] == pytest.approx(-0.55) and rival["sharp_n_slope"] == pytest.approx(-0.55)
    assert _case("B2", "null_rival_rate").verdict == SUPPORTED
    assert planted["flat_n_slope"] == pytest.approx(-1.0) and planted["error_ratio_sharp_over_flat"] == 0.75


def test_b4_reads_one_rate_constant_and_the_forced_l2_growth():
    null, form, planted = (_case("B4", n).statistic for n in ("null", "null_form", "planted"))
    assert null["rate_constant_spread"] == pytest.approx(16.0) and min(null["pearson_r"]) > 0.999
    assert min(form["pearson_r"]) < 0.5
    assert planted["rate_constant_spread"] == pytest.approx(1.0)
    assert planted["rate_constant_c"][0] == pytest.approx(0.02)
    assert b4_rule([0.95, math.nan, 0.97], 1.0) == (False, False)  # an unfitted run decides nothing


def test_b5_reads_the_mean_spearman_correlations():
    assert _case("B5", "null").statistic["spearman"] == {"final_attention": 0.0, "heldout_loss": 0.0,
                                                         "steps_to_5pct": 0.0}
    assert _case("B5", "null_reversed").statistic["spearman"]["final_attention"] == pytest.approx(-1.0)
    assert _case("B5", "planted").statistic["spearman"] == pytest.approx(
        {"final_attention": 1.0, "heldout_loss": -1.0, "steps_to_5pct": -1.0})


def test_b6_old_phase_reading_passes_one_power_law_and_the_slope_is_forced():
    one_law = _case("B6", "null_nonlinear_one_law")
    assert one_law.verdict == SUPPORTED and one_law.statistic["nonlinear_phases"] == [2, 2, 2, 2]
    assert _case("B6", "null").statistic["linear_slope_L"] == pytest.approx(-2.0)
    assert _case("B6", "planted").statistic["linear_phases"] == [1, 1, 1, 1]
    assert b6_rule([1, 1, 1, 1], [2, 2, 2, 2], -2.0, False) == (False, True)  # what every run of the protocol gives
    assert b6_rule([1, 1, 1, 1], [2, 2, 2, 2], 0.0, True) == (False, False)  # a censored run decides nothing


def test_b7_reads_the_time_ratios():
    null, planted = _case("B7", "null").statistic, _case("B7", "planted").statistic
    assert null["ratio_eps0.03"] < 0.8 and null["ratio_eps0.001"] >= 0.95  # the saving vanishes at the fine eps
    assert planted["ratio_eps0.03"] == pytest.approx(0.5, abs=1e-3) and planted["ratio_eps0.001"] == 0.5


def test_r1_reads_settled_final_errors():
    null, planted = _case("R1", "null").statistic, _case("R1", "planted").statistic
    assert null["test_error_M_max"] > 4 * null["population_test_error"] and null["unsettled_runs"] == []
    assert planted["test_error_M_max"] <= 2 * planted["population_test_error"]


def test_r2_phase_ratio_passes_a_constant_speed_rise_and_an_exponential():
    stats = {n: _case("R2", n).statistic["factored_rho"] for n in ("null", "null_one_law", "null_accelerating",
                                                                   "planted")}
    assert stats["null"] == pytest.approx(16 / 9) and stats["null_one_law"] > 1 > stats["null_accelerating"]
    assert _case("R2", "null_one_law").verdict == SUPPORTED and stats["planted"] > 1


def test_r3a_reads_the_order_of_convergence_and_a_stall_decides_nothing():
    assert _case("R3a", "null").statistic["T_conv_by_feature"][0] == 2774
    assert _case("R3a", "planted").statistic["T_conv_by_feature"] == {0: 348, 1: 1100, 2: 1256, 3: 1466, 4: 1758}
    assert r3a_rule({0: 348, 1: 1100, 2: None}) == (False, False)  # a rare feature below 0.9: censored, not refuted
