"""The TINY claims reference (tests/claims_snapshot.py) catches what a refactor could change: a number
beyond its tolerance, a type, a key, a length, a verdict; and every registered claim is in it."""

import json

from claims_snapshot import SNAPSHOT, differences

from lipschitz_icl.experiments import claim_ids

WANT = {"verdict": "supported", "statistic": {"slope": -2.0, "n": 3, "by": [0.5, 1.0]}, "forced": False}


def test_equal_records_have_no_differences_and_tolerance_is_relative():
    got = json.loads(json.dumps(WANT))
    got["statistic"]["slope"] = -2.0 * (1 + 1e-6)  # within 1e-4 relative: a float32 kernel path
    assert differences(got, WANT) == []
    assert differences(got, WANT, exact=True) != []  # bit for bit on the machine that made the file


def test_each_kind_of_change_is_found():
    changes = [("slope", -2.001), ("n", 3.0), ("by", [0.5]), ("extra", 1)]
    for key, value in changes:
        got = json.loads(json.dumps(WANT))
        got["statistic"][key] = value
        assert differences(got, WANT), key
    assert differences({**WANT, "verdict": "inconclusive"}, WANT)


def test_the_reference_holds_every_registered_claim():
    assert set(json.loads(SNAPSHOT.read_text())["claims"]) == set(claim_ids())


def test_a_coefficient_of_variation_at_its_noise_floor_compares_absolutely():
    want = {"statistic": {"cv_Lx_dd": 1.39e-8, "slope": 1.39e-8}}
    got = {"statistic": {"cv_Lx_dd": 1.61e-8, "slope": 1.61e-8}}  # forced copies: zero up to BFGS tolerance
    assert differences(got, want) == ["[statistic][slope]: 1.61e-08 != 1.39e-08"]  # other keys stay relative
    assert differences({"statistic": {"cv_Lx_dd": 0.01}}, {"statistic": {"cv_Lx_dd": 0.02}})  # a real change
