"""The linear-attention core: the reduced forms equal the residual-stream layer, the exact engine's closed
forms (optimum, plateaus, shifts) against brute force and against the sampled engine within sampling error."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lipschitz_icl.errors import UserInputError
from lipschitz_icl.linattn import (
    Form,
    GaussianTask,
    init_params,
    linear_engine,
    optimal_error,
    optimal_gamma,
    plateau_losses,
    predict,
    single_error,
    train_linear,
)
from lipschitz_icl.linattn.engines import ExactEngine, exact_single_loss, gd_layers_loss
from lipschitz_icl.linattn.task import rotated
from lipschitz_icl.linattn.tokens import token_predict
from lipschitz_icl.rng import make_generator

SETTINGS = [([0.25, 0.25, 0.25, 0.25], 4, 0.0), ([0.5, 0.3, 0.15, 0.05], 16, 0.0), ([2.0, 1.0, 0.5], 7, 0.3),
            ([1.0] * 6, 40, 0.1)]


def _task(eigs, n, noise=0.0, rotate=False):
    cov = rotated(eigs, 1, "rot") if rotate else torch.diag(torch.tensor(eigs, dtype=torch.float64))
    return GaussianTask.make(cov, n, noise=noise)


@pytest.mark.parametrize("form", [Form("merged", heads=3), Form("separate", heads=2, rank=2), Form("gamma"),
                                  Form("gd_layers", layers=3)])
def test_reduced_forms_equal_the_residual_stream_layer(form):
    task = _task([0.4, 0.3, 0.2, 0.1], 8, 0.1)
    gen = make_generator(0, "t")
    x, y, xq, _ = task.draw(6, gen)
    params = init_params(form, 4, 0.5, gen)
    assert torch.allclose(predict(form, params, x, y, xq), token_predict(form, params, x, y, xq), atol=1e-13)


@pytest.mark.parametrize("eigs,n,noise", SETTINGS)
def test_optimum_is_the_preconditioned_step_and_a_stationary_point(eigs, n, noise):
    task = _task(eigs, n, noise, rotate=True)
    lam = task.cov
    closed = torch.linalg.inv((1 + 1 / n) * lam + (torch.trace(lam) + noise ** 2) / n * torch.eye(len(eigs),
                                                                                                   dtype=lam.dtype))
    gamma = optimal_gamma(task)
    assert torch.allclose(gamma, closed, atol=1e-10)
    g = gamma.clone().requires_grad_(True)
    exact_single_loss(g, task).backward()
    assert g.grad.abs().max() < 1e-10
    bumped = gamma + 1e-3 * torch.randn(gamma.shape, generator=make_generator(2, "b"), dtype=gamma.dtype)
    assert single_error(bumped, task) > optimal_error(task)


@pytest.mark.parametrize("eigs,n,noise", SETTINGS)
def test_plateaus_are_the_restricted_optima(eigs, n, noise):
    task = _task(eigs, n, noise)
    lam = np.sort(np.asarray(eigs))[::-1]
    order = np.argsort(-np.asarray(eigs), kind="stable")
    plateaus = plateau_losses(eigs, n, noise)
    for r in range(len(eigs) + 1):  # the best Gamma on the top-r eigenvectors, found by least squares
        idx = torch.tensor(order[:r], dtype=torch.long)
        gamma = torch.zeros(len(eigs), len(eigs), dtype=torch.float64)
        if r:
            best = optimal_gamma(task)[idx][:, idx]
            gamma[idx[:, None], idx[None, :]] = best
        assert single_error(gamma, task) / (lam.sum() + noise ** 2) == pytest.approx(plateaus[r], abs=1e-12)


def test_white_plateau_formula_of_the_issue():
    lam = np.array([0.4, 0.3, 0.2, 0.1])  # tr Lambda = 1
    n = 10
    expected = 1 - np.concatenate([[0], np.cumsum(lam / (1 + (1 + 1 / lam) / n))])
    assert np.allclose(plateau_losses(lam, n), expected, atol=1e-14)


@pytest.mark.parametrize("eigs,n,noise", SETTINGS[1:3])
def test_exact_engine_within_sampling_error_of_the_sampled_engine(eigs, n, noise):
    task = _task(eigs, n, noise, rotate=True)
    gamma = 0.4 * torch.randn(len(eigs), len(eigs), generator=make_generator(3, "g"), dtype=torch.float64)
    x, y, xq, yq = task.draw(200_000, make_generator(4, "p"))
    err = (yq - predict(Form("gamma"), {"Gamma": gamma}, x, y, xq)) ** 2
    se = float(err.std()) / np.sqrt(len(err))
    assert abs(float(err.mean()) - single_error(gamma, task)) < 4 * se


def test_shifted_task_and_pool_moments_against_sampling():
    task = _task([0.5, 0.3, 0.2], 5, 0.2)
    pool = torch.randn(3, 3, generator=make_generator(5, "pool"), dtype=torch.float64)
    shifted = task.shifted(cov=[0.1, 0.4, 0.5], n_context=9, query_cov=[1.0, 0.2, 0.3], pool=pool)
    gamma = optimal_gamma(task)
    x, y, xq, yq = shifted.draw(200_000, make_generator(6, "p"))
    err = (yq - predict(Form("gamma"), {"Gamma": gamma}, x, y, xq)) ** 2
    assert abs(float(err.mean()) - single_error(gamma, shifted)) < 4 * float(err.std()) / np.sqrt(len(err))


def test_gd_layers_quadrature_against_the_closed_form_and_refinement():
    task = _task([0.5, 0.3, 0.2], 6, 0.2)
    a = 0.7 * torch.eye(3, dtype=torch.float64)[None] + 0.1
    engine = ExactEngine(task, 0, context_draws=20_000)
    one = float(gd_layers_loss(a, task, engine.covs()))
    assert one == pytest.approx(single_error(a[0], task), rel=0.01)
    two = torch.cat([a, 0.5 * a])
    coarse, fine = (float(gd_layers_loss(two, task, e.covs())) for e in (engine, engine.refined()))
    assert coarse == pytest.approx(fine, rel=0.02)
    assert coarse < one  # a second step of preconditioned GD helps


def test_gradient_descent_on_the_exact_engine_reaches_the_optimum():
    task = _task([0.4, 0.3, 0.2, 0.1], 8)
    run = train_linear(Form("gamma"), task, lr=4.0, steps=3000, init_scale=0)
    assert torch.allclose(run.gamma, optimal_gamma(task), rtol=1e-6, atol=1e-8)
    assert run.final_exact == pytest.approx(optimal_error(task), rel=1e-10)
    assert (np.diff(run.curve["exact"]) <= 1e-15).all()  # gradient descent below 2/curvature never goes up


def test_sampled_engine_fixed_set_repeats_and_fresh_set_does_not():
    task = _task([0.5, 0.5], 4)
    form, params = Form("gamma"), {"Gamma": torch.eye(2, dtype=torch.float64)}
    fixed = linear_engine("sampled", task, 0, n_prompts=64)
    fresh = linear_engine("sampled", task, 0, batch=64)
    assert float(fixed.loss(form, params)) == float(fixed.loss(form, params))
    assert float(fresh.loss(form, params)) != float(fresh.loss(form, params))


@pytest.mark.parametrize("call,match", [
    (lambda: GaussianTask.make([1.0, -1.0], 4), "positive definite"),
    (lambda: GaussianTask.make([1.0, 1.0], 0), "n_context"),
    (lambda: Form("nope"), "allowed: merged"),
    (lambda: Form("separate", rank=0), "rank"),
    (lambda: linear_engine("nope", GaussianTask.make([1.0], 2)), "allowed: exact, sampled"),
    (lambda: train_linear(Form("full"), GaussianTask.make([1.0], 2), lr=0.1, steps=1), "full residual-stream"),
    (lambda: train_linear(Form("gamma"), GaussianTask.make([1.0], 2), lr=-1, steps=1), "lr"),
])
def test_bad_input_is_one_line_naming_what_is_allowed(call, match):
    with pytest.raises(UserInputError, match=match):
        call()


@pytest.mark.parametrize("form", [Form("merged", heads=3), Form("separate", heads=2, rank=2), Form("gamma"),
                                  Form("gd_layers")])
def test_closed_form_gradient_equals_autograd(form):
    task = GaussianTask.make([0.4, 0.3, 0.2, 0.1], 8, noise=0.2, query_cov=[1.0, 0.5, 0.2, 0.3])
    runs = [train_linear(form, task, lr=0.3, steps=300, init_scale=0.3, seed=1, record_every=7,
                         closed_gradient=fast, keep_gamma=True) for fast in (True, False)]
    assert np.allclose(runs[0].curve["exact"], runs[1].curve["exact"], rtol=1e-12, atol=1e-14)
    assert np.allclose(np.stack(runs[0].history), np.stack(runs[1].history), rtol=1e-10, atol=1e-13)


def test_quadrature_draws_are_closed_under_the_reflections_of_lambda():
    cov = torch.tensor([[1.0, 0.3, 0.0], [0.3, 0.8, 0.1], [0.0, 0.1, 0.5]], dtype=torch.float64)
    task = GaussianTask.make(cov, 6)
    covs = ExactEngine(task, 0, context_draws=512).covs()
    _, u = torch.linalg.eigh(cov)
    r = u @ torch.diag(torch.tensor([1.0, -1.0, 1.0], dtype=torch.float64)) @ u.T
    a = torch.randn(2, 3, 3, generator=make_generator(8, "a"), dtype=torch.float64)
    # the quadrature is invariant under A -> R A R, as the expectation is
    assert float(gd_layers_loss(a, task, covs)) == pytest.approx(float(gd_layers_loss(r @ a @ r, task, covs)),
                                                                 rel=1e-12)


def test_adam_with_decay_reaches_the_optimum_on_the_sampled_engine():
    task = GaussianTask.make([0.5, 0.3, 0.2], 8)
    run = train_linear(Form("gamma"), task, lr=0.05, steps=600, engine="sampled", seed=0, init_scale=0,
                       batch=512, optimizer="adam", decay=True, record_every=100)
    assert run.final_exact < optimal_error(task) * 1.02
    with pytest.raises(UserInputError, match="allowed: sgd, adam"):
        train_linear(Form("gamma"), task, lr=0.1, steps=1, optimizer="rmsprop")
