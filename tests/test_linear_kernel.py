"""Linear attention on the kernel engine (engines/kernel_linear.py): the closed form against autograd,
against the sampled engine at sigma = 0, GD in S and Q space, the theory's step bound, and the
factored form of linear attention."""

from __future__ import annotations

import math

import pytest
import torch

import lipschitz_icl as li
from lipschitz_icl.config import validate_config
from lipschitz_icl.engines import build_engine, draw_prompts, make_generator
from lipschitz_icl.engines.kernel_linear import count_moments, linear_kernel_loss, linear_kernel_loss_grad
from lipschitz_icl.engines.kernel_spec import draw_counts
from lipschitz_icl.models import FactoredLinearAttention, LinearAttention
from lipschitz_icl.problem import build_problem
from lipschitz_icl.theory import theory_report

D = torch.float64


@pytest.mark.parametrize("features,task,tau", [("orthonormal", "linear", 0.0), ("gaussian", "relu_net", 0.7),
                                               ("simplex", "sinusoid", 0.3)])
def test_closed_form_equals_autograd_of_the_draw_by_draw_loss(features, task, tau):
    cfg = validate_config({"features": {"kind": features, "K": 4, "d": 5}, "prompt": {"N": 9},
                           "task": {"kind": task, "kernel_samples": 256}})
    problem = build_problem(cfg)
    fs, sigma = problem.features, problem.kernel.sigma
    gen = make_generator(0, "lin")
    counts = draw_counts(fs, 9, 64, gen)
    M = (2 * torch.randn(4, 4, generator=gen, dtype=D)).requires_grad_(True)
    ref = linear_kernel_loss(M, counts, sigma, fs.p, 9, tau)
    ref.backward()
    loss, grad, attn = linear_kernel_loss_grad(M.detach(), *count_moments(counts), sigma, fs.p, 9, tau)
    assert float(loss) == pytest.approx(float(ref.detach()), rel=1e-12)
    torch.testing.assert_close(grad, M.grad, rtol=1e-11, atol=1e-13)
    torch.testing.assert_close(attn, M.detach() * counts.mean(0) / 9, rtol=0, atol=0)


def test_multinomial_draws_approach_the_exact_moments():
    """Many count draws: the closed form with their moments tends to the one with the multinomial's own,
    E[c] = N p and E[c c^T] = N (N - 1) p p^T + N diag(p) (within 5 standard errors of the draws)."""
    cfg = validate_config({"features": {"K": 3, "d": 3, "probs": [0.5, 0.3, 0.2]}, "prompt": {"N": 6}})
    problem = build_problem(cfg)
    fs, sigma, N = problem.features, problem.kernel.sigma, 6
    M = torch.tensor([[3.0, 0.5, -1.0], [0.2, 4.0, 0.1], [-0.3, 0.4, 5.0]], dtype=D)
    p = fs.p
    exact = linear_kernel_loss_grad(M, N * p, N * (N - 1) * torch.outer(p, p) + N * torch.diag(p), sigma, p, N)[0]
    counts = draw_counts(fs, N, 40000, make_generator(2, "m"))
    chunks = torch.stack([linear_kernel_loss_grad(M, *count_moments(c), sigma, p, N)[0] for c in counts.chunk(40)])
    assert abs(float(chunks.mean() - exact)) <= 5 * float(chunks.std() / math.sqrt(40))


