"""Huang, Cheng, Liang (ICML 2024), *In-Context Convergence of Transformers*, the paper's predecessor
(linear functions, orthonormal features): claims H1, H2."""

from __future__ import annotations

from ...experiments.registry import Paper, register_paper

PAPER = register_paper(Paper(
    id="huang2024",
    title="In-Context Convergence of Transformers",
    authors="Y. Huang, Y. Cheng, Y. Liang", year=2024, venue="ICML 2024", arxiv="2310.05249",
    reachable="its abstract; the exact definitions of the phases of the full text were not reachable, so H2's "
              "phases are this project's reading (docs/CLAIMS_METHOD.md).",
    claims=("H1", "H2"),
))

from . import phases  # noqa: E402, F401  (registration)
