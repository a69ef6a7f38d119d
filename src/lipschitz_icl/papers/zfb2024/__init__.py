"""Zhang, Frei, Bartlett (JMLR 2024), *Trained Transformers Learn Linear Models In-Context*: claims ZF1-ZF3,
tested on one linear self-attention layer (the merged form and the full residual-stream form) over Gaussian
in-context linear regression, with the exact population engine and sampled prompts (``lipschitz_icl.linattn``)."""

from __future__ import annotations

from ...experiments.registry import Paper, register_paper

PAPER = register_paper(Paper(
    id="zfb2024",
    title="Trained Transformers Learn Linear Models In-Context",
    authors="R. Zhang, S. Frei, P. L. Bartlett", year=2024, venue="JMLR 25(49)", arxiv="2306.09927",
    reachable="its abstract and section titles (convergence of gradient flow to a global minimum, prediction error "
              "at the minimum, robustness to task and query shifts but not covariate shifts); the model, its "
              "initialisation and the limit point from recollection and the public code of a companion paper; the "
              "closed forms re-derived from the model (exact Gaussian moments). Theorem numbers, constants such as "
              "the bound on sigma, and the paper's figures were not reachable.",
    claims=("ZF1", "ZF2", "ZF3"),
))

from . import controls, suite  # noqa: E402, F401  (registration)
