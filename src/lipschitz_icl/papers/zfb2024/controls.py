"""Controls of ZF1-ZF3: each claim's own rule on a null (the claim false) and a planted case (the claim true).
ZF1's and ZF2's nulls are real runs (gradient descent from the exact zero init, which stays at the saddle Gamma = 0;
a rank-one head settling at the best rank-one matrix; sampled errors read against a formula that ignores M);
ZF3's null is a real predictor that adapts to the context covariance. All are deterministic and cheap."""

from __future__ import annotations

import functools

import pandas as pd
import torch

from ...experiments.controls import Case, Controls, case, controls, controls_from
from ...linattn import Form, init_params, optimal_gamma, single_error
from ...rng import make_generator
from .common import ANISO3, DTYPE, ISO3, balanced_at, gradient_flow
from .convergence import full_rule, zf1_rule
from .error import sampled_error, zf2_rule
from .shifts import adaptive_curve, curves, zf3_rule

SEEDS = list(range(5))
GOOD_FULL = ([0.02, 0.03, 0.025, 0.015, 0.02], [0.01, 0.012, 0.008, 0.011, 0.009])  # (distances, off blocks)


@functools.lru_cache(maxsize=4)
def zero_runs(budget: int = 100) -> tuple:
    """Gradient descent from the exact zero init: the gradient vanishes there, so it stays at Gamma = 0."""
    return tuple(gradient_flow(s, seed, budget, init={"v": torch.zeros(1, dtype=DTYPE),
                                                      "W": torch.zeros(1, s.dim, s.dim, dtype=DTYPE)})
                 for s in (ISO3, ANISO3) for seed in SEEDS)


@functools.lru_cache(maxsize=4)
def rank_one_runs(budget: int = 400) -> tuple:
    """A separate head of rank one from a small random init: it settles at the best rank-one Gamma (the top
    eigen-direction of the anisotropic Lambda), a stationary point that is not Gamma*."""
    form = Form("separate", heads=1, rank=1)
    return tuple(gradient_flow(ANISO3, seed, budget, lr_factor=8.0, form=form,
                               init=init_params(form, ANISO3.dim, 0.3, make_generator(seed, "zfb:rank-one")))
                 for seed in SEEDS)


@functools.lru_cache(maxsize=1)
def planted_runs() -> tuple:
    """Runs started at Gamma* (balanced): they stay there."""
    return tuple(gradient_flow(s, seed, 50, init=balanced_at(optimal_gamma(s.task()))) for s in (ISO3, ANISO3)
                 for seed in SEEDS)


def _zf1_case(runs, full: tuple[list[float], list[float]], how: str) -> Case:
    sup, ref, stat = zf1_rule(runs)
    f_sup, f_ref, f_stat = full_rule(*full)
    return case(sup and f_sup, ref or f_ref, {**stat, "full_form": f_stat}, how)


@controls("ZF1")
def zf1_controls() -> Controls:
    """ZF1's rule on real control runs (zero init, a rank-one head, Gamma* itself) and synthetic full-form seeds."""
    cases = {
        "null": ((list(zero_runs()), GOOD_FULL), "GD from the exact zero init (a real run): the gradient is zero "
                 "there and it stays at the saddle Gamma = 0"),
        "null_rank_one": ((list(rank_one_runs()), GOOD_FULL), "a rank-one separate head (a real run): it settles at "
                          "the best rank-one Gamma, another stationary point"),
        "null_full": ((list(planted_runs()), ([0.02] * 5, [0.45, 0.5, 0.4, 0.6, 0.55])), "Gamma* reached on the "
                      "exact engine but the full form's zero-held blocks grown to 0.4-0.6 of ||W^KQ_11||"),
        "planted": ((list(planted_runs()), GOOD_FULL), "runs started at Gamma* (they stay there) and full-form seeds "
                    "1.5-3% from Gamma* with off blocks near 1%"),
    }
    return controls_from(cases, lambda data, how: _zf1_case(*data, how))


@functools.lru_cache(maxsize=1)
def _sampled_at_4n() -> tuple[float, ...]:
    """Sampled errors of Gamma* (anisotropic setting) at M = 4N, one per seed (4000 fresh prompts each)."""
    task = ANISO3.task()
    test = task.shifted(n_context=4 * ANISO3.n_context)
    return tuple(sampled_error(optimal_gamma(task), test, 4000, seed=500 + s) for s in SEEDS)


def _zf2_table(m_factor_formula: float) -> pd.DataFrame:
    """Sampled errors of Gamma* at M = 4N against the closed form at length m_factor_formula x N."""
    task = ANISO3.task()
    n = ANISO3.n_context
    closed = single_error(optimal_gamma(task), task.shifted(n_context=int(m_factor_formula * n)))
    rows = [{"setting": ANISO3.name, "M": 4 * n, "seed": s, "gap": e / closed - 1}
            for s, e in zip(SEEDS, _sampled_at_4n(), strict=True)]
    return pd.DataFrame(rows)


@controls("ZF2")
def zf2_controls() -> Controls:
    """ZF2's rule on sampled errors at M = 4N read against the right closed form and against one that ignores M."""
    def read(factor: float, how: str) -> Case:
        sup, ref, stat = zf2_rule(_zf2_table(factor))
        return case(sup, ref, stat, how)

    return controls_from({
        "null": (1.0, "sampled errors at M = 4N read against the closed form at M = N (a formula in which the test "
                 "length does not enter): the claimed M-dependence is false for it"),
        "planted": (4.0, "the same sampled errors against the closed form at M = 4N"),
    }, read)


CONTROL_MS = [2 ** k for k in range(3, 10)]


def _zf3_case(kind: str, how: str) -> Case:
    measured = curves(ISO3, CONTROL_MS)
    if kind == "adaptive":
        named = {n: v for n, v in measured.items() if v[0] == "robust"}
        named["adaptive, Lambda' = 2 Lambda"] = ("covariate", adaptive_curve(ISO3, CONTROL_MS, prompts=1000))
    elif kind == "query_flat":
        named = dict(measured)
        named["query: Lambda_q != Lambda"] = ("robust", [0.3 + 2.0 / m for m in CONTROL_MS])
    else:
        named = measured
    sup, ref, stat = zf3_rule(CONTROL_MS, named)
    return case(sup, ref, stat, how)


@controls("ZF3")
def zf3_controls() -> Controls:
    """ZF3's rule on Gamma*'s exact curves, with the covariate curve replaced by an adaptive predictor's (null)."""
    return controls_from({
        "null": ("adaptive", "the covariate-shift curve of a predictor that adapts to the context covariance (the "
                 "plug-in ridge, sampled): its error vanishes as M grows"),
        "null_query": ("query_flat", "a query-shift curve levelling at 0.3 + 2/M: not robust to the query shift"),
        "planted": ("measured", "Gamma*'s exact curves under the shifts (isotropic Lambda, N = M = 8..512)"),
    }, _zf3_case)
