"""Huang, Cheng, Liang (ICML 2024), *In-Context Convergence of Transformers*, the paper's predecessor
(linear functions, orthonormal features): claims H1, H2, H3."""

from __future__ import annotations

from ...experiments.registry import Paper, register_paper

PAPER = register_paper(Paper(
    id="huang2024",
    title="In-Context Convergence of Transformers",
    authors="Y. Huang, Y. Cheng, Y. Liang", year=2024, venue="ICML 2024", arxiv="2310.05249",
    reachable="its abstract and its reviews (four training phases for under-represented features, one for dominant "
              "ones; a K^2 dependence of the bound); the exact definitions of the phases and the bound of the full "
              "text were not reachable, so H2's phases and H3's reading of the K dependence are this project's "
              "(docs/CLAIMS_METHOD.md).",
    claims=("H1", "H2", "H3"),
))

from . import k_dependence, phases  # noqa: E402, F401  (registration)
