"""Models. The reduced one-layer softmax attention of the paper:

    y_hat = sum_i y_i softmax_i(x_i^T Q x_q),   softmax over the N context tokens,

with a trainable key-query matrix Q in R^{d x d}, Q^(0) = 0 by default. The forward returns the
attention weights with the prediction, so the recorder treats every model the same way.
"""

from __future__ import annotations

import torch
from torch import nn


class ReducedAttention(nn.Module):
    def __init__(
        self,
        d: int,
        init: str = "zero",
        init_scale: float = 0.01,
        gen: torch.Generator | None = None,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str = "cpu",
    ) -> None:
        super().__init__()
        Q0 = torch.zeros(d, d, dtype=dtype, device=device)
        if init == "random":
            Q0 = init_scale * torch.randn(d, d, generator=gen, dtype=dtype, device=device) / d**0.5
        self.Q = nn.Parameter(Q0)  # Q, the merged key-query matrix

    def forward(
        self, x_ctx: torch.Tensor, y_ctx: torch.Tensor, x_q: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x_ctx (B, N, d), y_ctx (B, N), x_q (B, d) -> (y_hat (B,), attention (B, N))."""
        qx = x_q @ self.Q.T  # (B, d): Q x_q, first, so the cost is B d^2 + B N d, not B N d^2
        logits = torch.bmm(x_ctx, qx.unsqueeze(-1)).squeeze(-1)  # x_i^T Q x_q
        attn = torch.softmax(logits, dim=-1)  # stable: softmax subtracts the max
        y_hat = (attn * y_ctx).sum(-1)
        return y_hat, attn


def make_model(cfg, d: int, gen: torch.Generator, dtype: torch.dtype, device) -> nn.Module:
    if cfg.kind == "reduced":
        return ReducedAttention(d, cfg.init, cfg.init_scale, gen, dtype, device)
    raise ValueError(f"unknown model kind {cfg.kind!r}")
