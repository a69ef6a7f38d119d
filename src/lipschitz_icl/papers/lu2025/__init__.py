"""Lu, Letey, Zavatone-Veth, Maiti, Pehlevan (PNAS 2025), *Asymptotic theory of in-context learning by linear
attention*: claims LU1-LU2 on the reduced linear attention yh = x_q^T Gamma h fit by ridge regression on n = tau d^2
prompts from a pool of k = kappa d tasks (``model``), against the paper's asymptotic e_ICL (``theory``, from the
authors' code) and the authors' saved finite-d simulations (``saved``)."""

from __future__ import annotations

from ...experiments.registry import Paper, register_paper

PAPER = register_paper(Paper(
    id="lu2025",
    title="Asymptotic theory of in-context learning by linear attention",
    authors="Y. M. Lu, M. Letey, J. A. Zavatone-Veth, A. Maiti, C. Pehlevan", year=2025, venue="PNAS 122(28)",
    arxiv="2405.11751",
    reachable="its abstract and its public code (mletey/incontext-cleanup @ c690222: the model and its scalings, "
              "the ridge fit, the exact finite-d error, the asymptotic formulas in theory_runs/common.py, and saved "
              "finite-d simulations). The typeset paper was not reachable: LU1-LU2 are this project's statements of "
              "its main results, and the formulas are the authors' code, reimplemented.",
    claims=("LU1", "LU2"),
))

from . import controls, suite  # noqa: E402, F401  (registration)
