"""A small multi-layer, multi-head transformer for in-context regression.

Tokens: each context pair becomes one token [x_i, y_i] in R^{d+1}, the query [x_q, 0] (as in
standard in-context-learning code, with the label channel zero for the query); a linear map
embeds them into the residual stream of width W. Each layer is

    h <- h + MHA(LN(h)),    then, with mlp: h <- h + MLP(LN(h))     (LN only with layernorm)

where every position attends to the N context tokens only (the query is never a key), so the
query's attention row in each layer and head is a distribution over the N context tokens, as in
the reduced model. The prediction is a linear readout of the query position (after a final LN
with layernorm). No positional encoding: the model is permutation-invariant in the context.

The forward returns (y_hat (B,), attention (B, n_layers, n_heads, N)): every layer's and
head's attention from the query position to the context tokens.

Init: weights N(0, 1/fan_in), biases 0, LayerNorm gain 1, all from the seeded generator.
"""

from __future__ import annotations

import torch
from torch import nn


def parameter_count(d: int, width: int, n_layers: int, mlp: bool, layernorm: bool) -> int:
    """The number of trainable numbers of an ICLTransformer, from its sizes alone (nothing allocated)."""
    per_layer = 4 * width * width  # W_Q, W_K, W_V, W_O
    if mlp:
        per_layer += 8 * width * width + 5 * width  # W -> 4W -> W, with biases
    if layernorm:
        per_layer += 4 * width  # two LayerNorms (gain and bias)
    return (d + 2) * width + n_layers * per_layer + (2 * width if layernorm else 0) + width + 1


def activation_count(batch: int, points: int, width: int, n_layers: int, n_heads: int, mlp: bool) -> int:
    """About how many numbers one forward pass keeps for backward: the residual stream, Q/K/V, the
    attention scores and the MLP's hidden layer of each layer, for ``batch`` prompts of ``points`` tokens."""
    per_layer = batch * points * width * (6 + (8 if mlp else 0)) + 2 * batch * n_heads * points * points
    return n_layers * per_layer + batch * points * width


def size_checks(m, d: int, points: int, batches: dict[str, int]) -> list[tuple[str, str, int]]:
    """(field, what, elements) for the transformer a ModelConfig ``m`` describes: its parameters with
    gradients and optimizer state (4 copies), and the activations of each batch size in ``batches``."""
    params = parameter_count(d, m.width, m.n_layers, m.mlp, m.layernorm)
    sizes = f"width={m.width}, n_layers={m.n_layers}, mlp={m.mlp}, d={d}"
    checks = [("model.width", f"the transformer's {params:.3g} parameters ({sizes})", 4 * params)]
    for field, n in batches.items():
        acts = activation_count(n, points, m.width, m.n_layers, m.n_heads, m.mlp)
        checks.append((field, f"the transformer's activations ({field.split('.')[1]}={n}, N+1={points}, {sizes})",
                       acts))
    return checks


def _linear(n_in: int, n_out: int, bias: bool, gen, dtype, device) -> nn.Linear:
    lin = nn.Linear(n_in, n_out, bias=bias, dtype=dtype, device=device)
    with torch.no_grad():
        lin.weight.normal_(0.0, n_in**-0.5, generator=gen)
        if bias:
            lin.bias.zero_()
    return lin


class Block(nn.Module):
    def __init__(self, width: int, n_heads: int, mlp: bool, layernorm: bool, gen, dtype, device) -> None:
        super().__init__()
        self.h, self.dh = n_heads, width // n_heads
        self.W_Q = _linear(width, width, False, gen, dtype, device)
        self.W_K = _linear(width, width, False, gen, dtype, device)
        self.W_V = _linear(width, width, False, gen, dtype, device)
        self.W_O = _linear(width, width, False, gen, dtype, device)
        norm = (lambda: nn.LayerNorm(width, dtype=dtype, device=device)) if layernorm else nn.Identity
        self.ln1, self.ln2 = norm(), norm()
        self.mlp = (
            nn.Sequential(
                _linear(width, 4 * width, True, gen, dtype, device),
                nn.GELU(),
                _linear(4 * width, width, True, gen, dtype, device),
            )
            if mlp
            else None
        )

    def _heads(self, t: torch.Tensor) -> torch.Tensor:
        B, T, _ = t.shape
        return t.view(B, T, self.h, self.dh).transpose(1, 2)  # (B, H, T, dh)

    def forward(self, h: torch.Tensor, n_ctx: int) -> tuple[torch.Tensor, torch.Tensor]:
        """h (B, N+1, W) -> (h, attention (B, H, N+1, N)); keys and values are the context tokens."""
        a = self.ln1(h)
        q = self._heads(self.W_Q(a))
        k = self._heads(self.W_K(a[:, :n_ctx]))
        v = self._heads(self.W_V(a[:, :n_ctx]))
        attn = torch.softmax(q @ k.transpose(-1, -2) / self.dh**0.5, dim=-1)  # (B, H, N+1, N)
        ctx = (attn @ v).transpose(1, 2).reshape(h.shape)
        h = h + self.W_O(ctx)
        if self.mlp is not None:
            h = h + self.mlp(self.ln2(h))
        return h, attn


class ICLTransformer(nn.Module):
    def __init__(
        self,
        d: int,
        *,
        width: int = 64,
        n_layers: int = 1,
        n_heads: int = 1,
        mlp: bool = False,
        layernorm: bool = False,
        gen: torch.Generator | None = None,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str = "cpu",
    ) -> None:
        super().__init__()
        if width % n_heads:
            raise ValueError(f"width {width} is not a multiple of n_heads {n_heads}")
        self.n_layers, self.n_heads = n_layers, n_heads
        self.embed = _linear(d + 1, width, True, gen, dtype, device)  # [x, y] -> residual stream
        self.blocks = nn.ModuleList(
            Block(width, n_heads, mlp, layernorm, gen, dtype, device) for _ in range(n_layers)
        )
        self.ln_f = nn.LayerNorm(width, dtype=dtype, device=device) if layernorm else nn.Identity()
        self.readout = _linear(width, 1, True, gen, dtype, device)

    def forward(
        self, x_ctx: torch.Tensor, y_ctx: torch.Tensor, x_q: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x_ctx (B, N, d), y_ctx (B, N), x_q (B, d) -> (y_hat (B,), attention (B, n_layers, n_heads, N))."""
        N = x_ctx.shape[1]
        ctx = torch.cat([x_ctx, y_ctx.unsqueeze(-1)], dim=-1)
        query = torch.cat([x_q, torch.zeros_like(x_q[:, :1])], dim=-1).unsqueeze(1)
        h = self.embed(torch.cat([ctx, query], dim=1))  # (B, N+1, W)
        rows = []
        for block in self.blocks:
            h, attn = block(h, N)
            rows.append(attn[:, :, -1])  # the query's attention over the context, (B, H, N)
        y_hat = self.readout(self.ln_f(h[:, -1])).squeeze(-1)
        return y_hat, torch.stack(rows, dim=1)
