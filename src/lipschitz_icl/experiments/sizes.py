"""Experiment sizes: ``quick`` (minutes on a laptop, verdicts may be inconclusive) and full."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sizes:
    draws: int  # kernel engine count draws B
    budget: int  # step budget per run
    log_every: int
    n_L: int  # values of L in the scaling sweep
    seeds: int
    eps_rel: float  # accuracy asked in the scaling sweeps, relative to the initial loss
    blog_seeds: int
    finite_M: tuple[int, ...]  # training-set sizes (B2)
    blog_steps: int = 500  # the write-up's experiment: 500 Adam steps


QUICK = Sizes(draws=32, budget=3000, log_every=5, n_L=8, seeds=2, eps_rel=3e-2, blog_seeds=2,
              finite_M=(16, 64, 256))
FULL = Sizes(draws=128, budget=40000, log_every=10, n_L=10, seeds=3, eps_rel=1e-3, blog_seeds=5,
             finite_M=(16, 32, 64, 128, 256, 1024))


def sizes(quick: bool) -> Sizes:
    return QUICK if quick else FULL

# for the test suite: every experiment end to end in seconds (verdicts mostly inconclusive)
TINY = Sizes(draws=8, budget=150, log_every=5, n_L=5, seeds=1, eps_rel=0.2, blog_seeds=1, finite_M=(8, 16),
             blog_steps=30)
