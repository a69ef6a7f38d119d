"""The population optimum over the score matrix M (optimum.py): converged to a gradient tolerance,
a true minimum, a function of L / tau only, and the bisection for L_tau."""

import math

import pytest
import torch

from lipschitz_icl.config import apply_overrides, validate_config
from lipschitz_icl.engines import kernel_loss
from lipschitz_icl.optimum import ScoreObjective, attention_crossing, population_optimum
from lipschitz_icl.problem import build_problem

BASE = {"features": {"kind": "orthonormal", "K": 4, "d": 4}, "prompt": {"N": 30},
        "task": {"kind": "linear", "L": 2.0}, "engine": {"kind": "kernel", "draws": 16}}


def objective(*overrides: str) -> ScoreObjective:
    return ScoreObjective(build_problem(validate_config(apply_overrides(BASE, list(overrides)))))


def test_optimum_meets_the_gradient_tolerance_and_beats_perturbations():
    obj = objective()
    opt = population_optimum(obj, L=1.0, tau=0.5, tol=1e-10)
    assert opt.converged and opt.grad_norm <= 1e-10 * (1.0 + 0.25)
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        M = opt.M + 1e-2 * torch.randn(4, 4, generator=gen, dtype=torch.float64)
        assert float(obj.evaluate(M, 1.0, 0.5, need_grad=False).loss[0]) > opt.loss
    # the objective is the kernel engine's loss: the autograd reference agrees at the optimum
    ref, _ = kernel_loss(opt.M, obj.counts.T, obj.sigma1, obj.p, 0.5)
    assert float(ref) == pytest.approx(opt.loss, rel=1e-12)


def test_optimum_depends_on_L_and_tau_only_through_their_ratio():
    obj = objective("task.kind=relu_net", "task.kernel_samples=256")
    a = population_optimum(obj, L=1.0, tau=0.5, tol=1e-11)
    b = population_optimum(obj, L=3.0, tau=1.5, tol=1e-11)
    assert a.attn_self == pytest.approx(b.attn_self, abs=1e-7)
    assert b.loss == pytest.approx(9 * a.loss, rel=1e-8)  # the loss scales as L^2 at fixed L / tau


def test_attention_at_the_optimum_rises_with_L_and_the_crossing_is_at_one_half():
    obj = objective()
    attn = [population_optimum(obj, L, 1.0).min_attn for L in (0.25, 0.5, 1.0, 2.0, 4.0)]
    assert all(x < y for x, y in zip(attn, attn[1:], strict=False))
    cross = attention_crossing(obj, tau=1.0, L_lo=0.05, L_hi=20.0, iters=14)
    assert cross.L is not None and cross.all_converged and cross.lo <= cross.L <= cross.hi
    assert population_optimum(obj, cross.L, 1.0).min_attn == pytest.approx(0.5, abs=2e-3)
    # twice the noise: twice the L (the optimum depends on L / tau)
    cross2 = attention_crossing(obj, tau=2.0, L_lo=0.1, L_hi=40.0, iters=14)
    assert cross2.L == pytest.approx(2 * cross.L, rel=1e-3)
    # a level outside the bracket gives no crossing
    assert attention_crossing(obj, tau=1.0, L_lo=5.0, L_hi=20.0, iters=3).L is None


def test_initial_loss_is_the_loss_at_uniform_scores_and_scales_as_L_squared():
    obj = objective()
    l0 = obj.initial_loss()
    assert obj.initial_loss(3.0) == pytest.approx(9 * l0, rel=1e-12)
    assert math.isfinite(l0) and l0 > 0


def test_no_label_noise_and_rank_deficient_features_are_refused():
    with pytest.raises(ValueError, match="tau must be > 0"):
        population_optimum(objective(), L=1.0, tau=0.0)
    with pytest.raises(ValueError, match="full column rank"):
        objective("features.kind=simplex", "features.d=4")
