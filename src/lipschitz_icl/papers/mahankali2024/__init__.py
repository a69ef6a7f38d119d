"""Mahankali, Hashimoto, Ma (ICLR 2024), *One step of gradient descent is provably the optimal in-context learner
with one layer of linear self-attention*: claim MH1."""

from __future__ import annotations

from ...experiments.registry import Paper, register_paper

PAPER = register_paper(Paper(
    id="mahankali2024",
    title="One step of gradient descent is provably the optimal in-context learner with one layer of linear "
          "self-attention",
    authors="A. Mahankali, T. Hashimoto, T. Ma", year=2024, venue="ICLR 2024", arxiv="2307.03576",
    reachable="its abstract and the one-layer optimum's closed form (re-derived: Gamma* = ((1 + 1/N) Lambda + "
              "tr(Lambda)/N I)^-1); the full text's theorem numbers and constants were not reachable. MH1 is this "
              "project's statement of its main result.",
    claims=("MH1",),
))

from . import controls, one_step  # noqa: E402, F401  (registration)
