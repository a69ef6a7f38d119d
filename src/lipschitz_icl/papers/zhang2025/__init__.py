"""Zhang, Singh, Latham, Saxe (ICML 2025), *Training Dynamics of In-Context Learning in Linear Attention*:
claims ZS1-ZS3 on the exact population engine (lipschitz_icl.linattn), in the paper's setting: D = 4, N = 31
context pairs, tr Lambda = 1, w ~ N(0, I), no label noise, the mean squared error without 1/2."""

from __future__ import annotations

from ...experiments.registry import Paper, register_paper

PAPER = register_paper(Paper(
    id="zhang2025",
    title="Training Dynamics of In-Context Learning in Linear Attention",
    authors="Y. Zhang, A. K. Singh, P. E. Latham, A. Saxe", year=2025, venue="ICML 2025", arxiv="2501.16265",
    reachable="its abstract and its public code (yedizhang/linattn-icl: the models, the data, the defaults, and the "
              "notebook's loss_at_saddle, the plateau values). The paper's typeset time-course formulas were not "
              "reachable: the drop-time laws tested here are this project's derivation for the same models "
              "(docs/LINEAR_ATTENTION.md).",
    claims=("ZS1", "ZS2", "ZS3"),
))

from . import controls, merged, separate  # noqa: E402, F401  (registration)
