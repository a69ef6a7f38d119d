"""The Ahn et al. (AH1, AH2) and Mahankali et al. (MH1) suites: end to end at TINY, each rule on its null and
planted cases, the one-layer closed form at several (D, N, Lambda), and the free L-layer model's building blocks."""

import pytest
import torch
from suite_support import assert_controls_can_fail, run_suite_at_tiny

import lipschitz_icl.papers.ahn2023  # noqa: F401  (registration)
import lipschitz_icl.papers.mahankali2024  # noqa: F401
from lipschitz_icl.linattn import Form, GaussianTask, init_params, optimal_error, optimal_gamma, predict
from lipschitz_icl.linattn.tokens import token_predict
from lipschitz_icl.papers.ahn2023.rules import ah1_rule, ah2_rule
from lipschitz_icl.papers.ahn2023.setting import anisotropic_cov, commutator, stack_predict
from lipschitz_icl.papers.mahankali2024.one_step import closed_form_check, covariances, mh1_rule
from lipschitz_icl.rng import make_generator


@pytest.mark.parametrize("suite,ids,paper", [("ahn", ["AH1", "AH2"], "ahn2023"),
                                             ("mahankali", ["MH1"], "mahankali2024")])
def test_the_suite_runs_at_tiny_size(tmp_path, suite, ids, paper):
    run_suite_at_tiny(tmp_path, suite, ids, paper)


@pytest.mark.parametrize("cid", ["AH1", "AH2", "MH1"])
def test_each_rule_rejects_its_nulls_and_accepts_its_planted_case(cid):
    assert_controls_can_fail(cid)


def test_rules_decide_nothing_with_fewer_than_five_seeds():
    assert ah1_rule({1: [1.0] * 4, 2: [0.5] * 4}, [0.01] * 4)[:2] == (False, False)
    assert ah2_rule({1: [0.0] * 4})[:2] == (False, False)
    assert mh1_rule({"iso": [0.0] * 4})[:2] == (False, False)


def test_an_under_trained_layer_is_inconclusive_not_evidence():
    assert mh1_rule({"iso": [0.3, 0.31, 0.29, 0.3, 0.32]})[:2] == (False, False)
    assert ah2_rule({2: [0.3, 0.31, 0.29, 0.3, 0.32]})[:2] == (False, False)


@pytest.mark.parametrize("dim,n", [(2, 5), (4, 16), (6, 40)])
def test_the_one_layer_optimum_is_the_papers_closed_form(dim, n):
    for name, cov in covariances(dim).items():
        task = GaussianTask.make(cov, n)
        check = closed_form_check(task)
        assert check["max_abs_diff_to_formula"] < 1e-10
        if name == "isotropic":  # one GD step of size N / (N + D + 1) = 1 / (1 + 1/N + D/N)
            assert torch.allclose(optimal_gamma(task), torch.eye(dim, dtype=torch.float64) * n / (n + dim + 1))
            assert abs(check["step_size_isotropic"] - 1 / (1 + 1 / n + dim / n)) < 1e-12
            assert abs(optimal_error(task) - dim * (dim + 1) / (n + dim + 1)) < 1e-10  # ZFB's d(d+1)/(N+d+1)


def test_commutator_is_zero_for_aligned_and_large_for_random_preconditioners():
    lam = anisotropic_cov(4)
    assert commutator(torch.linalg.inv(lam), lam) < 1e-12
    rand = torch.randn(4, 4, generator=make_generator(0, "t"), dtype=torch.float64)
    assert commutator(rand, lam) > 0.1
    assert abs(torch.trace(lam).item() - 4) < 1e-12


def test_the_free_stack_with_gd_blocks_is_preconditioned_gd():
    """Layers with W^PV = -e_y e_y^T... (up to the read-out sign): the free stack computes gd_layers."""
    task = GaussianTask.make(anisotropic_cov(3), 6)
    gen = make_generator(0, "stack")
    x, y, xq, _ = task.draw(5, gen)
    form = Form("gd_layers", layers=3)
    params = init_params(form, 3, 0.3, gen)
    pv = torch.zeros(3, 4, 4, dtype=torch.float64)
    pv[:, 3, 3] = 1.0
    kq = torch.zeros(3, 4, 4, dtype=torch.float64)
    kq[:, :3, :3] = -params["A"].transpose(1, 2)
    stacked = -stack_predict({"PV": pv, "KQ": kq}, x, y, xq)
    assert torch.allclose(stacked, predict(form, params, x, y, xq), atol=1e-12)
    one = {"PV": torch.randn(1, 4, 4, generator=gen, dtype=torch.float64),
           "KQ": torch.randn(1, 4, 4, generator=gen, dtype=torch.float64)}
    assert torch.allclose(stack_predict(one, x, y, xq), token_predict(Form("full"), {k: v for k, v in one.items()},
                                                                       x, y, xq), atol=1e-12)
