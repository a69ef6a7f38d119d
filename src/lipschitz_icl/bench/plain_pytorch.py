"""The plain-PyTorch baseline: the training step a user would write without this package.

An ``nn.Parameter`` Q, B fresh prompts of N tokens in d dimensions sampled every step (feature
ids, tokens x = v_z, a linear function f(x) = w^T x with w uniform on the sphere of radius L per
prompt), the model y_hat = sum_i y_i softmax_i(x_i^T Q x_q), autograd and ``torch.optim.SGD``.
It reads the loss back every step (``loss.item()``), as a training loop that logs would. On
``device`` (cpu or cuda) it draws with a generator of that device, as such a loop would.
"""

from __future__ import annotations

import torch
from torch import nn


class PlainBaseline:
    def __init__(
        self, V: torch.Tensor, N: int, B: int, L: float, lr: float = 1.0, dtype: torch.dtype = torch.float32,
        seed: int = 0, device: str = "cpu",
    ) -> None:
        self.V = V.T.contiguous().to(device, dtype)  # (K, d): row k is v_k
        self.K, self.d = self.V.shape
        self.N, self.B, self.L, self.dtype, self.device = N, B, L, dtype, device
        self.gen = torch.Generator(device=device).manual_seed(seed)
        self.Q = nn.Parameter(torch.zeros(self.d, self.d, dtype=dtype, device=device))
        self.opt = torch.optim.SGD([self.Q], lr=lr)

    def prompt_losses(self) -> torch.Tensor:
        """1/2 (y_hat - f(x_q))^2 for B fresh prompts (B,), with the autograd graph."""
        ids = torch.randint(self.K, (self.B, self.N + 1), generator=self.gen, device=self.device)
        x = self.V[ids]  # (B, N + 1, d) tokens
        w = torch.randn(self.B, self.d, generator=self.gen, dtype=self.dtype, device=self.device)
        w = self.L * w / w.norm(dim=1, keepdim=True)  # one linear function per prompt
        y = torch.einsum("bnd,bd->bn", x, w)  # labels
        logits = torch.einsum("bnd,bd->bn", x[:, :-1], x[:, -1] @ self.Q.T)  # x_i^T Q x_q
        y_hat = (torch.softmax(logits, dim=-1) * y[:, :-1]).sum(-1)
        return 0.5 * (y_hat - y[:, -1]) ** 2

    def step(self) -> float:
        loss = self.prompt_losses().mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()
