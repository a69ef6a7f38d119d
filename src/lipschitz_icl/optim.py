"""The two optimizers a run uses, as plain tensor updates: the same arithmetic, operation for operation, as
``torch.optim.SGD`` (no momentum) and ``torch.optim.Adam`` (no weight decay, no amsgrad) take on the CPU (their
single-tensor path), so a run's numbers are bit for bit those of torch's optimizers (``tests/test_optim.py``).

Why not torch's own: constructing any ``torch.optim`` optimizer imports ``torch._dynamo`` (about 1.6 CPU-s on
the development machine), paid by every process that trains one run on the sampled engine."""

from __future__ import annotations

from collections.abc import Iterable

import torch


class PlainSGD:
    """Steps of size eta: theta <- theta - eta grad (eta: ``train.lr``)."""

    def __init__(self, params: Iterable[torch.Tensor], lr: float) -> None:
        self.params, self.lr = list(params), float(lr)

    @torch.no_grad()
    def step(self) -> None:
        for p in self.params:
            if p.grad is not None:
                p.add_(p.grad, alpha=-self.lr)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None


class PlainAdam(PlainSGD):
    """Adam (Kingma and Ba) with torch's defaults: betas (0.9, 0.999), eps 1e-8; moments m, v per parameter,
    bias-corrected by 1 - beta^t, with t counted per parameter from its first gradient (as torch counts it)."""

    def __init__(self, params: Iterable[torch.Tensor], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        super().__init__(params, lr)
        self.betas, self.eps = betas, eps
        self.state: dict[int, tuple[list[int], torch.Tensor, torch.Tensor]] = {}  # index -> ([t], m, v)

    @torch.no_grad()
    def step(self) -> None:
        beta1, beta2 = self.betas
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            if i not in self.state:
                zeros = torch.zeros_like(p, memory_format=torch.preserve_format)
                self.state[i] = ([0], zeros, zeros.clone())
            count, m, v = self.state[i]
            count[0] += 1
            grad = p.grad
            m.lerp_(grad, 1 - beta1)  # m <- beta1 m + (1 - beta1) g
            v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)  # v <- beta2 v + (1 - beta2) g^2
            step_size = self.lr / (1 - beta1 ** count[0])
            denom = (v.sqrt() / (1 - beta2 ** count[0]) ** 0.5).add_(self.eps)
            p.addcdiv_(m, denom, value=-step_size)


def make_optimizer(kind: str, params: Iterable[torch.Tensor], lr: float) -> PlainSGD:
    """``train.optimizer``: adam, or plain steps of size eta (gd and sgd differ in the engine's draws only)."""
    return PlainAdam(params, lr) if kind == "adam" else PlainSGD(params, lr)
