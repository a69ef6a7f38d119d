"""The degenerate class sign_split (tasks/sign_split.py) and claim P9 (papers/li2025/degenerate.py): its exact Sigma
against a Monte-Carlo estimate, delta = 0 with no division anywhere, the CLI's theory on it, P9's reading of a run,
its controls' verdicts (pinned) and a small run of the experiment."""

import dataclasses
import math

import numpy as np
import pytest
import torch
from cli_support import runner

import lipschitz_icl.papers  # noqa: F401  (registers the built-in claims and their controls)
from lipschitz_icl.cli import app
from lipschitz_icl.config import FeaturesConfig
from lipschitz_icl.engines import make_generator
from lipschitz_icl.experiments import experiments_for_claims, run_experiments
from lipschitz_icl.experiments.claims import INCONCLUSIVE, NOT_SUPPORTED, SUPPORTED, VERDICTS
from lipschitz_icl.experiments.controls import controls_of
from lipschitz_icl.experiments.runner import Context, base_config, budget_steps
from lipschitz_icl.experiments.sizes import TINY
from lipschitz_icl.features import make_features
from lipschitz_icl.papers.li2025.degenerate import final_min_attn, p9_rule, side_features
from lipschitz_icl.problem import build_problem
from lipschitz_icl.tasks import KernelEstimate, make_task
from lipschitz_icl.theory import nondegeneracy, theory_of, theory_report

L = 2.0


