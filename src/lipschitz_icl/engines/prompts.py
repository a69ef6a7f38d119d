"""Prompts: B prompts of N context tokens and a query, drawn from a run's generator (``draw_prompts``: its random
draws, ``draw_inputs``, then their labels, ``label``; runs stepped together draw their inputs each on its own
generator and share one evaluation of their functions: ``engines.sampled_batch``); and the attention a batch puts on
each feature."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..features import FeatureSet
from ..inputs import ContinuousInputs
from ..rng import normals
from ..tasks import Funcs, TaskClass, check_finite

DRAW_DTYPES = {"engine": None, "float32": torch.float32}  # prompt.draw_dtype -> the draws' dtype (None: engine.dtype)


@dataclass
class PromptBatch:
    ids: torch.Tensor  # (B, N + 1) feature ids; the last is the query's
    x: torch.Tensor  # (B, N + 1, d) tokens
    y: torch.Tensor  # (B, N + 1) labels y_i = f(x_i) + tau eps_i (the query's label is clean)

    @property
    def target(self) -> torch.Tensor:
        return self.y[:, -1]  # f(x_q)

    @property
    def x_ctx(self) -> torch.Tensor:
        return self.x[:, :-1]  # (B, N, d) context tokens

    @property
    def y_ctx(self) -> torch.Tensor:
        return self.y[:, :-1]  # (B, N) context labels

    @property
    def x_q(self) -> torch.Tensor:
        return self.x[:, -1]  # (B, d) the query


def draw_prompts(
    fs: FeatureSet | ContinuousInputs, task: TaskClass, N: int, B: int, tau: float, gen: torch.Generator,
    device: torch.device | str = "cpu", draw_dtype: torch.dtype | None = None,
) -> PromptBatch:
    """B prompts of N context tokens and a query from ``fs`` (features, or continuous inputs whose
    feature ids are all -1), a function of ``task`` per prompt, labels f(x_i) + tau eps_i.
    ``draw_dtype`` (prompt.draw_dtype; default: the tokens' dtype): the normals of the tokens and the label
    noise are drawn in it (rng.normals), the task draws its functions in it and evaluates them in it, on the
    tokens rounded to it; tokens (sphere tokens normalised in their own dtype) and labels come back in the
    tokens' dtype."""
    drawn = draw_inputs(fs, task, N, B, tau, gen, draw_dtype)
    y = label(task, drawn, draw_dtype)
    return PromptBatch(drawn.ids.to(device), drawn.x.to(device), y.to(device))


@dataclass
class Drawn:
    """One batch's random draws, in ``draw_prompts``' order on its generator: nothing evaluated yet."""

    ids: torch.Tensor  # (B, N + 1) feature ids
    x: torch.Tensor  # (B, N + 1, d) tokens, in the tokens' dtype
    funcs: Funcs  # the B functions, drawn in the draws' dtype
    noise: torch.Tensor | None  # (B, N) tau eps_i, in the labels' dtype; None when tau = 0


def draw_inputs(fs: FeatureSet | ContinuousInputs, task: TaskClass, N: int, B: int, tau: float, gen: torch.Generator,
                draw_dtype: torch.dtype | None = None) -> Drawn:
    """The draws of ``draw_prompts`` (ids, tokens, functions, label noise), in its order on ``gen``."""
    ids = fs.sample_ids((B, N + 1), gen)
    x = fs.tokens(ids, gen, draw_dtype)
    funcs = task.sample(B, gen, draw_dtype or x.dtype)  # drawn and evaluated in the draws' dtype
    noise = tau * normals((B, N), gen, x.dtype, draw_dtype) if tau > 0 else None
    return Drawn(ids, x, funcs, noise)


def label(task: TaskClass, drawn: Drawn, draw_dtype: torch.dtype | None = None) -> torch.Tensor:
    """The labels f(x_i) + tau eps_i of ``drawn``'s prompts (the query's clean), in the tokens' dtype."""
    y = check_finite(evaluate_labels(task, drawn.funcs, drawn.x, draw_dtype), task.label)
    return add_noise(y, drawn.noise)


def evaluate_labels(task: TaskClass, funcs: Funcs, x: torch.Tensor, draw_dtype: torch.dtype | None = None
                    ) -> torch.Tensor:
    """f(x_i) of each row's function at its tokens ``x`` (B, N + 1, d), evaluated in the draws' dtype, in the
    tokens' dtype, not yet checked: the rows may be several runs' draws put together (``sampled_batch``, one call,
    row by row, each run checked alone)."""
    return task.evaluate(funcs, x.to(draw_dtype or x.dtype)).to(x.dtype)


def add_noise(y: torch.Tensor, noise: torch.Tensor | None) -> torch.Tensor:
    """Labels ``y`` (B, N + 1) with the label noise tau eps_i (B, N) added to the context's (the query's stays
    clean); ``noise`` None (tau = 0): ``y``."""
    if noise is None:
        return y
    N = noise.shape[1]
    return torch.cat([y[:, :N] + noise, y[:, N:]], dim=1)


def attention_by_feature(ids: torch.Tensor, attn: torch.Tensor, K: int) -> torch.Tensor:
    """Average attention mass that queries of feature k put on context tokens of feature n.

    ids (B, N + 1); attn (B, N) -> (K, K), or (B, *heads, N) -> (*heads, K, K) for models that
    return one attention row per layer and head, e.g. (n_layers, n_heads, K, K).
    """
    ctx, q = ids[:, :-1], ids[:, -1]
    lead = attn.shape[1:-1]
    flat = attn.reshape(attn.shape[0], -1, attn.shape[-1])  # (B, H, N)
    mass = torch.zeros(flat.shape[0], flat.shape[1], K, dtype=attn.dtype, device=attn.device)
    mass.scatter_add_(2, ctx.unsqueeze(1).expand_as(flat), flat)  # (B, H, n)
    sums = torch.zeros(K, flat.shape[1], K, dtype=attn.dtype, device=attn.device).index_add_(0, q, mass)
    n_q = torch.bincount(q, minlength=K).to(attn.dtype).view(K, 1, 1)
    out = (sums / n_q).transpose(0, 1)  # (H, K, K); NaN for a query feature absent from the batch
    return out.reshape(*lead, K, K)
