"""Models. Every forward takes (x_ctx (B, N, d), y_ctx (B, N), x_q (B, d)) and returns
(y_hat (B,), attention), where attention is the query's softmax over the N context tokens:
(B, N) for a single-head model, (B, n_layers, n_heads, N) for a transformer. So the recorder
treats every model the same way (no hidden state, no hooks).

- ``reduced``: the paper's one-layer softmax attention,
      y_hat = sum_i y_i softmax_i(x_i^T Q x_q),
  with a trainable key-query matrix Q in R^{d x d}, Q^(0) = 0 by default.
- ``factored``: separate W_Q, W_K (maps R^d -> R^{d_k}, stored as (d_k, d) matrices like
  nn.Linear weights), logits (W_Q x_q)^T (W_K x_i) / sqrt(d_k), labels aggregated as in the
  reduced model. Its merged matrix is Q_eff = W_K^T W_Q / sqrt(d_k) (so x_i^T Q_eff x_q are
  the logits).
- ``linear_attention``: one-layer linear self-attention in the standard in-context regression
  construction, y_hat = sum_i y_i x_i^T Gamma x_q / n over the n context tokens, with a
  trainable Gamma in R^{d x d} (Gamma^(0) = 0 by default: y_hat is linear in Gamma, so zero is
  not a stationary point). Its "attention" is the weight x_i^T Gamma x_q / n of each label,
  not a softmax: it need not be positive or sum to 1. Gamma is the merged key-query matrix (the
  value is the label), as Q is for ``reduced``.
- ``linear_attention_factored``: the same prediction with Gamma = W_K^T W_Q / sqrt(d_k) from separate
  W_Q, W_K (d_k x d, random init: zero is a stationary point), as ``factored`` is to ``reduced``.
- ``transformer``: see transformer.py.

Single-head models say whether their weights are a softmax (``linear = False``) or linear in the
logits (``linear = True``); ``effective_Q`` is their merged key-query matrix (Q, Q_eff or Gamma).
"""

from __future__ import annotations

import torch
from torch import nn

from .transformer import ICLTransformer


