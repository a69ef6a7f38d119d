"""Controls: each claim's own rule on a null (the claim false) and a planted case (the claim true). One contract for
every registered claim (built-in and plugin), the pinned verdicts of the controls written so far, and the way a
claim that cannot fail, or has no controls, is kept out of the evidence everywhere it is shown."""

import json

import pytest

import lipschitz_icl.papers  # noqa: F401  (registers the built-in claims and their controls)
from lipschitz_icl.experiments import registry
from lipschitz_icl.experiments.claims import NOT_SUPPORTED, STATEMENTS, SUPPORTED, VERDICTS, claim
from lipschitz_icl.experiments.controls import (
    MISSING,
    Controls,
    attach,
    can_fail_cell,
    case,
    controls,
    controls_of,
    counts,
    has_controls,
    is_evidence,
)
from lipschitz_icl.experiments.synthetic import curve_steps, n_phases_of_curve, power_law, two_rates
from lipschitz_icl.report import write_claims_json
from lipschitz_icl.report.export import claims_frame
from lipschitz_icl.report.html import write_report_html
from lipschitz_icl.report.md import write_report_md

CAN_FAIL = {"B5", "B7", "CL1", "CL3", "CL5", "H1", "H3", "P1", "P3", "P4", "P4c", "P6", "P7", "P8", "P9", "R1", "R3a",
            "R3b", "R3c", "R4", "R5", "R6", "R7"}  # the claims whose rule rejects its nulls: may only grow


def registered_claims() -> list[str]:
    return sorted({cid for exp in registry.registered() if not exp.comparison for cid in exp.claims})


@pytest.mark.parametrize("cid", registered_claims())
def test_every_registered_claim_meets_the_controls_contract(cid):
    made = controls_of(cid)
    result = claim(cid, "c", {}, True, False)
    attach(result)
    if made is None:  # no controls yet: shown as missing, never evidence
        assert result.can_fail is None and can_fail_cell(result) == MISSING and not is_evidence(result)
        return
    assert isinstance(made, Controls)
    for c in [made.null, made.planted, *made.extra.values()]:
        assert c.verdict in VERDICTS and c.how and isinstance(c.statistic, dict)
    assert result.can_fail is made.can_fail
    assert is_evidence(result) is made.can_fail  # a rule that passes its null is never evidence
    assert json.loads(json.dumps(result.as_dict()))["controls"]["null"]["verdict"] == made.null.verdict


def test_every_built_in_claim_has_controls_and_those_that_can_fail_only_grow():
    assert all(has_controls(cid) for cid in registered_claims())
    assert CAN_FAIL <= {cid for cid in registered_claims() if controls_of(cid).can_fail}


@pytest.mark.parametrize("cid", ["H1", "P1", "P8"])
def test_the_phase_reading_rejects_one_smooth_law_and_accepts_a_fast_phase_then_a_creep(cid):
    made = controls_of(cid)
    assert made.null.verdict == NOT_SUPPORTED and made.planted.verdict == SUPPORTED
    assert made.extra["null_logistic"].verdict == NOT_SUPPORTED
    assert made.extra["null_exponential"].verdict == NOT_SUPPORTED
    assert made.can_fail and made.failing() == ""


def test_the_old_rate_ratio_passes_a_single_power_law():
    # analysis.n_phases compares the mean rates before and after T_1: any law that slows down passes; kept as a
    # descriptive number in `analyze`, no longer a claim's reading
    t = curve_steps()
    assert n_phases_of_curve(t, power_law(t)) == 2 and n_phases_of_curve(t, power_law(t, scale=16.0)) == 2


def test_the_four_phase_events_pass_a_logistic_and_a_ramp_so_h2_cannot_fail():
    # take-off, fastest growth, saturation and convergence are found on any S-shaped or straight rise
    made = controls_of("H2")
    assert made.null.verdict == made.extra["null_ramp"].verdict == made.planted.verdict == SUPPORTED
    assert made.null.statistic["phases_by_feature"] == {0: 1, 1: 4, 2: 4} and not made.can_fail


@pytest.mark.parametrize("cid", ["P2", "P3", "P6", "P7"])
def test_each_rule_rejects_its_nulls_and_accepts_its_planted_case(cid):
    made = controls_of(cid)
    assert made.null.verdict == NOT_SUPPORTED and made.planted.verdict == SUPPORTED
    assert all(c.verdict == NOT_SUPPORTED for c in made.extra.values())


def test_p2_rejects_its_null_but_the_protocol_fixes_its_outcome():
    # R = 1 would refute P2, but the softmax's zero-sum gradient rows keep every run's R far below the line
    made = controls_of("P2")
    assert made.null.statistic["mean_R_interval"][0] >= 0.9 > made.planted.statistic["mean_R_interval"][1]
    assert not made.can_fail and "the protocol fixes the outcome: R is tied to the softmax" in made.failing()
    result = claim("P2", "c", {}, True, False)
    attach(result)
    assert result.can_fail is False and "fixed" in result.controls and not is_evidence(result)
    assert can_fail_cell(result) == "cannot fail"


def test_p3_can_fail_through_its_attention_part_only():
    made = controls_of("P3")
    assert made.null.statistic["fraction_attn_and_error_ok"] == 0.0  # every null setting has error below eps
    assert "the attention part decides" in made.null.statistic["note"]


