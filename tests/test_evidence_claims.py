"""The evidence rules as the claims apply them, on planted data: conditions that move under refinement decide
nothing; a deterministic curve's exponent is its exact slope with its local slopes; event times below the
resolution decide nothing; runs stopped at their budget are counted and never decide."""

from __future__ import annotations

import numpy as np

import lipschitz_icl as li
from lipschitz_icl.experiments.claims import claim
from lipschitz_icl.experiments.evidence import MIN_RESOLVED_STEPS, refined_conditions, settings_of, settled
from lipschitz_icl.experiments.runner import Context
from lipschitz_icl.experiments.sizes import TINY
from lipschitz_icl.papers.li2025 import step_size
from lipschitz_icl.papers.writeup import linear_vs_nonlinear


def test_conditions_that_move_under_refinement_decide_nothing():
    sup, ref, refined, why = refined_conditions((True, False), (False, True), "4x the count draws", {"R": 0.95})
    assert (sup, ref) == (False, False) and not refined["agrees"] and "4x the count draws" in why
    assert refined["verdict"] == "not supported" and refined["statistic"] == {"R": 0.95}
    sup, ref, refined, why = refined_conditions((False, True), (False, True), "exact counts", {})
    assert (sup, ref, why) == (False, True, "") and refined["agrees"]
    sup, ref, _, why = refined_conditions((False, False), (True, False), "exact counts", {})
    assert (sup, ref) == (False, False) and why  # inconclusive -> supported moved: still nothing decided


def test_a_run_still_moving_at_its_budget_is_not_settled():
    steps = np.arange(300)
    assert settled(0.01 + np.exp(-steps / 20.0))  # decayed onto its floor long before the budget
    assert not settled(np.exp(-steps / 150.0))  # still falling by a third per tenth of the run
    assert not settled([1.0, 0.5])  # too few recorded values to tell
    noisy = 0.5 + 0.01 * np.random.default_rng(0).standard_normal(300)
    assert settled(noisy)  # a plateau with noise of 2% is settled


def test_a_forced_reason_stands_only_where_the_settings_force_the_outcome():
    one = li.load_config(None, ["engine.counts=mean_field"])
    copies = settings_of([("L1", one.with_overrides(["task.L=1"])), ("L2", one.with_overrides(["task.L=2"]))])
    other = settings_of([("L1", one), ("gauss", one.with_overrides(["features.kind=gaussian", "features.d=8"]))])
    forced = claim("X1", "c", {"x": 1.0}, True, False, settings=copies, forced_reason="f = L g")
    free = claim("X1", "c", {"x": 1.0}, True, False, settings=other, forced_reason="f = L g")
    assert forced.forced and forced.forced_reason == "f = L g" and "eta L^2" in forced.forced_by
    assert not free.forced and free.forced_reason == "" and free.distinct_settings == 2


def test_a_statistic_at_an_absolute_accuracy_keeps_the_loss_scale_apart():
    """(L, eta) = (1, 4) and (2, 1): one run step for step (eta L^2 = 4), losses 4x apart."""
    base = li.load_config(None, ["engine.counts=mean_field"])
    named = [("a", base.with_overrides(["task.L=1", "train.lr=4"])), ("b", base.with_overrides(["task.L=2",
                                                                                               "train.lr=1"]))]
    assert settings_of(named, by="shape").distinct == settings_of(named, by="run").distinct == 1
    assert settings_of(named, by="loss").distinct == 2


def test_p7_reads_no_time_inside_the_first_steps_and_p6_no_interval_of_one_curve(tmp_path):
    p6, p7 = step_size.exp_tuned(Context(out=tmp_path, quick=True, sizes=TINY))
    times = [t for ts in p7.statistic["times"].values() for t in ts.values() if t is not None]
    assert p7.statistic["rho"] < 1 and min(times) >= MIN_RESOLVED_STEPS  # at rho = 1 a crossing came within 2 steps
    medians = [v for k, v in p7.statistic.items() if k.startswith(("flat_", "sharp_"))]
    assert all(m is None or m >= MIN_RESOLVED_STEPS for m in medians) and p7.statistic["unresolved_medians"] == []
    assert p6.interval == {} and len(p6.statistic["local_slopes_label_noise"]) == len(TINY.tuned_L_factors) - 1
    assert p6.refinement["approximation"].startswith("4x")


def test_b6_counts_the_symmetric_classes_once_and_reads_the_classes_where_they_differ(tmp_path):
    (b6,) = linear_vs_nonlinear.exp_linear_vs_nonlinear(Context(out=tmp_path, quick=True, sizes=TINY))
    groups = [g["members"] for g in b6.settings["groups"]]
    symmetric = next(g for g in groups if "orthonormal-linear-0.5Lstar" in g)
    assert {m.split("-")[1] for m in symmetric} == {"linear", "relu_net", "sinusoid", "rbf"}  # one trajectory
    assert not b6.forced and b6.distinct_settings == 7  # + orthonormal aniso_linear, 5 gaussian classes
    assert b6.verdict == "inconclusive" or not b6.statistic["censored_runs"]  # a run at its budget decides nothing
