"""The companion write-up's experiment (docs/CLAIMS.md, B5), implemented as described with its
evident bugs fixed.

Width 128, 4 heads of size 32, one attention layer: W_Q, W_K, W_V map 128 -> 4 x 32 without
bias, W_O maps the concatenated heads 128 -> 1 with bias; logits scaled by 1/sqrt(32). One
prompt per L: 5 "positive" tokens around e_1 with Gaussian spread 0.1 L per coordinate, 10
"negative" tokens around the origin with spread 0.1, and a query drawn like the positives;
every token's target is its Euclidean norm. The loss is the squared error of the query's
output alone. Adam, learning rate 1e-3, 500 steps, on that single prompt. Note that "L" here
scales the spread of the positives: it is not a Lipschitz constant of the target.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ...optim import PlainAdam

WIDTH, HEADS, HEAD_DIM = 128, 4, 32
N_POS, N_NEG = 5, 10

# The published code does not run; these are the only changes made to it.
FIXES = [
    "The attention logits einsum was not a valid contraction; it is now query . key per head "
    "('bhqe,bhke->bhqk'), scaled by 1/sqrt(32).",
    "The context einsum was wrong likewise; it is now the attention-weighted sum of values per head "
    "('bhqk,bhke->bhqe').",
    "The optimizer was handed the modules instead of their parameters; it now gets model.parameters().",
    "The recorded attention indexed a single head; it is now averaged over the 4 heads.",
]


class BlogAttention(nn.Module):
    def __init__(self, gen: torch.Generator) -> None:
        super().__init__()
        self.W_Q = nn.Linear(WIDTH, HEADS * HEAD_DIM, bias=False)
        self.W_K = nn.Linear(WIDTH, HEADS * HEAD_DIM, bias=False)
        self.W_V = nn.Linear(WIDTH, HEADS * HEAD_DIM, bias=False)
        self.W_O = nn.Linear(HEADS * HEAD_DIM, 1, bias=True)
        with torch.no_grad():  # PyTorch's default init, drawn from our generator
            for lin in (self.W_Q, self.W_K, self.W_V, self.W_O):
                bound = 1.0 / lin.in_features**0.5
                lin.weight.uniform_(-bound, bound, generator=gen)
                if lin.bias is not None:
                    lin.bias.uniform_(-bound, bound, generator=gen)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (T, 128) -> (outputs (T,), attention (HEADS, T, T))."""
        T = x.shape[0]

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(T, HEADS, HEAD_DIM).transpose(0, 1)  # (h, T, e)

        q, k, v = heads(self.W_Q(x)), heads(self.W_K(x)), heads(self.W_V(x))
        logits = torch.einsum("hqe,hke->hqk", q, k) / HEAD_DIM**0.5
        attn = torch.softmax(logits, dim=-1)
        ctx = torch.einsum("hqk,hke->hqe", attn, v).transpose(0, 1).reshape(T, HEADS * HEAD_DIM)
        return self.W_O(ctx).squeeze(-1), attn


def make_prompt(L: float, gen: torch.Generator) -> torch.Tensor:
    """(16, 128): 5 positives, 10 negatives, then the query."""
    e1 = torch.zeros(WIDTH)
    e1[0] = 1.0
    pos = e1 + 0.1 * L * torch.randn(N_POS, WIDTH, generator=gen)
    neg = 0.1 * torch.randn(N_NEG, WIDTH, generator=gen)
    query = e1 + 0.1 * L * torch.randn(1, WIDTH, generator=gen)
    return torch.cat([pos, neg, query])


@dataclass
class BlogRun:
    L: float
    seed: int
    attention: np.ndarray  # (steps,) query's attention on the positives, mean over heads
    loss: np.ndarray  # (steps,)
    heldout_loss: float = float("nan")  # the trained model's query loss, mean over fresh prompts of the same L
    heldout_attention: float = float("nan")  # its attention on the positives there, mean over prompts and heads


HELDOUT_PROMPTS = 64


def heldout(model: BlogAttention, L: float, seed: int, prompts: int = HELDOUT_PROMPTS) -> tuple[float, float]:
    """(loss, attention on the positives) of a trained model, mean over ``prompts`` fresh prompts of the
    same L drawn from their own generator (never the training prompt)."""
    gen = torch.Generator().manual_seed(10**6 + seed * 1000 + int(round(L * 100)))
    losses, attns = [], []
    with torch.no_grad():
        for _ in range(prompts):
            x = make_prompt(L, gen)
            out, attn = model(x)
            losses.append(float((out[-1] - x[-1].norm()).square()))
            attns.append(float(attn[:, -1, :N_POS].sum(-1).mean()))
    return float(np.mean(losses)), float(np.mean(attns))


def train_blog(L: float, seed: int, steps: int = 500, lr: float = 1e-3) -> BlogRun:
    gen = torch.Generator().manual_seed(seed * 1000 + int(round(L * 100)))
    model = BlogAttention(gen)
    x = make_prompt(L, gen)
    target = x.norm(dim=1)  # every token's target is its Euclidean norm
    opt = PlainAdam(model.parameters(), lr)  # torch.optim.Adam's numbers
    attn_hist, loss_hist = [], []
    for _ in range(steps):
        out, attn = model(x)
        loss = (out[-1] - target[-1]).square()  # the query's output alone
        attn_hist.append(float(attn.detach()[:, -1, :N_POS].sum(-1).mean()))  # on the 5 positives, head-averaged
        loss_hist.append(float(loss.detach()))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return BlogRun(L, seed, np.array(attn_hist), np.array(loss_hist), *heldout(model, L, seed))
