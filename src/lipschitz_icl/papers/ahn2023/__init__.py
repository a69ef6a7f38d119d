"""Ahn, Cheng, Daneshmand, Sra (NeurIPS 2023), *Transformers learn to implement preconditioned gradient descent
for in-context learning*: claims AH1 (the error falls with the number of layers; the trained preconditioners
commute with Lambda) and AH2 (the free multi-layer model reaches the preconditioned-GD form's error)."""

from __future__ import annotations

from ...experiments.registry import Paper, register_paper

PAPER = register_paper(Paper(
    id="ahn2023",
    title="Transformers learn to implement preconditioned gradient descent for in-context learning",
    authors="K. Ahn, X. Cheng, H. Daneshmand, S. Sra", year=2023, venue="NeurIPS 2023", arxiv="2306.00297",
    reachable="its abstract and the model definitions (Attn_{P,Q} with the mask, the GD correspondence P_l = e_y "
              "e_y^T, Q_l = -[[A_l, 0], [0, 0]]); the full text's constants were not reachable. AH1 and AH2 are this "
              "project's statements of its multi-layer results, with w ~ N(0, I) (the paper's multi-layer theorems "
              "take w ~ N(0, Sigma^-1)).",
    claims=("AH1", "AH2"),
))

from . import controls, layers  # noqa: E402, F401  (registration)
