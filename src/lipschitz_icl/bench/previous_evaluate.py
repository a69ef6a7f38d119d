"""``evaluate`` as it computed before the changes for evaluate at scale, kept callable to measure
them against: the baselines of ``previous_baselines`` (a frozen copy: pairwise distances through a
(B, N, N, d) array computed by each method itself, the GP's inverse by ``cholesky_solve`` against an
identity, a second Cholesky for the GP's prediction, least squares through ``pinv``) and chunks of
2^22 / n^2 prompts. Methods added since (``Bayes (Sigma)``) run in both variants."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from unittest import mock

import torch

from .. import evaluate
from . import previous_baselines


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
        mock.patch.object(evaluate, "BASELINES", previous_baselines.BASELINES),
        mock.patch.object(evaluate, "gp_regression", previous_baselines.gp_regression),
        mock.patch.object(evaluate, "USES_DISTANCES", frozenset()),
        mock.patch.object(evaluate, "context_distances", no_shared_distances),
        mock.patch.object(evaluate, "chunk_prompts", chunk_prompts_by_n_squared),
    ):
        yield
