"""The Lu et al. suite (LU1-LU2): end to end at the TINY size, each rule's null and planted verdicts, the asymptotic
formulas against the authors' code's values, and the finite-d model (sampler, ridge fit, exact errors)."""

from __future__ import annotations

import math

import pytest
import torch
from suite_support import assert_controls_can_fail, run_suite_at_tiny

import lipschitz_icl.papers.lu2025  # noqa: F401  (registers the suite)
from lipschitz_icl.linattn import Form, linear_engine, single_error
from lipschitz_icl.papers.lu2025 import saved, theory
from lipschitz_icl.papers.lu2025.model import (
    LuSetting,
    core_gamma,
    draw_statistics,
    errors,
    feature_factors,
    fit,
    normalised_pool,
    paper_error,
    simulate,
    statistics_of,
)
from lipschitz_icl.rng import make_generator

IDS = ["LU1", "LU2"]


def test_the_lu_suite_runs_at_tiny_size(tmp_path):
    claims = run_suite_at_tiny(tmp_path, "lu", IDS, "lu2025")
    assert (tmp_path / "data" / "lu_saved_reproduction.csv").is_file()
    assert claims[1].statistic["real_nulls"]["fresh_tasks_model"]["refuted"]


@pytest.mark.parametrize("cid", IDS)
def test_each_rule_rejects_its_nulls_and_accepts_its_planted_case(cid):
    assert_controls_can_fail(cid)


# values printed by the authors' theory_runs/common.py (mletey/incontext-cleanup @ c690222), run unchanged
AUTHORS = [((10, 0.2, 10, 0.01), 0.8583340127626315, 0.03300607093883633),
           ((10, 1.0, 10, 0.01), 0.2564531697353556, 0.09288831454331808),
           ((10, 8.0, 10, 0.01), 0.1155982966855623, 0.111870138984679),
           ((10, 32.0, 10, 0.01), 0.11357239459904, 0.11276698193703763)]


@pytest.mark.parametrize("args,icl,idg", AUTHORS)
def test_the_ridgeless_formulas_give_the_authors_values(args, icl, idg):
    assert theory.ridgeless_icl(*args) == pytest.approx(icl, rel=1e-12)
    assert theory.ridgeless_idg(*args) == pytest.approx(idg, rel=1e-12)


@pytest.mark.parametrize("args,value", [((10, 1e6, 2, 0.01, 0.1), 0.18935335426734146),
                                        ((10, 1e6, 0.5, 0.01, 1.0), 0.66523), ((10, 1e6, 5, 0.01, 1.0), 0.34802)])
def test_the_ridge_formula_gives_the_authors_values(args, value):
    assert theory.ridge_icl(*args) == pytest.approx(value, rel=2e-5)


def test_the_limits_of_the_theory():
    # small ridge -> ridgeless (away from tau = 1); tau, kappa -> inf -> rho + x*/(1 + x*)
    for tau in (0.5, 2.0, 5.0):
        assert theory.ridge_icl(10, 0.5, tau, 0.01, 1e-8) == pytest.approx(theory.ridgeless_icl(10, 0.5, tau, 0.01),
                                                                            rel=1e-5)
    assert theory.ridgeless_icl(10, theory.INF, 1e7, 0.01) == pytest.approx(theory.icl_limit(10, 0.01), rel=1e-5)
    assert theory.icl_limit(10, 0.01) == pytest.approx(0.10173, abs=1e-5)
    k, level = theory.kappa_half(10, 10, 0.01)
    assert theory.ridgeless_icl(10, k, 10, 0.01) == pytest.approx(level, rel=1e-9) and 0.4 < k < 0.8


def test_the_sampler_matches_explicit_prompts_in_its_moments():
    s = LuSetting(5, 2.0, 1.0, 4.0, 0.25, 0.0)
    gen = make_generator(0, "test:lu")
    pool = normalised_pool(5, 5, gen)
    task = s.task(pool)
    fast = draw_statistics(pool[torch.randint(5, (200000,), generator=gen)], s, gen)
    slow = statistics_of(*task.draw(200000, gen))
    moment = task.context_moment()
    for st in (fast, slow):
        assert torch.allclose(st["h"].T @ st["h"] / 200000, moment, atol=0.02 * float(moment.abs().max()))
        assert float(st["ybar2"].mean()) == pytest.approx(1 + s.rho, rel=0.01)
        cross = float(torch.trace(task.cov @ task.cov @ task.omega()))  # E[y_q x_q^T h] = tr(Lambda^2 Omega)
        assert float((st["yq"] * (st["xq"] * st["h"]).sum(1)).mean()) == pytest.approx(cross, rel=0.05)
    assert float((fast["ybar2"] ** 2).mean()) == pytest.approx(float((slow["ybar2"] ** 2).mean()), rel=0.02)


