"""The rules that make a measurement evidence, each on planted data: copies are merged and a statistic
over one shape is forced; a curved relation is no power law; an interval over too few draws decides
nothing; a verdict that moves under refinement is inconclusive; a time inside the first steps is
unresolved; the Delta readings and their combination rule."""

from __future__ import annotations

import math

import numpy as np

import lipschitz_icl as li
from lipschitz_icl.experiments.claims import INCONCLUSIVE, NOT_SUPPORTED, SUPPORTED, claim
from lipschitz_icl.experiments.delta import combine, combined, delta_settings, distinct_runs, power_law_reading
from lipschitz_icl.experiments.evidence import (
    power_law,
    refinement,
    seed_interval,
    settings_of,
    settle,
    unresolved,
)
from lipschitz_icl.experiments.runner import Context
from lipschitz_icl.experiments.sizes import TINY
from lipschitz_icl.problem import build_problem
from lipschitz_icl.theory import theory_of


def _cfg(*extra):
    return li.load_config(None, ["engine.draws=16", *extra])


def test_copies_are_counted_once_and_a_statistic_over_one_shape_is_forced():
    copies = settings_of([(f"L{L}", _cfg(f"task.L={L}")) for L in (0.5, 1, 2)] + [("relu", _cfg("task.kind=relu_net"))])
    assert copies.distinct == 1 and copies.members == 4 and "eta L^2" in copies.forced_by()
    result = claim("P1", "planted", {"x": 1}, True, False, settings=copies)
    assert result.forced and result.distinct_settings == 1 and "eta L^2" in result.forced_by
    assert result.verdict == SUPPORTED  # forced, and still a verdict: reported and flagged
    distinct = settings_of([("orth", _cfg()), ("aniso", _cfg("task.kind=aniso_linear")),
                            ("gauss", _cfg("features.kind=gaussian", "features.d=8"))])
    assert distinct.distinct == 3 and distinct.forced_by() == ""
    assert not claim("P1", "planted", {}, True, False, settings=distinct).forced


def test_a_curved_relation_is_no_power_law_however_well_a_line_fits():
    x = np.geomspace(1, 100, 8)
    straight = power_law(x, 3.0 * x**-2.0)
    assert straight.is_power_law and math.isclose(straight.slope, -2.0, rel_tol=1e-9)
    curved = power_law(x, np.exp(-1.5 * np.log(x) - 0.25 * np.log(x) ** 2))  # local slopes -1.6 to -3.6
    assert not curved.is_power_law and "no power law" in curved.reason
    assert min(curved.local_slopes) < -3 and max(curved.local_slopes) > -2
    assert not power_law([1, 2], [1, 2]).is_power_law  # two points test nothing


def test_an_interval_over_fewer_than_five_draws_decides_nothing():
    _, covers, enough = seed_interval([1.0, 1.1, 0.9], "seeds redrawing the counts")
    assert not enough and "decides nothing" in covers
    interval, covers, enough = seed_interval([1.0, 1.1, 0.9, 1.05, 0.95], "seeds redrawing the counts")
    assert enough and interval[0] <= 1.0 <= interval[1] and covers.startswith("5 independent draws")


def test_a_verdict_that_moves_under_refinement_is_inconclusive():
    moved = refinement(SUPPORTED, NOT_SUPPORTED, "4x the count draws", {"slope": -1.2})
    assert settle(SUPPORTED, moved)[0] == INCONCLUSIVE and "moved" in settle(SUPPORTED, moved)[1]
    kept = refinement(SUPPORTED, SUPPORTED, "4x the count draws", {"slope": -2.0})
    assert settle(SUPPORTED, kept) == (SUPPORTED, "")


def test_a_time_inside_the_first_steps_is_unresolved():
    assert unresolved({"eps1e-2": 1.4, "eps1e-4": 35.0, "censored": None}) == ["eps1e-2"]


