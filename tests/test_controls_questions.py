"""Controls of the open questions R3b-R8 (papers/questions/): each claim's own rule on synthetic nulls and a planted
case, the statistic each read, and whether the rule can fail (R3d and R8: the protocol fixes the outcome)."""

import pytest

import lipschitz_icl.papers  # noqa: F401  (registers the built-in claims and their controls)
from lipschitz_icl.experiments.claims import NOT_SUPPORTED, SUPPORTED, claim
from lipschitz_icl.experiments.controls import attach, controls_of, is_evidence
from lipschitz_icl.papers.questions import eps_axis, label_noise, linear_norm, token_noise

CLAIMS = ["R3b", "R3c", "R3d", "R4", "R5", "R6", "R7", "R8"]
NULLS = {"R3b": ["null_unconcentrated"], "R3c": ["null_slower"], "R3d": ["null_far"], "R4": ["null_sqrt"],
         "R5": ["null_far", "null_pair"], "R6": ["null_widening"], "R7": [], "R8": ["null_stall"]}
FIXED = {"R3d": "the grid decides", "R8": "f = L g: at eta = 1 every L is one trajectory"}


@pytest.mark.parametrize("cid", CLAIMS)
def test_each_rule_rejects_its_nulls_and_accepts_its_planted_case(cid):
    made = controls_of(cid)
    assert made.null.verdict == NOT_SUPPORTED and made.planted.verdict == SUPPORTED
    assert sorted(made.extra) == sorted(NULLS[cid])
    assert all(c.verdict == NOT_SUPPORTED for c in made.extra.values())


@pytest.mark.parametrize("cid", CLAIMS)
def test_can_fail_unless_the_protocol_fixes_the_outcome(cid):
    made = controls_of(cid)
    result = claim(cid, "c", {}, True, False)
    attach(result)
    if cid in FIXED:
        assert not made.can_fail and f"the protocol fixes the outcome: {FIXED[cid]}" in made.failing()
        assert result.can_fail is False and "fixed" in result.controls and not is_evidence(result)
    else:
        assert made.can_fail and made.failing() == "" and result.can_fail is True


def test_r3b_reads_sigma_half_against_one_with_its_margin():
    made = controls_of("R3b")
    assert made.null.statistic["sigma_half_interval"][1] < 1 - token_noise.R3B_MARGIN
    assert made.extra["null_unconcentrated"].statistic["sigma_half_by_seed"] == [0.0] * 5
    assert made.planted.statistic["sigma_half_interval"][0] > 1 + token_noise.R3B_MARGIN
    assert made.planted.statistic["sigma_half_by_seed"][-2:] == [1.5, 1.5]  # censored at the grid's end
    assert token_noise.r3b_rule([1.0, 1.02, 1.03, 1.04, 1.05])[:2] == (False, False)  # on the boundary
    assert token_noise.r3b_rule([1.3] * 4)[:2] == (False, False)  # fewer than 5 settled seeds decide nothing


def test_r3c_reads_saturation_and_slowing():
    made = controls_of("R3c")
    assert made.null.statistic["min_final_attn"] < 0.5 and made.null.statistic["T_eps_largest_L"] is None
    slower = made.extra["null_slower"].statistic
    assert slower["T_eps_largest_L"] > 2 * slower["T_eps_smallest_L"]
    assert made.planted.statistic["T_eps_largest_L"] <= made.planted.statistic["T_eps_smallest_L"]


def test_r3d_reads_reachability_and_the_distance_to_the_optimum():
    made = controls_of("R3d")
    assert min(made.null.statistic["optimum_min_attn"]) < 0.9 <= min(made.planted.statistic["optimum_min_attn"])
    assert min(made.extra["null_far"].statistic["attn_gap"]) > 0.15
    assert max(made.planted.statistic["attn_gap"]) <= 0.05
    assert label_noise.r3d_rule([True, False], [0.0, 0.0], [1.0, 1.0]) == (False, True)
    assert "0.726" in label_noise.R3D_FIXED


def test_r4_reads_the_eps_exponent_and_the_better_model():
    made = controls_of("R4")
    null, planted = made.null.statistic, made.planted.statistic
    assert null["levels_in_range"] == planted["levels_in_range"] == 9
    assert null["eps_exponent"] == pytest.approx(1.0, abs=0.01) and null["rms_power_law"] < null["rms_log_model"]
    assert made.extra["null_sqrt"].statistic["eps_exponent"] == pytest.approx(0.6, abs=0.01)
    assert planted["eps_exponent"] < eps_axis.LOG_MAX and planted["rms_log_model"] <= planted["rms_power_law"]


def test_r5_combines_the_delta_readings():
    made = controls_of("R5")
    assert set(made.null.statistic["by_Delta_reading"].values()) == {NOT_SUPPORTED}
    assert made.extra["null_pair"].statistic["by_Delta_reading"] == {
        "rescale": SUPPORTED, "tilt": SUPPORTED, "pair": NOT_SUPPORTED}  # one reading contradicting decides
    assert set(made.planted.statistic["by_Delta_reading"].values()) == {SUPPORTED}


def test_r6_reads_the_slopes_of_sharpness_and_window():
    made = controls_of("R6")
    assert made.null.statistic["slope_Q"] == pytest.approx(0.0, abs=1e-12)
    assert made.extra["null_widening"].statistic["slope_window"] == pytest.approx(0.2)
    assert made.planted.statistic["slope_Q"] == pytest.approx(0.6)
    assert max(made.planted.statistic["local_slopes_window"]) < 0


def test_r7_reads_the_best_head():
    made = controls_of("R7")
    assert made.null.statistic["best_head_attn_min"] < 0.5 and made.null.statistic["error_over_reduced"] <= 2
    assert made.planted.statistic["best_head"] == "L1H1" and made.planted.statistic["best_head_attn_min"] >= 0.9


def test_r8_reads_the_slope_of_T1_and_the_final_attention():
    made = controls_of("R8")
    assert made.null.statistic["slope_T1_vs_L"] == pytest.approx(0.0, abs=1e-12)
    assert min(made.extra["null_stall"].statistic["final_min_attn"]) < 0.5
    assert made.planted.statistic["slope_T1_vs_L"] == pytest.approx(-2.0)
    assert linear_norm.r8_rule(-2.0, [True, False], [0.95, 0.7]) == (False, False)  # a run cut short: undecided