@pytest.mark.parametrize("augmented", [False, True])
def test_the_fit_from_pair_products_is_the_ridge_on_the_explicit_features(augmented):
    s = LuSetting(6, 3.0, 2.0, 5.0, 0.1, 0.05)
    gen = make_generator(2, "test:lu-fit")
    stats = draw_statistics(normalised_pool(12, 6, gen)[torch.randint(12, (180,), generator=gen)], s, gen)
    xq, right = feature_factors(stats, augmented)
    phi = (xq[:, :, None] * right[:, None, :]).reshape(180, -1)  # H, one Kronecker row x_q (x) r per prompt
    gram = phi.T @ phi + 180 / 6 * 0.05 * torch.eye(phi.shape[1], dtype=phi.dtype)
    want = torch.linalg.solve(gram, phi.T @ stats["yq"]).reshape(6, -1)
    torch.testing.assert_close(fit(stats, 0.05, augmented), want, rtol=1e-10, atol=1e-12)


def test_the_ridgeless_fit_minimises_the_sampled_engines_loss_on_its_fixed_prompts():
    s = LuSetting(3, 2.0, 1.0, 20.0, 0.1, 0.0)
    pool = normalised_pool(3, 3, make_generator(1, "test:lu-pool"))
    engine = linear_engine("sampled", s.task(pool), seed=3, n_prompts=180)
    gamma = core_gamma(fit(statistics_of(*engine.prompts()), 0.0)).clone().requires_grad_(True)
    loss = engine.loss(Form("gamma"), {"Gamma": gamma})
    (grad,) = torch.autograd.grad(loss, gamma)
    assert float(grad.abs().max()) < 1e-10
    with torch.no_grad():  # and it is a minimum: any perturbation raises the loss
        bumped = engine.loss(Form("gamma"), {"Gamma": gamma + 0.01 * torch.randn(3, 3, dtype=gamma.dtype)})
    assert float(bumped) > float(loss.detach())


@pytest.mark.parametrize("d,alpha,rho", [(4, 2.0, 0.01), (6, 1.5, 0.3), (3, 4.0, 0.0)])
def test_the_authors_error_formula_is_the_cores_closed_form(d, alpha, rho):
    s = LuSetting(d, alpha, 1.0, 2.0, rho, 0.0)
    pool = normalised_pool(d, d, make_generator(d, "test:lu-pool"))
    g = 0.3 * torch.randn(d, d, dtype=torch.float64, generator=make_generator(d, "test:lu-g"))
    zero, eye = torch.zeros(d, dtype=torch.float64), torch.eye(d, dtype=torch.float64)
    assert paper_error(g, alpha, zero, eye, rho) == pytest.approx(single_error(d * g, s.task()), rel=1e-10)
    assert paper_error(g, alpha, pool.mean(0), pool.T @ pool / d, rho) == pytest.approx(
        single_error(d * g, s.task(pool)), rel=1e-10)
    e = errors(g, s, pool)
    assert e["icl"] >= rho and e["idg"] >= rho


def test_the_authors_saved_values_are_reproduced_at_d10():
    table = saved.authors_table()
    assert set(table["d"]) == {10, 32, 64} and len(table) == 36
    ours = saved.reproduce(10, [0.2, 1.0], draws=20)
    agree = saved.agreement(ours)
    assert agree["d10_augmented"]["max_abs_z"] < 3  # the paper's d x (d+1) Gamma: the saved values
    assert agree["d10_gamma"]["max_abs_z"] > 3  # without the y^2 column: closer to the theory, not to them


def test_a_fresh_task_model_does_not_memorise():
    r = simulate(LuSetting(6, 10.0, math.inf, 4.0, 0.01, 1e-6), seed=0)
    assert r["icl"] == pytest.approx(r["idg"], rel=0.05)