@pytest.mark.parametrize("tau", [0.0, 0.5])
def test_kernel_and_sampled_engines_agree_for_linear_attention(tau):
    """sigma = 0: the kernel engine's loss and gradient of linear attention equal the sampled engine's
    within 4 combined standard errors (count draws against sampled prompts)."""
    cfg = validate_config({"features": {"kind": "gaussian", "K": 4, "d": 4}, "prompt": {"N": 12},
                           "task": {"L": 2.0, "label_noise": tau}, "model": {"kind": "linear_attention"}})
    problem = build_problem(cfg)
    fs, task, sigma = problem.features, problem.task, problem.kernel.sigma
    gen = make_generator(3, "agree")
    Gamma = 3 * torch.randn(4, 4, generator=gen, dtype=D)
    k_loss, k_grad = [], []
    for _ in range(20):
        M = fs.V.T @ Gamma.T @ fs.V
        loss, grad, _ = linear_kernel_loss_grad(M, *count_moments(draw_counts(fs, 12, 2000, gen)), sigma, fs.p, 12, tau)
        k_loss.append(float(loss))
        k_grad.append(fs.V @ grad.T @ fs.V.T)  # dL/dGamma = V (dL/dM)^T V^T
    s_loss, s_grad = [], []
    for _ in range(20):
        batch = draw_prompts(fs, task, 12, 4000, tau, gen)
        model = LinearAttention(4, dtype=D)
        with torch.no_grad():
            model.Gamma.copy_(Gamma)
        loss = 0.5 * (model(batch.x_ctx, batch.y_ctx, batch.x_q)[0] - batch.target).square().mean()
        loss.backward()
        s_loss.append(float(loss.detach()))
        s_grad.append(model.Gamma.grad.clone())

    def mean_se(xs):
        t = torch.stack([torch.as_tensor(x) for x in xs])
        return t.mean(0), t.std(0) / math.sqrt(len(xs))

    (kl, kse), (sl, sse) = mean_se(k_loss), mean_se(s_loss)
    assert abs(kl - sl) <= 4 * math.hypot(kse, sse) and float(kl) > 0.05, (kl, sl, kse, sse)
    (kg, kgse), (sg, sgse) = mean_se(k_grad), mean_se(s_grad)
    assert torch.all((kg - sg).abs() <= 4 * torch.hypot(kgse, sgse) + 1e-6), (kg, sg)


def test_gd_in_s_and_q_space_agree_and_lowers_the_loss():
    base = ["model.kind=linear_attention", "features.kind=gaussian", "features.K=4", "features.d=6",
            "train.steps=40", "train.lr=2", "engine.draws=32", "task.kind=relu_net", "task.kernel_samples=256"]
    runs = {space: li.run(None, [*base, f"engine.space={space}"], write=False) for space in ("S", "Q")}
    torch.testing.assert_close(runs["S"].params["Gamma"], runs["Q"].params["Gamma"], rtol=1e-9, atol=1e-12)
    loss = runs["S"].series("loss")
    assert set(runs["S"].params) == {"Gamma"} and loss.iloc[-1] < 0.5 * loss.iloc[0]
    assert (loss.diff().dropna() <= 1e-15).all()  # a quadratic loss at a stable step never rises


def test_theory_step_bound_is_that_of_the_quadratic_loss():
    """The loss is quadratic in M with Hessian blocks p_k A (orthonormal features: the same in Gamma), so
    lambda_max = max_k p_k lambda_max(A) exactly; the theory's Lanczos value must match it."""
    cfg = li.load_config(None, ["model.kind=linear_attention", "features.K=3", "features.d=3", "prompt.N=10",
                                "engine.draws=64", "task.label_noise=0.4", "features.probs=[0.5, 0.3, 0.2]"])
    engine = build_engine(build_problem(cfg))
    c_mean, c2 = count_moments(engine.counts)
    A = (engine.sigma * c2 + 0.16 * torch.diag(c_mean)) / 100
    lam = float(engine.p.max() * torch.linalg.eigvalsh(A)[-1])
    rep = theory_report(cfg, iters=60)
    assert rep["lambda_max"] == pytest.approx(lam, rel=1e-6) and rep["eta_max"] == pytest.approx(2 / lam, rel=1e-6)


def test_factored_linear_attention_is_linear_attention_with_gamma_eff():
    model = FactoredLinearAttention(3, d_k=2, init_scale=0.7, gen=make_generator(0, "f"), dtype=D)
    merged = LinearAttention(3, dtype=D)
    with torch.no_grad():
        merged.Gamma.copy_(model.effective_Q())
    gen = make_generator(1, "x")
    x_ctx, y_ctx, x_q = (torch.randn(*s, generator=gen, dtype=D) for s in ((4, 6, 3), (4, 6), (4, 3)))
    for a, b in zip(model(x_ctx, y_ctx, x_q), merged(x_ctx, y_ctx, x_q), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-15)
    run = li.run(None, ["engine.kind=sampled", "model.kind=linear_attention_factored", "model.d_k=2",
                        "features.K=3", "features.d=3", "prompt.N=8", "engine.batch=64", "train.steps=20",
                        "train.lr=2"], write=False)
    assert set(run.params) == {"W_Q", "W_K"} and run.config.engine.dtype == "float64"
    assert run.series("loss").iloc[-1] < run.series("loss").iloc[0]