def _label_attention(logits: torch.Tensor, y_ctx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    attn = torch.softmax(logits, dim=-1)  # stable: softmax subtracts the max
    return (attn * y_ctx).sum(-1), attn


def _square_init(d: int, init: str, init_scale: float, gen: torch.Generator | None, dtype: torch.dtype,
                 device: torch.device | str) -> torch.Tensor:
    """A d x d starting matrix: zero, or init_scale * N(0, 1/d) entries drawn from ``gen``."""
    if init == "random":
        return init_scale * torch.randn(d, d, generator=gen, dtype=dtype, device=device) / d**0.5
    return torch.zeros(d, d, dtype=dtype, device=device)


def _bilinear(x_ctx: torch.Tensor, M: torch.Tensor, x_q: torch.Tensor) -> torch.Tensor:  # noqa: N803
    """x_i^T M x_q for every context token: (B, N). M x_q first, so the cost is B d^2 + B N d, not B N d^2."""
    mx = x_q @ M.T  # (B, d): M x_q
    return torch.bmm(x_ctx, mx.unsqueeze(-1)).squeeze(-1)


class ReducedAttention(nn.Module):
    linear = False  # softmax weights

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
        self.Q = nn.Parameter(_square_init(d, init, init_scale, gen, dtype, device))  # Q, the merged key-query matrix

    def forward(
        self, x_ctx: torch.Tensor, y_ctx: torch.Tensor, x_q: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x_ctx (B, N, d), y_ctx (B, N), x_q (B, d) -> (y_hat (B,), attention (B, N))."""
        return _label_attention(_bilinear(x_ctx, self.Q, x_q), y_ctx)  # logits x_i^T Q x_q

    def effective_Q(self) -> torch.Tensor:
        """The d x d matrix with logits x_i^T Q x_q."""
        return self.Q


class FactoredAttention(nn.Module):
    """Separate query and key maps W_Q, W_K: R^d -> R^{d_k}; the values are the labels."""

    linear = False

    def __init__(
        self,
        d: int,
        d_k: int | None = None,
        init_scale: float = 0.01,
        gen: torch.Generator | None = None,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str = "cpu",
    ) -> None:
        super().__init__()
        self.d_k = d_k or d
        shape = (self.d_k, d)
        # small random init (W_Q = W_K = 0 is a stationary point); entries N(0, init_scale^2)
        self.W_Q = nn.Parameter(init_scale * torch.randn(shape, generator=gen, dtype=dtype, device=device))
        self.W_K = nn.Parameter(init_scale * torch.randn(shape, generator=gen, dtype=dtype, device=device))

    def forward(
        self, x_ctx: torch.Tensor, y_ctx: torch.Tensor, x_q: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x_ctx (B, N, d), y_ctx (B, N), x_q (B, d) -> (y_hat (B,), attention (B, N))."""
        q = x_q @ self.W_Q.T  # W_Q x_q, (B, d_k)
        k = x_ctx @ self.W_K.T  # W_K x_i, (B, N, d_k)
        return self.weights_to_output(torch.einsum("bnk,bk->bn", k, q) / self.d_k**0.5, y_ctx)

    def weights_to_output(self, logits: torch.Tensor, y_ctx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return _label_attention(logits, y_ctx)

    def effective_Q(self) -> torch.Tensor:
        """Q_eff = W_K^T W_Q / sqrt(d_k): x_i^T Q_eff x_q = (W_Q x_q)^T (W_K x_i) / sqrt(d_k)."""
        return self.W_K.T @ self.W_Q / self.d_k**0.5


class FactoredLinearAttention(FactoredAttention):
    """Linear attention with separate W_Q, W_K: y_hat = sum_i y_i (W_Q x_q)^T (W_K x_i) / (sqrt(d_k) n),
    Gamma_eff = W_K^T W_Q / sqrt(d_k)."""

    linear = True

    def weights_to_output(self, logits: torch.Tensor, y_ctx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        weights = logits / logits.shape[-1]  # x_i^T Gamma_eff x_q / n
        return (weights * y_ctx).sum(-1), weights


def factored_size_checks(d_k: int, d: int, points: int, batches: dict[str, int]) -> list[tuple[str, str, int]]:
    """(field, what, elements) for a factored model (W_Q, W_K of shape (d_k, d)): its parameters with
    gradients and optimizer state (4 copies), and the keys of each batch size in ``batches`` (n x points x d_k,
    with their gradient and the scores' scratch: 3 copies). Q_eff = W_K^T W_Q is d x d, checked with Q."""
    checks = [("model.d_k", f"the factored model's W_Q and W_K ({2 * d_k * d:.3g} parameters: d_k={d_k}, d={d})",
               8 * d_k * d)]
    for field, n in batches.items():
        checks.append(("model.d_k", f"the factored model's keys ({field.split('.')[1]}={n}, N+1={points}, "
                                    f"d_k={d_k})", 3 * n * points * d_k))
    return checks


class LinearAttention(nn.Module):
    """y_hat = sum_i y_i x_i^T Gamma x_q / n: linear self-attention whose values are the labels."""

    linear = True

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
        self.Gamma = nn.Parameter(_square_init(d, init, init_scale, gen, dtype, device))  # Gamma, trainable d x d

    def forward(
        self, x_ctx: torch.Tensor, y_ctx: torch.Tensor, x_q: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x_ctx (B, n, d), y_ctx (B, n), x_q (B, d) -> (y_hat (B,), weights x_i^T Gamma x_q / n (B, n))."""
        weights = _bilinear(x_ctx, self.Gamma, x_q) / x_ctx.shape[1]  # x_i^T Gamma x_q / n
        return (weights * y_ctx).sum(-1), weights

    def effective_Q(self) -> torch.Tensor:
        """Gamma, the merged key-query matrix: the weights are x_i^T Gamma x_q / n."""
        return self.Gamma


def make_model(cfg, d: int, gen: torch.Generator, dtype: torch.dtype, device) -> nn.Module:
    """The model a ModelConfig describes; every random init draws from ``gen``."""
    if cfg.kind == "reduced":
        init = "zero" if cfg.init == "auto" else cfg.init  # Q^(0) = 0 unless asked otherwise
        return ReducedAttention(d, init, cfg.init_scale, gen, dtype, device)
    if cfg.kind == "factored":
        return FactoredAttention(d, getattr(cfg, "d_k", None), cfg.init_scale, gen, dtype, device)
    if cfg.kind == "linear_attention":
        init = "zero" if cfg.init == "auto" else cfg.init  # Gamma^(0) = 0 unless asked otherwise
        return LinearAttention(d, init, cfg.init_scale, gen, dtype, device)
    if cfg.kind == "linear_attention_factored":
        return FactoredLinearAttention(d, getattr(cfg, "d_k", None), cfg.init_scale, gen, dtype, device)
    if cfg.kind == "transformer":
        return ICLTransformer(
            d, width=cfg.width, n_layers=cfg.n_layers, n_heads=cfg.n_heads, mlp=cfg.mlp,
            layernorm=cfg.layernorm, gen=gen, dtype=dtype, device=device,
        )
    raise ValueError(f"unknown model kind {cfg.kind!r}")


def effective_Q(model: nn.Module) -> torch.Tensor | None:
    """The merged key-query matrix of a single-head model (Q, Q_eff or Gamma), or None (transformer)."""
    fn = getattr(model, "effective_Q", None)
    return fn() if fn is not None else None


def is_linear(model: nn.Module) -> bool:
    """Whether the model's weights are linear in its logits (linear attention) rather than a softmax."""
    return bool(getattr(model, "linear", False))
