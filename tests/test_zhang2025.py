"""The Zhang-Singh-Latham-Saxe suite (ZS1-ZS3): end to end at the TINY size, each rule's nulls and planted case, the
plateau closed form against the paper's code's numbers, and the staircase reading of real ATTN_S curves."""

from __future__ import annotations

import numpy as np
import pytest
from suite_support import assert_controls_can_fail, run_suite_at_tiny

import lipschitz_icl.papers.zhang2025  # noqa: F401  (registers the suite)
from lipschitz_icl.experiments.staircase import sigmoid_steps, staircase
from lipschitz_icl.linattn import plateau_losses
from lipschitz_icl.papers.zhang2025.merged import run_merged, time_course_deviation
from lipschitz_icl.papers.zhang2025.separate import run_separate, zs3_rule
from lipschitz_icl.papers.zhang2025.settings import ramp, white

IDS = ["ZS1", "ZS2", "ZS3"]


def test_the_zhang_suite_runs_at_tiny_size(tmp_path):
    claims = run_suite_at_tiny(tmp_path, "zhang", IDS, "zhang2025")
    assert all("half the step size" in c.refinement["approximation"] for c in claims)
    plateaus = claims[2].statistic["plateaus"]
    assert plateaus["closed_form"] == pytest.approx(plateau_losses(ramp(2), 31).tolist())
    assert set(plateaus["measured"]) == {0, 1}


@pytest.mark.parametrize("cid", IDS)
def test_each_rule_rejects_its_nulls_and_accepts_its_planted_case(cid):
    assert_controls_can_fail(cid)


def test_plateaus_are_the_paper_codes_loss_at_saddle():
    # plot_loss.ipynb of yedizhang/linattn-icl, D = 4, lambda proportional to (4, 3, 2, 1), N = 31
    assert plateau_losses(ramp(4), 31) == pytest.approx([1.0, 0.64058, 0.37737, 0.20980, 0.13600], abs=5e-6)
    d8 = [1.0, 0.81126, 0.64898, 0.51301, 0.40318, 0.31917, 0.26045, 0.22601, 0.21335]
    assert plateau_losses(ramp(8), 31) == pytest.approx(d8, abs=5e-6)


def test_separate_heads_rest_on_each_closed_form_plateau_in_order():
    run = run_separate(ramp(3), heads=4, seed=0, scale=0.01, lr=1.0, steps=6000)
    closed = plateau_losses(ramp(3), 31)
    assert not run["censored"] and len(run["levels"]) == 4
    assert np.allclose(run["levels"], closed, atol=1e-3)
    assert np.isclose(run["levels"][-1], closed[-1], rtol=1e-9)  # the optimum itself, to the engine's precision
    assert run["learned"] == [[0], [0, 1], [0, 1, 2]]


def test_merged_heads_drop_once_and_later_from_a_smaller_start():
    early, late = (run_merged(white(2), 4, 0, scale, 0.1, 800) for scale in (1e-2, 1e-6))
    assert early["intermediate"] == late["intermediate"] == 0 and not early["censored"]
    # the closed form's slope D^{3/2}/2 per unit of ln(1/init), D = 2: within 10%
    slope = (late["t_drop"] - early["t_drop"]) / np.log(1e4)
    assert slope == pytest.approx(2 ** 1.5 / 2, rel=0.1)


def test_zs3_rule_accepts_a_censored_run_that_fits_as_far_as_it_went():
    closed = plateau_losses(ramp(4), 31)
    t = np.linspace(0, 200, 4001)
    curve = sigmoid_steps(t, list(closed[:3]) + [closed[3] + 0.05], [40, 80, 190], 1.5)  # cut off mid-drop
    stairs = staircase(t, curve)
    runs = [{"seed": s, "levels": stairs.levels, "learned": [[0], [0, 1]], "closed": closed.tolist(),
             "censored": True} for s in range(5)]
    sup, ref, stat = zs3_rule(runs)
    assert not ref and stat["fitting"] == 5


def test_gradient_descent_from_an_aligned_start_follows_the_closed_form_logistic():
    # the gap to the closed-form time course is gradient descent's own O(lr) error: halving lr halves it
    coarse, fine = time_course_deviation(4, 0.05), time_course_deviation(4, 0.025)
    assert 1.8 < coarse / fine < 2.2
    assert abs(2 * fine - coarse) < 1e-3  # extrapolated to lr -> 0