def test_p6_and_p7_controls_read_their_statistics():
    p6 = controls_of("P6")
    assert p6.null.statistic["slope"] > -0.2 > p6.planted.statistic["slope"]
    assert all(x < 0 for x in p6.planted.statistic["local_slopes"])
    p7 = controls_of("P7")
    assert p7.planted.statistic["flat_T_eps0.0001"] < p7.planted.statistic["sharp_T_eps0.0001"]
    assert p7.planted.statistic["flat_T_eps0.01"] > p7.planted.statistic["sharp_T_eps0.01"]


def test_synthetic_curves_read_as_documented():
    t = curve_steps()
    assert n_phases_of_curve(t, power_law(t)) == 2
    assert n_phases_of_curve(t, two_rates(t, fast=5e-4, slow_factor=1.0)) == 1  # one exponential: one phase


def test_a_claim_without_controls_is_reported_as_missing_and_not_counted(isolated_registry):
    STATEMENTS["X9"] = "a plugin's claim"
    result = claim("X9", "c", {"x": 1}, True, False)
    attach(result)
    assert result.controls == {"missing": True} and can_fail_cell(result) == MISSING
    assert counts([result]) == {"claims": 1, "evidence": 0, "forced": 0, "cannot fail": 0, "controls missing": 1,
                                "inconclusive": 0}


def test_a_plugin_claim_with_controls_that_can_fail_is_evidence(isolated_registry):
    STATEMENTS["X8"] = "a plugin's claim with controls"

    @controls("X8")
    def x8_controls() -> Controls:
        return Controls(null=case(False, True, {"s": 0.0}, "no effect"), planted=case(True, False, {"s": 1.0}, "an "
                                                                                     "effect"))

    result = claim("X8", "c", {"s": 0.9}, True, False)
    attach(result)
    assert result.can_fail is True and is_evidence(result) and can_fail_cell(result) == "yes"
    with pytest.raises(ValueError, match="already has controls"):
        controls("H1")(x8_controls)


def test_reports_show_can_fail_and_the_counts(tmp_path, isolated_registry):
    STATEMENTS["X7"] = "a plugin's claim without controls"
    results = [claim(cid, "c", {"x": 1.0}, True, False) for cid in ("H1", "P1", "X7")]
    for r in results:
        attach(r)
    meta = {"command": "test", "size": "quick", "seed": 0, "wall_s": 1.0}
    write_claims_json(tmp_path, results, meta)
    md = write_report_md(tmp_path, results, meta).read_text()
    html = write_report_html(tmp_path, results, meta, {}).read_text()
    line = "claims: 3, evidence: 2, forced: 0, cannot fail: 0, controls missing: 1, inconclusive: 0"
    assert line in md and line in html
    assert "| can fail |" in md and "| yes |" in md and "controls missing; not evidence" in md
    assert "**Controls.** Can fail: the claim's rule rejects its null" in md
    frame = claims_frame(results, "quick")
    assert dict(zip(frame["id"], frame["can_fail"], strict=True)) == {"H1": "yes", "P1": "yes", "X7": MISSING}
    assert dict(zip(frame["id"], frame["controls_null"], strict=True)) == {"H1": NOT_SUPPORTED, "P1": NOT_SUPPORTED,
                                                                           "X7": ""}
    saved = json.loads((tmp_path / "claims.json").read_text())["claims"]
    assert {c["id"]: c["can_fail"] for c in saved} == {"H1": True, "P1": True, "X7": None}


def _result(cid: str, supported: bool, can_fail, forced: bool = False):
    r = claim(cid, "c", {}, supported, not supported, forced=forced)
    r.can_fail = can_fail
    return r


def test_the_regime_answer_rests_on_evidence_only(tmp_path):
    from lipschitz_icl.report.answer import regime_answer

    none = [_result("P4", True, None), _result("P5", True, False), _result("P7", False, True, forced=True)]
    text = regime_answer(none)
    assert "no answer: none of the readings of it is evidence yet" in text and "3 claims read it, 0 of them" in text
    assert "forced by an invariance (P7)" in text and "no controls (P4)" in text
    assert "a rule that cannot fail (its null passes, or the protocol fixes the outcome) (P5)" in text
    assert "says yes: P5 support it" in regime_answer([_result("P5", True, True), _result("P4", True, None)])
    assert "split: P5 support it, P4b refute it" in regime_answer([_result("P5", True, True),
                                                                    _result("P4b", False, True)])
    assert "Not asked in this run" in regime_answer([_result("H1", True, True)])
    # P6 reads a fall of eta_max with L, which a smooth curve without any change at L* passes: not a reading of it
    assert "Not asked in this run" in regime_answer([_result("P6", True, True)])
    meta = {"command": "test", "size": "quick", "seed": 0, "wall_s": 1.0}
    md = write_report_md(tmp_path, none, meta).read_text().splitlines()
    assert md[2].startswith("**Is there a regime separation at L*?** This run gives no answer")
    html = write_report_html(tmp_path, none, meta, {}).read_text()
    assert "<p class=answer><b>Is there a regime separation at L*?</b> This run gives no answer" in html