def test_the_delta_readings_rescale_and_tilt_are_one_shape_and_the_pair_is_not(tmp_path):
    ctx = Context(out=tmp_path, quick=True, sizes=TINY)
    deltas = [1.4142135623730951, 1.0, 0.7]
    shapes = {}
    for reading in ("rescale", "tilt", "pair"):
        named = [(s.name, _cfg(*s.overrides)) for s in delta_settings(ctx, reading, 5, deltas)]
        for (_name, cfg), D in zip(named, deltas, strict=True):
            assert math.isclose(theory_of(build_problem(cfg)).Delta, D, rel_tol=1e-9)
        shapes[reading] = settings_of(named).distinct
    assert shapes == {"rescale": 1, "tilt": 1, "pair": 3}


def test_the_readings_combine_by_the_stated_rule():
    assert combine({"rescale": SUPPORTED, "tilt": SUPPORTED, "pair": SUPPORTED}) == (True, False)
    assert combine({"rescale": NOT_SUPPORTED, "tilt": SUPPORTED, "pair": SUPPORTED}) == (False, True)
    assert combine({"rescale": INCONCLUSIVE, "tilt": SUPPORTED, "pair": SUPPORTED}) == (False, False)


def test_forced_readings_that_contradict_fix_the_combined_verdict_and_are_named():
    free_fails = {"rescale": {"verdict": SUPPORTED, "forced_by": "feature rescaling"},
                  "pair": {"verdict": NOT_SUPPORTED, "forced_by": ""}}
    assert combined(free_fails) == (False, True, "")  # the pair decides: not forced
    forced_fails = {"rescale": {"verdict": NOT_SUPPORTED, "forced_by": "feature rescaling"},
                    "pair": {"verdict": SUPPORTED, "forced_by": ""}}
    assert combined(forced_fails) == (False, True, "rescale: feature rescaling")  # refuted by the mathematics
    all_forced = {"rescale": {"verdict": SUPPORTED, "forced_by": "feature rescaling"},
                  "tilt": {"verdict": SUPPORTED, "forced_by": "symmetric features"}}
    assert combined(all_forced)[:2] == (True, False) and "tilt: symmetric features" in combined(all_forced)[2]


def test_a_power_law_reading_supports_only_a_straight_log_log_line_near_its_prediction():
    x = [0.5, 0.7, 1.0, 1.4]
    assert power_law_reading(x, [3.0 / v**2 for v in x], -2.0, 0.3)["verdict"] == SUPPORTED
    assert power_law_reading(x, [3.0 / v**6 for v in x], -2.0, 0.3)["verdict"] == NOT_SUPPORTED  # a law, too steep
    # curved (local slopes -1.3 to -2.9, the pair reading of P5): no power law, however close the average slope
    curved = power_law_reading(x, [10539.0, 6716.0, 2378.0, 1372.0], -2.0, 0.3)
    assert curved["verdict"] == NOT_SUPPORTED and not curved["is_power_law"] and abs(curved["slope"] + 2) < 0.3
    assert power_law_reading(x, [3.0 / v**2 for v in x], -2.0, 0.3, censored=1)["verdict"] == INCONCLUSIVE
    assert power_law_reading(x[:2], [1.0, 0.5], -2.0, 0.3)["verdict"] == INCONCLUSIVE  # two points: no test
    short = power_law_reading(x[2:] + [1.2], [1.0, 0.5, 0.7], 1.0, 0.3, min_span=3)
    assert short["verdict"] == INCONCLUSIVE and "spans" in short["undecided_because"]


def test_copies_step_for_step_are_measured_once(tmp_path):
    ctx = Context(out=tmp_path, quick=True, sizes=TINY)
    named = [(s.name, _cfg(*s.overrides)) for r in ("rescale", "tilt", "pair")
             for s in delta_settings(ctx, r, 5, [1.4142135623730951, 0.7])]
    measured = distinct_runs(settings_of(named, by="run"))
    # every reading's sqrt 2 is the orthonormal base; rescale and tilt at one Delta are one run; the pair is not
    assert measured["tilt-D1.414"] == measured["pair-D1.414"] == "rescale-D1.414"
    assert measured["tilt-D0.7"] == "rescale-D0.7" and measured["pair-D0.7"] == "pair-D0.7"
