"""Li, Duan, Liang (2025), *Provable In-Context Learning of Nonlinear Regression with Transformers*:
claims P1-P9, with P4 read four ways (P4a-P4d, this project's readings of the threshold) and P9 the reviewers'
counterexample (a degenerate class, delta = 0)."""

from __future__ import annotations

from ...experiments.registry import Paper, register_paper

PAPER = register_paper(Paper(
    id="li2025",
    title="Provable In-Context Learning of Nonlinear Regression with Transformers",
    authors="H. Li, L. Duan, Y. Liang", year=2025, venue="arXiv preprint", arxiv="2507.20443",
    reachable="its abstract, its reviews and its predecessor; the full text was not at hand when the claims were "
              "written down. P4a-P4d are this project's readings of P4, the ones under which a threshold can exist "
              "at all (every class is f = L g, so under a relative eps gradient descent sees L only through eta L^2).",
    claims=("P1", "P2", "P3", "P4", "P4a", "P4b", "P4c", "P4d", "P5", "P6", "P7", "P8", "P9"),
))

from . import (  # noqa: E402, F401  (registration)
    beyond,
    degenerate,
    oscillations,
    scaling,
    scaling_controls,
    step_size,
    threshold,
    threshold_controls,
    two_phases,
)
