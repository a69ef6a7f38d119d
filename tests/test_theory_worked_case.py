"""The worked case of docs/DESIGN.md: orthonormal features, linear class (w uniform on the sphere of
radius L): Sigma = (L^2/d) I, Delta = sqrt 2, delta = 1/sqrt d, L* = sqrt(d/2)."""

import math

import pytest
import torch

from lipschitz_icl.config import validate_config
from lipschitz_icl.problem import build_problem
from lipschitz_icl.theory import regime, theory_of


@pytest.mark.parametrize("d,L", [(5, 2.0), (8, 0.5), (16, 3.0)])
def test_worked_case(d, L):
    cfg = validate_config({"features": {"K": d, "d": d}, "task": {"L": L}})
    problem = build_problem(cfg)
    torch.testing.assert_close(problem.kernel.sigma, (L**2 / d) * torch.eye(d, dtype=torch.float64))
    th = theory_of(problem)
    assert th.Delta == pytest.approx(math.sqrt(2))
    assert th.delta == pytest.approx(1 / math.sqrt(d))
    assert th.L_star == pytest.approx(math.sqrt(d / 2))
    assert th.delta_se == 0.0


def test_monte_carlo_kernel_matches_exact_linear():
    """The Monte-Carlo estimator (used by classes without a closed form) agrees with the
    linear class's closed form within 5 standard errors."""
    cfg = validate_config({"features": {"K": 4, "d": 6, "kind": "gaussian"}, "task": {"L": 1.5}})
    problem = build_problem(cfg)
    from lipschitz_icl.engines import make_generator

    assert problem.kernel.samples == 0  # the closed form is used when a class has one
    task = problem.task
    F = task.values_on(task.sample(20000, make_generator(0, "y"), torch.float64), problem.features.V)
    prods = F.unsqueeze(2) * F.unsqueeze(1)
    est, se = prods.mean(0), prods.std(0) / math.sqrt(20000)
    assert torch.all((est - problem.kernel.sigma).abs() <= 5 * se + 1e-12)


def test_regime_labels():
    assert regime(1.0, 1.58) == "flat"
    assert regime(2.0, 1.58) == "sharp"
    assert regime(1.6, 1.58) == "near-threshold"
