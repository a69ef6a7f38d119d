"""Controls of ZS1-ZS3: each claim's own rule on synthetic loss curves read by the same staircase code, a null
(the claim false) and a planted case (the claim true). Five seeds; the seeds' jitter is a fixed draw."""

from __future__ import annotations

import numpy as np

from ...experiments.controls import Case, Controls, case, controls, controls_from
from ...experiments.staircase import sigmoid_steps, staircase
from ...linattn import plateau_losses
from .merged import read_curve, zs1_rule, zs2_rule
from .separate import zs3_rule
from .settings import N_CONTEXT, ramp

SEEDS = 5
T = np.linspace(0.0, 200.0, 4001)
BEST = 0.139  # an optimum like the white D = 4 one


def _jitter(seed: int) -> float:
    return float(np.random.default_rng(seed).uniform(0.9, 1.1))


ZS1_CASES = {
    "null": ([1.0, 0.6, BEST], "a two-step staircase through 0.6 (two drops): not one drop"),
    "null_smooth": ("exp", "an exponential fall from 1 to the optimum, no plateau: not abrupt"),
    "planted": ([1.0, BEST], "one logistic drop from 1 to the optimum at t = 56, width 2"),
}


def _zs1_read(levels, how: str) -> Case:
    runs = []
    for s in range(SEEDS):
        if levels == "exp":
            loss = BEST + (1 - BEST) * np.exp(-T / (10 * _jitter(s)))
        else:
            loss = sigmoid_steps(T, levels, [56 * _jitter(s) + 60 * k for k in range(len(levels) - 1)], 2.0)
        runs.append(read_curve(T, loss, BEST))
    sup, ref, stat = zs1_rule(runs)
    return case(sup, ref, stat, how)


@controls("ZS1")
def zs1_controls() -> Controls:
    return controls_from(ZS1_CASES, _zs1_read)


def _zs2_read(law, how: str) -> Case:
    x = np.log(1 / np.array([1e-2, 1e-3, 1e-4, 1e-5, 1e-6]))
    per_seed = {s: (x.tolist(), [law(v) + 3 * _jitter(s) for v in x]) for s in range(SEEDS)}
    sup, ref, stat = zs2_rule(per_seed, 4)
    return case(sup, ref, {"slope_over_theory": stat["slope_over_theory"], "spread": stat["local_slope_spread"]}, how)


ZS2_CASES = {
    "null": (lambda x: 0.02 * np.exp(x / 2), "a drop time growing as init^(-1/2) (a power of 1/init, not its log)"),
    "null_slope": (lambda x: 8.0 * x, "a drop time growing as 8 ln(1/init): twice the closed form's slope"),
    "planted": (lambda x: 4.0 * x, "t_drop = 4 ln(1/init) + a seed offset: the closed form at D = 4"),
}


@controls("ZS2")
def zs2_controls() -> Controls:
    return controls_from(ZS2_CASES, _zs2_read)


def _zs3_read(kind: str, how: str) -> Case:
    eigs = ramp(4)
    closed = plateau_losses(eigs, N_CONTEXT)
    if kind == "reversed":  # the smallest component first: other plateau values
        gains = eigs ** 2 / ((1 + 1 / N_CONTEXT) * eigs + 1 / N_CONTEXT)
        levels = 1 - np.concatenate([[0], np.cumsum(gains[::-1])])
        learned = [list(range(3, 3 - k, -1)) for k in range(1, 5)]
    elif kind == "one":
        levels, learned = np.array([1.0, closed[-1]]), [[0, 1, 2, 3]]
    else:
        levels, learned = closed, [list(range(k)) for k in range(1, 5)]
    runs = []
    for s in range(SEEDS):
        drops = [40 * _jitter(s) * (k + 1) for k in range(len(levels) - 1)]
        stairs = staircase(T, sigmoid_steps(T, list(levels), drops, 1.5))
        runs.append({"seed": s, "levels": stairs.levels, "learned": learned, "closed": closed.tolist(),
                     "censored": False})
    sup, ref, stat = zs3_rule(runs)
    return case(sup, ref, stat, how)


ZS3_CASES = {
    "null": ("one", "one drop from 1 to the optimum: every component at once, no saddles"),
    "null_reversed": ("reversed", "the smallest-eigenvalue component first: plateaus at other values, out of order"),
    "planted": ("planted", "a staircase through the closed-form plateaus, top component first, 5 jittered seeds"),
}


@controls("ZS3")
def zs3_controls() -> Controls:
    return controls_from(ZS3_CASES, _zs3_read)
