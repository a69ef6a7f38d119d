"""Experiment sizes, one set for every suite: ``TINY`` (the test suite: every experiment end to end
in seconds, verdicts mostly inconclusive), ``QUICK`` (minutes on a laptop, verdicts may be
inconclusive) and ``FULL``. The context carries one; every experiment reads its fields."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sizes:
    # the paper, write-up and linear suites
    draws: int  # kernel engine count draws B (every suite)
    budget: int  # step budget per run
    log_every: int
    n_L: int  # values of L in the scaling sweep
    seeds: int
    eps_rel: float  # accuracy asked in the scaling sweeps, relative to the initial loss
    blog_seeds: int  # seeds of the write-up's experiment (B5)
    finite_M: tuple[int, ...]  # training-set sizes n (B2)
    tuned_L_factors: tuple[float, ...]  # values of L / L* at tuned step sizes (P6, P7)
    # the extensions suite
    ext_kernel_steps: int  # step budget of its kernel-engine runs
    ext_log_every: int
    sampled_steps: int  # step budget of sampled-engine runs
    batch: int  # prompts per step (sampled engine)
    test: int  # unseen test prompts per run
    n_grid: int  # values per sweep (L, sigma, tau, M)
    kernel_samples: int  # Monte-Carlo functions for Sigma
    continuous_steps: int  # Adam steps per L (R6)
    transformer_steps: int  # Adam steps of the 2-layer 4-head transformer (R7)
    curriculum_steps: int  # step budget of each curriculum run (B7)
    linear_eps_rel: float  # accuracy asked in the linear case, relative to the initial loss (R8)
    blog_steps: int = 500  # the write-up's experiment: 500 Adam steps
    # the threshold readings (P4a-P4d, B3, R5): settings, bisections, budgets
    # Delta of the threshold's settings under each reading of the one Delta protocol (experiments/delta.py);
    # sqrt 2 is the orthonormal base
    thr_deltas: tuple[float, ...] = (1.4142135623730951, 0.8, 0.45)
    thr_L_factors: tuple[float, ...] = (0.5, 1.0, 2.0)  # L / L* of the relative-eps runs (P4a)
    thr_eps_rel: float = 1e-2  # relative eps of the P4a and P4d runs
    thr_steps: int = 10000  # step budget of a threshold run
    thr_log_every: int = 20  # logging of the P4a runs (T_eps comes from the stopping rule, exact)
    thr_bisect: int = 10  # bisection steps on L for the optimum's crossing (P4c)
    thr_stab_bisect: int = 6  # bisection steps on L for the fixed-step change (P4d)
    thr_variations: bool = True  # P4c's tau, N and K variations
    # the Collins et al. suite (CL1-CL6): Adam steps per run, values per axis (L, tau, N), seeds per setting
    collins_steps: int = 300
    collins_grid: int = 5
    collins_seeds: int = 5
    predecessor_K: tuple[int, ...] = (2, 4, 8, 16, 32)  # values of K of the convergence time's K dependence (H3)
    level: str = "full"  # tiny | quick | full: the linear-attention suites pick their own grids by it


QUICK = Sizes(draws=32, budget=3000, log_every=5, n_L=8, seeds=2, eps_rel=3e-2, blog_seeds=2,
              finite_M=(16, 64, 256), tuned_L_factors=(0.25, 0.5, 0.7, 1.5, 2.0, 4.0),
              ext_kernel_steps=1000, ext_log_every=10, sampled_steps=300, batch=128, test=256, n_grid=3,
              kernel_samples=1024, continuous_steps=300, transformer_steps=1500, curriculum_steps=80000,
              linear_eps_rel=1e-2, level="quick")
FULL = Sizes(draws=128, budget=40000, log_every=10, n_L=10, seeds=3, eps_rel=1e-3, blog_seeds=5,
             finite_M=(16, 32, 64, 128, 256, 1024), tuned_L_factors=(0.25, 0.5, 0.7, 1.5, 2.0, 4.0),
             ext_kernel_steps=20000, ext_log_every=20, sampled_steps=3000, batch=512, test=2048, n_grid=5,
             kernel_samples=4096, continuous_steps=3000, transformer_steps=4000, curriculum_steps=80000,
             linear_eps_rel=1e-3,
             thr_deltas=(1.4142135623730951, 1.0, 0.7, 0.45), thr_L_factors=(0.5, 0.707, 1.0, 1.414, 2.0),
             thr_eps_rel=1e-3, thr_steps=40000, thr_bisect=20,
             thr_stab_bisect=10, collins_steps=2000, collins_grid=5, collins_seeds=8,
             predecessor_K=(2, 3, 4, 6, 8, 12, 16, 24, 32, 48))
TINY = Sizes(draws=8, budget=150, log_every=5, n_L=5, seeds=1, eps_rel=0.2, blog_seeds=1, finite_M=(8, 16),
             tuned_L_factors=(0.25, 0.5, 2.0, 4.0),
             ext_kernel_steps=120, ext_log_every=5, sampled_steps=40, batch=32, test=32, n_grid=2,
             kernel_samples=256, continuous_steps=30, transformer_steps=30, curriculum_steps=200,
             linear_eps_rel=1e-2, blog_steps=30,
             thr_deltas=(1.4142135623730951, 0.7), thr_L_factors=(0.5, 2.0), thr_eps_rel=0.2, thr_steps=300,
             thr_bisect=3, thr_stab_bisect=1, thr_variations=False, collins_steps=20, collins_grid=2,
             collins_seeds=2, predecessor_K=(2, 4, 8), level="tiny")


def sizes(quick: bool) -> Sizes:
    return QUICK if quick else FULL
