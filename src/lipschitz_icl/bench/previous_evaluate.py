"""The baselines' formulas as ``evaluate`` used them before, kept callable to measure the change
against: pairwise distances by broadcasting (a (B, N, N, d) array), computed by each baseline
itself, the GP's inverse by ``cholesky_solve`` against an identity, chunks of 2^22 / n^2 prompts."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from unittest import mock

import torch

from .. import baselines, evaluate


def pairwise_sq_by_broadcasting(x_ctx: torch.Tensor) -> torch.Tensor:
    """||x_i - x_j||^2, (B, N, N), through a (B, N, N, d) array of differences."""
    return (x_ctx.unsqueeze(2) - x_ctx.unsqueeze(1)).square().sum(-1)


def spd_inverse_by_solve(mat: torch.Tensor) -> torch.Tensor:
    """(K + s^2 I)^{-1} by solving against the identity with the Cholesky factor."""
    eye = torch.eye(mat.shape[-1], dtype=mat.dtype, device=mat.device).expand_as(mat)
    return torch.cholesky_solve(eye, torch.linalg.cholesky(mat))


def chunk_prompts_by_n_squared(n: int, d: int) -> int:
    """Prompts per chunk: 2^22 / n^2, whatever d."""
    return max(1, evaluate.CHUNK_ELEMENTS // (n * n))


def no_shared_distances(x_ctx: torch.Tensor) -> None:
    """Each baseline computed the distances it needs itself (three times per chunk)."""
    return None


@contextlib.contextmanager
def previous_formulas() -> Iterator[None]:
    """Within the block, ``evaluate_run`` computes as it did before (same numbers up to rounding)."""
    with (
        mock.patch.object(baselines, "pairwise_sq_dists", pairwise_sq_by_broadcasting),
        mock.patch.object(baselines, "_spd_inverse", spd_inverse_by_solve),
        mock.patch.object(evaluate, "chunk_prompts", chunk_prompts_by_n_squared),
        mock.patch.object(evaluate, "context_distances", no_shared_distances),
    ):
        yield
