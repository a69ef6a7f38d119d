"""Kernel engine against the sampled engine, and the kernel engine's S- and Q-space forms."""

import math

import torch

from lipschitz_icl.config import validate_config
from lipschitz_icl.engines import build_engine, draw_prompts, kernel_loss, make_generator
from lipschitz_icl.engines.kernel_spec import draw_counts
from lipschitz_icl.problem import build_problem


def test_kernel_and_sampled_engines_agree_on_loss_and_gradient():
    """With sigma = 0 both engines estimate the same population loss and gradient. Tolerance:
    the difference is within 4 combined standard errors (sampled prompts + count draws)."""
    cfg = validate_config({"features": {"K": 4, "d": 4}, "prompt": {"N": 20}, "task": {"L": 2.0}})
    problem = build_problem(cfg)
    fs, task = problem.features, problem.task
    gen = make_generator(3, "agree")
    Q = 1.5 * torch.randn(4, 4, generator=gen, dtype=torch.float64)
    M = (fs.V.T @ Q.T @ fs.V).requires_grad_(True)

    # kernel: many count draws, split in chunks to get a standard error
    counts = draw_counts(fs, 20, 20000, gen)
    k_losses, k_grads = [], []
    for c in counts.chunk(20):
        M.grad = None
        loss = kernel_loss(M, c, problem.kernel.sigma, fs.p)[0]
        loss.backward()
        k_losses.append(float(loss.detach()))
        k_grads.append(M.grad.clone())
    # sampled: many prompts with sampled functions, in chunks too
    s_losses, s_grads = [], []
    for _ in range(20):
        batch = draw_prompts(fs, task, 20, 4000, 0.0, gen)
        Qp = Q.clone().requires_grad_(True)
        logits = torch.einsum("bnd,de,be->bn", batch.x[:, :-1], Qp, batch.x[:, -1])
        y_hat = (torch.softmax(logits, -1) * batch.y[:, :-1]).sum(-1)
        loss = 0.5 * (y_hat - batch.target).square().mean()
        loss.backward()
        s_losses.append(float(loss.detach()))
        s_grads.append(fs.V.T @ Qp.grad.T @ fs.V)  # gradient in M coordinates (V orthonormal)

    def mean_se(xs):
        t = torch.stack([torch.as_tensor(x) for x in xs])
        return t.mean(0), t.std(0) / math.sqrt(len(xs))

    (kl, kse), (sl, sse) = mean_se(k_losses), mean_se(s_losses)
    assert abs(kl - sl) <= 4 * math.hypot(kse, sse), (kl, sl, kse, sse)
    (kg, kgse), (sg, sgse) = mean_se(k_grads), mean_se(s_grads)
    assert torch.all((kg - sg).abs() <= 4 * torch.hypot(kgse, sgse) + 1e-4), (kg, sg)
    assert float(kl) > 0.05  # a non-trivial point of the loss surface


def test_s_space_and_q_space_gradient_descent_agree():
    """GD on Q equals GD on M = V^T Q^T V preconditioned by G = V^T V (non-orthogonal features)."""
    base = {"features": {"kind": "gaussian", "K": 4, "d": 7}, "train": {"lr": 0.5, "steps": 5}}
    engines = {}
    for space in ("S", "Q"):
        cfg = validate_config({**base, "engine": {"space": space, "draws": 32}})
        engines[space] = build_engine(build_problem(cfg))
    for _ in range(5):
        for eng in engines.values():
            eng.forward_backward()
            with torch.no_grad():
                for p in eng.parameters():
                    p -= 0.5 * p.grad
    torch.testing.assert_close(engines["S"].scores(), engines["Q"].scores(), rtol=1e-10, atol=1e-12)
    assert engines["S"].scores().abs().max() > 0.01


def test_mean_field_counts_are_np():
    cfg = validate_config({"engine": {"counts": "mean_field"}})
    eng = build_engine(build_problem(cfg))
    torch.testing.assert_close(eng.counts, torch.full((1, 5), 10.0, dtype=torch.float64))
