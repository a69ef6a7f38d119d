"""This project's open questions about the paper (R1-R8: the "beyond" list, each turned into a claim with
a criterion) and the comparison of the trained model with in-context baselines (C1, no verdict)."""

from __future__ import annotations

from ...experiments.registry import Paper, register_paper

PAPER = register_paper(Paper(
    id="questions",
    title="Open questions about the paper, and comparisons with baselines",
    authors="lipschitz-icl", venue="this project",
    reachable="this project's own statements: questions the paper does not answer, turned into claims here.",
    claims=("R1", "R2", "R3a", "R3b", "R3c", "R3d", "R4", "R5", "R6", "R7", "R8", "C1"),
))

from . import (  # noqa: E402, F401  (registration)
    continuous,
    eps_axis,
    factored,
    finite_sample,
    imbalanced,
    label_noise,
    large_lipschitz,
    linear_norm,
    regimes_visible,
    token_noise,
    transformer,
    vs_baselines,
)