def _monte_carlo_sigma(task, V: torch.Tensor, samples: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sigma_nm = mean_i f_i(v_n) f_i(v_m) over sampled functions, and the mean of f(v_k)."""
    funcs = task.sample(samples, make_generator(seed, "mc"), torch.float64)
    F = task.values_on(funcs, V)
    return F.T @ F / samples, F.mean(0)


@pytest.mark.parametrize("kind", ["orthonormal", "gaussian", "simplex"])
def test_exact_sigma_matches_a_monte_carlo_estimate_and_f_has_mean_zero(kind):
    V = make_features(FeaturesConfig(kind=kind, K=5, d=6), make_generator(1, "features")).V.double()
    task = make_task("sign_split", L, 6)
    exact = task.exact_kernel(V)
    mc, mean = _monte_carlo_sigma(task, V, 4000, seed=3)
    # f = eps L g with eps^2 = 1: every sampled product equals the exact one, so the estimate is exact to rounding
    torch.testing.assert_close(mc, exact, rtol=1e-12, atol=1e-12)
    se = exact.diagonal().sqrt() / math.sqrt(4000)  # the mean of eps L g_k over 4000 draws
    assert torch.all(mean.abs() <= 4 * se + 1e-12)
    assert torch.linalg.matrix_rank(exact) == 1  # Sigma = L^2 g g^T
    est = task.kernel(V, make_generator(0, "k"))
    assert est.samples == 0 and torch.equal(est.sigma, exact)  # the exact path: no Monte-Carlo error carried


def test_orthonormal_values_are_the_largest_split_an_L_lipschitz_function_allows():
    task = make_task("sign_split", L, 5)
    funcs = task.sample(64, make_generator(0, "f"), torch.float64)
    F = task.values_on(funcs, torch.eye(5, dtype=torch.float64))
    assert torch.allclose(F.abs(), torch.full_like(F, L / math.sqrt(2)))
    assert torch.equal(torch.sign(F[:, 0::2]), torch.sign(F[:, :1]).expand(-1, 3))  # one value on the even side
    assert torch.equal(torch.sign(F[:, 1::2]), -torch.sign(F[:, :1]).expand(-1, 2))  # the other on the odd side
    assert (F[:, 0] - F[:, 1]).abs().max() == pytest.approx(L * math.sqrt(2))  # = L ||e_0 - e_1||: tight
    x = torch.randn(64, 200, 5, generator=make_generator(1, "x"), dtype=torch.float64)
    y = x + 0.3 * torch.randn(64, 200, 5, generator=make_generator(2, "y"), dtype=torch.float64)
    diff = (task.evaluate(funcs, x) - task.evaluate(funcs, y)).abs()
    assert torch.all(diff <= L * (x - y).norm(dim=-1) * (1 + 1e-12))


def test_theory_reports_delta_zero_an_infinite_threshold_and_no_regime():
    problem = build_problem(base_config(["task.kind=sign_split"]))
    th = theory_of(problem)
    assert th.delta == 0.0 and th.delta_se == 0.0 and th.Delta == pytest.approx(math.sqrt(2))
    assert th.L_star == math.inf and th.regime is None and "delta = 0" in th.undefined
    rep = theory_report(problem, iters=20)
    assert rep["T_f"] is None and math.isfinite(rep["eta_max"]) and "sign_split" in rep["theory_undefined"]


def test_delta_is_zero_only_where_two_features_share_a_side():
    pair = build_problem(base_config(["task.kind=sign_split", "features.K=2"]))  # e_0 and e_1: opposite sides
    assert theory_of(pair).delta == pytest.approx(1.0) and theory_of(pair).regime is not None
    gauss = build_problem(base_config(["task.kind=sign_split", "features.kind=gaussian", "features.d=8"]))
    assert theory_of(gauss).delta > 0  # generic features: every g_k differs
    V = torch.as_tensor(side_features(5, seed=4)).T  # tilted within their side: still degenerate
    est = KernelEstimate(make_task("sign_split", L, 5).exact_kernel(V), torch.zeros(5, 5), 0)
    assert nondegeneracy(est, V, L)[0] == 0.0


def test_a_random_sign_vector_per_function_would_not_be_degenerate():
    # independent signs per feature: Sigma = (L^2 / 2) I on orthonormal features, delta = 1/sqrt 2 > 0
    V = torch.eye(5, dtype=torch.float64)
    iid = KernelEstimate(L**2 / 2 * torch.eye(5, dtype=torch.float64), torch.zeros(5, 5), 0)
    assert nondegeneracy(iid, V, L)[0] == pytest.approx(1 / math.sqrt(2))


def test_a_budget_in_the_theory_time_scale_is_the_cap_for_a_degenerate_class():
    assert budget_steps(base_config(["task.kind=sign_split"]), 1e-3, cap=5000) == 5000  # T_f = inf: no overflow
    assert budget_steps(base_config([]), 1e-3, cap=100) == 100


def test_cli_theory_prints_a_clear_result_not_a_traceback():
    result = runner.invoke(app, ["theory", "task.kind=sign_split", "--iters", "20"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "Traceback" not in result.output and "inf" in text and "delta = 0" in text


def test_side_features_keep_the_class_degenerate_and_break_the_symmetry():
    V = side_features(5, seed=0)
    assert np.allclose(np.linalg.norm(V, axis=1), 1.0)
    g = (np.linalg.norm(V[:, 0::2], axis=1) - np.linalg.norm(V[:, 1::2], axis=1)) / math.sqrt(2)
    assert np.allclose(np.abs(g), 1 / math.sqrt(2))
    G = V @ V.T
    assert np.abs(G - np.eye(5)).max() > 0.05 and np.array_equal(V, side_features(5, seed=0))


def test_a_run_is_read_where_its_distance_from_one_has_settled():
    t = np.arange(400.0)
    draining = 0.2 * np.exp(-t / 100)  # min_k Attn_k falling towards 0: 1 - Attn has settled
    rising = 1 - 0.8 * np.exp(-t / 300)  # still rising towards 1: not settled, censored
    assert final_min_attn(draining) == pytest.approx(draining[-1]) and final_min_attn(rising) is None


def test_p9_rule_needs_a_concentrating_control_and_five_settled_seeds():
    low, high = [0.1, 0.15, 0.2, 0.22, 0.3], [0.95, 0.96, 0.97, 0.97, 0.98]
    assert p9_rule(low, high)[:2] == (True, False)
    assert p9_rule(high, high)[:2] == (False, True)
    assert p9_rule(low, [0.5, 0.6, 0.7, 0.8, 0.9])[:2] == (False, False)  # a control that does not concentrate
    assert p9_rule([*low[:4], None], high)[:2] == (False, False)  # four settled seeds decide nothing


def test_p9_controls_reject_concentration_and_accept_stalling():
    made = controls_of("P9")
    assert made.null.verdict == NOT_SUPPORTED and made.planted.verdict == SUPPORTED
    assert made.can_fail and made.failing() == "" and not made.fixed
    assert made.null.statistic["interval_degenerate"][0] >= 0.9
    assert made.planted.statistic["interval_degenerate"] == [0.15, 0.3]


def test_p9_experiment_runs_end_to_end_at_a_small_size(tmp_path):
    ctx = Context(out=tmp_path, quick=True, sizes=dataclasses.replace(TINY, budget=40))  # budgets capped at 1000
    (c,) = run_experiments(ctx, experiments_for_claims(["P9"]))
    assert c.criterion != "(experiment failed)", c.notes
    assert c.verdict in VERDICTS and (c.verdict != INCONCLUSIVE or c.undecided_because)
    s = c.statistic
    assert s["delta_degenerate"] == [0.0] and s["orthonormal_counterexample"]["sign_split"]["delta"] == 0.0
    assert s["median_min_attn_degenerate"] < 0.5  # the degenerate attention stalls; the side takes the mass
    assert all(r["side_attn"] > 0.9 for n, r in s["per_seed"].items() if n.startswith("sign_split"))
    assert c.censored >= len(c.censored_runs) and c.distinct_settings == 10 and not c.forced
    assert c.figures and all((tmp_path / f).is_file() for f in c.figures)
    assert all("look for" in c.captions[f].lower() for f in c.figures)
