"""Controls of P5 and B1 (scaling.py): each claim's own rule run on synthetic convergence times laid out as its
experiment lays them out: P5's Delta axis under the three Delta readings at their Delta values, its K axis at
K = 2..6 and its delta axis as CVs across classes; B1's L sweep from L*/4 to 10 L* over three seeds."""

from __future__ import annotations

import math

import numpy as np

from ...experiments.claims import verdict
from ...experiments.controls import Case, Controls, case, controls, controls_from
from ...experiments.delta import READINGS, combine
from ...experiments.measure import safe_fit
from ...experiments.sizes import QUICK
from .delta_axis import delta_cv_rule
from .scaling import FORCED_B1, KS, b1_rule, k_axis_rule, p5_rule
from .scaling_delta import P5_DELTAS, delta_slope_rule

K_LOG_K = [k * math.log(k / QUICK.eps_rel) for k in KS]  # the K axis's x at the quick size's eps


# ----------------------------------------------------------------------------- P5


def _T_of_Delta(exponent: float) -> dict[str, list[float]]:
    """T_eps = 1384 (Delta / sqrt 2)^exponent at each reading's Delta values (1384: the pair's base at quick)."""
    return {r: [1384.0 * (D / math.sqrt(2.0)) ** exponent for D in ds] for r, ds in P5_DELTAS.items()}


def _p5_data(Delta_exponent: float, T_of_K: list[float], cv: float) -> dict:
    return {"Delta": _T_of_Delta(Delta_exponent), "K": T_of_K, "cv": {r: (cv, cv) for r in READINGS}}


P5_CASES = {  # the three axes' data: name -> ({"Delta": T by reading, "K": T at K_LOG_K, "cv": by reading}, what)
    "null": (_p5_data(-6.0, [20.0 * x for x in K_LOG_K], 0.05),
             "T_eps proportional to Delta^-6 under every Delta reading (the rival exponent, what a rescaling of the "
             "features gives), the K and delta axes as predicted"),
    "null_K": (_p5_data(-2.0, [20.0 * k**2 for k in KS], 0.05),
               "T_eps growing as K^2 (slope 1.65 against K log(K/eps)), the Delta and delta axes as predicted"),
    "null_delta": (_p5_data(-2.0, [20.0 * x for x in K_LOG_K], 0.8),
                   "T_1 eta L^2 delta^2 Delta^2 spread across classes with CV 0.8, the Delta and K axes as predicted"),
    "planted": (_p5_data(-2.0, [20.0 * x for x in K_LOG_K], 0.05),
                "T_eps proportional to Delta^-2 under every reading and to K log(K/eps), one value across classes "
                "(CV 0.05)"),
}
P5_FIXED = ("under rescale and tilt T_eps is proportional to Delta^-6 exactly (scaling every feature by c moves the "
            "score matrix M = V^T Q V by c^6 per step while delta^2 Delta^2 grows as c^2: scaling.py's "
            "UNIFORM_TILT_NOTE, tests/test_axes.py): slope -6.00 in both forced readings (quick; -5.998 at the tiny "
            "size), which contradict the -2 by themselves, so delta.combine makes the Delta axis, and with it P5, "
            "not supported whatever the pair reading, the K axis and the delta axis show")


def _read_p5(data: dict, how: str) -> Case:
    """P5's rule: the Delta readings combined, the K axis and the delta axis's readings combined."""
    names = {r: [f"{r}-D{D:.4g}" for D in ds] for r, ds in P5_DELTAS.items()}
    Delta = {r: delta_slope_rule(names[r], list(P5_DELTAS[r]), T) for r, T in data["Delta"].items()}
    K_axis = k_axis_rule(K_LOG_K, data["K"], 0)
    cvs = {r: verdict(*delta_cv_rule(list(v), [])) for r, v in data["cv"].items()}
    checks = {"Delta": combine({r: o["verdict"] for r, o in Delta.items()}),
              "KlogK": (K_axis["verdict"] == "supported", K_axis["verdict"] == "not supported"),
              "delta": combine(cvs)}
    stat = {"Delta_slope_by_reading": {r: o["slope"] for r, o in Delta.items()}, "KlogK_slope": K_axis["slope"],
            "delta_cv_by_reading": {r: max(v) for r, v in data["cv"].items()},
            "checks": {k: {"agrees": a, "disagrees": b} for k, (a, b) in checks.items()}}
    return case(*p5_rule(checks), stat, how)


@controls("P5")
def p5_controls() -> Controls:
    """P5's rule on synthetic axes; fixed by the c^6 of a rescaling under the forced Delta readings."""
    return controls_from(P5_CASES, _read_p5, fixed=P5_FIXED)


# ----------------------------------------------------------------------------- B1


B1_L_STAR = 1.58  # L* = 1 / (Delta delta) of the quickstart setting
B1_LS = list(np.geomspace(B1_L_STAR / 4, 10 * B1_L_STAR, QUICK.n_L))
B1_SEEDS = (0, 1, 2)


def _jitter(i: int, seed: int) -> float:
    """A deterministic +-3% scatter per run (the seeds' count draws)."""
    return 1.0 + 0.03 * math.sin(1.7 * i + 2.3 * seed)


def _b1_sweep(fast_exponent: float, slow_exponent: float) -> dict[str, list]:
    """T_1 = 40 (L/L*)^fast and T_eps = T_1 + 400 (L/L*)^slow per L and seed."""
    L, seed, T1, Teps = [], [], [], []
    for s in B1_SEEDS:
        for i, x in enumerate(B1_LS):
            t1 = 40.0 * (x / B1_L_STAR) ** fast_exponent * _jitter(i, s)
            L.append(x)
            seed.append(s)
            T1.append(t1)
            Teps.append(t1 + 400.0 * (x / B1_L_STAR) ** slow_exponent * _jitter(i + 5, s))
    return {"L": L, "seed": seed, "T1": T1, "Teps": Teps}


B1_CASES = {  # the L sweep's times: name -> (sweep, what)
    "null": (_b1_sweep(-2.0, -2.0), "both phases as 1/L^2 (what f = L g makes at a fixed eta): the fast phase's "
             "slope is -2, not -1"),
    "null_slow": (_b1_sweep(-1.0, -1.0), "both phases as 1/L: the slow phase's slope is -1, not -2"),
    "planted": (_b1_sweep(-1.0, -2.0), "a fast phase of about 1/L steps and a slow phase of about 1/L^2"),
}
B1_FIXED = (f"{FORCED_B1} The full-size runs gave the fast phase's slope in [-1.92, -1.91] and the slow phase's in "
            "[-2.01, -2.01].")


@controls("B1")
def b1_controls() -> Controls:
    """B1's rule on synthetic L sweeps over three seeds; fixed by eta L^2."""
    def read(sweep: dict[str, list], how: str) -> Case:
        fast = safe_fit(sweep["L"], sweep["T1"], sweep["seed"])
        slow = safe_fit(sweep["L"], [e - t for t, e in zip(sweep["T1"], sweep["Teps"], strict=True)], sweep["seed"])
        stat = {"fast_T1_slope": fast.slope, "fast_T1_interval": [fast.lo, fast.hi], "slow_slope": slow.slope,
                "slow_interval": [slow.lo, slow.hi]}
        return case(*b1_rule(fast, slow), stat, how)

    return controls_from(B1_CASES, read, fixed=B1_FIXED)
