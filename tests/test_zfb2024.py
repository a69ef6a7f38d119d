"""The Zhang-Frei-Bartlett suite (ZF1-ZF3): end to end at the TINY size, each rule's null and planted verdicts, and
the closed forms (optimum, error at M, covariate-shift limit) at several (D, N, Lambda)."""

from __future__ import annotations

import pytest
import torch
from suite_support import assert_controls_can_fail, run_suite_at_tiny

import lipschitz_icl.papers.zfb2024  # noqa: F401  (registers the suite)
from lipschitz_icl.linattn import GaussianTask, optimal_gamma, single_error
from lipschitz_icl.papers.zfb2024.common import ANISO3, ISO3, Setting, balanced_at, gradient_flow, zfb_full_init
from lipschitz_icl.papers.zfb2024.error import zfb_error
from lipschitz_icl.papers.zfb2024.shifts import covariate_limit

IDS = ["ZF1", "ZF2", "ZF3"]


def test_the_zfb_suite_runs_at_tiny_size(tmp_path):
    claims = run_suite_at_tiny(tmp_path, "zfb", IDS, "zfb2024")
    assert claims[2].forced and claims[2].forced_reason
    assert (tmp_path / "data" / "zfb_convergence.csv").is_file()


@pytest.mark.parametrize("cid", IDS)
def test_each_rule_rejects_its_nulls_and_accepts_its_planted_case(cid):
    assert_controls_can_fail(cid)


CASES = [([1.0, 1.0, 1.0], 10), ([2.0, 1.0, 0.5], 10), ([1.6, 1.2, 0.8, 0.4], 20), ([0.3] * 5, 7), ([3.0, 0.2], 4)]


@pytest.mark.parametrize("eigs,n", CASES)
def test_the_papers_error_formula_is_single_error_at_gamma_star(eigs, n):
    task = GaussianTask.make(eigs, n)
    lam, d = task.cov, len(eigs)
    bracket = (1 + 1 / n) * lam + torch.trace(lam) / n * torch.eye(d, dtype=lam.dtype)
    assert torch.allclose(optimal_gamma(task), torch.linalg.inv(bracket), atol=1e-12)
    for m in (max(n // 2, 1), n, 4 * n, 1000):
        assert zfb_error(task, m) == pytest.approx(single_error(optimal_gamma(task), task.shifted(n_context=m)),
                                                   rel=1e-10)
    if len(set(eigs)) == 1 and eigs[0] == 1.0:  # Lambda = I: D(1+D)/(N+1+D) at M = N
        assert zfb_error(task, n) == pytest.approx(d * (1 + d) / (n + 1 + d), rel=1e-12)


@pytest.mark.parametrize("eigs", [[1.0, 1.0, 1.0], [2.0, 1.0, 0.5]])
def test_covariate_shift_error_tends_to_its_limit_and_unshifted_error_to_zero(eigs):
    s = Setting("t", tuple(eigs), 10)
    cov = torch.diag(torch.tensor([0.5, 1.0, 1.5], dtype=torch.float64))
    big = s.task().shifted(n_context=10 ** 6)
    gamma = optimal_gamma(big)
    assert single_error(gamma, big.shifted(cov=cov)) == pytest.approx(covariate_limit(s, cov), rel=1e-4)
    assert single_error(gamma, big) < 1e-4
    assert covariate_limit(s, 2 * s.task().cov) == pytest.approx(2 * sum(eigs), rel=1e-12)  # (c-1)^2 c tr Lambda


def test_gradient_flow_from_the_papers_init_reaches_gamma_star_and_stays_there():
    run = gradient_flow(ISO3, seed=0, budget=400)
    assert run.rel[-1] < 1e-3 and run.excess[-1] < 1e-8
    at = gradient_flow(ANISO3, seed=0, budget=50, init=balanced_at(optimal_gamma(ANISO3.task())))
    assert at.rel[-1] < 1e-10
    full = zfb_full_init(3, 0)
    assert full["PV"][0, :3].abs().max() == 0 and full["KQ"][0, 3].abs().max() == 0
