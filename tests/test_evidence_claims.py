"""The evidence rules as the claims apply them, on planted data: conditions that move under refinement decide
nothing; a deterministic curve's exponent is its exact slope with its local slopes; event times below the
resolution decide nothing; runs stopped at their budget are counted and never decide."""

from __future__ import annotations

import numpy as np

from lipschitz_icl.experiments.evidence import power_law, refined_conditions


def test_conditions_that_move_under_refinement_decide_nothing():
    sup, ref, refined, why = refined_conditions((True, False), (False, True), "4x the count draws", {"R": 0.95})
    assert (sup, ref) == (False, False) and not refined["agrees"] and "4x the count draws" in why
    assert refined["verdict"] == "not supported" and refined["statistic"] == {"R": 0.95}
    sup, ref, refined, why = refined_conditions((False, True), (False, True), "exact counts", {})
    assert (sup, ref, why) == (False, True, "") and refined["agrees"]
    sup, ref, _, why = refined_conditions((False, False), (True, False), "exact counts", {})
    assert (sup, ref) == (False, False) and why  # inconclusive -> supported moved: still nothing decided
