"""Controls of CL1-CL6: each claim's own rule (window.window_rule over reading.direction, isotropy.cl4_rule,
linear.cl5_rule, nadaraya.cl6_rule) on synthetic per-seed statistics shaped like the sweep's, a null (the claim
false) and a planted case (the claim true). Five seeds (the fewest a verdict may rest on); the noise between seeds
is a fixed draw, so every control is deterministic."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from ...experiments.controls import Case, Controls, case, controls, controls_from
from .isotropy import ANISOTROPIC_ABOVE, CONTROL_KIND, ISOTROPIC_BELOW, cl4_rule
from .linear import cl5_rule
from .nadaraya import TOLERANCE, cl6_rule
from .reading import DOWN, UP, direction
from .sweep import AXES
from .window import window_rule

SEEDS = 5
NOISE = 0.03  # relative spread between seeds of a window or ||Q|| (the quick size's slope intervals: 0.006-0.05 wide)

Law = Callable[[float], float]


def axis_frame(axis: str, laws: dict[str, Law], noise: float = NOISE) -> pd.DataFrame:
    """One row per (seed, value of ``axis``) with each quantity law(value) times a lognormal seed noise."""
    rng = np.random.default_rng(0)
    rows = [{"seed": s, "value": v, **{q: law(v) * float(np.exp(noise * rng.standard_normal()))
                                       for q, law in laws.items()}}
            for s in range(SEEDS) for v in AXES[axis]]
    return pd.DataFrame(rows)


def read_directions(axis: str, claimed: dict[str, int], laws: dict[str, Law], how: str) -> Case:
    """CL1-CL3's rule: each quantity's direction reading along ``axis`` (claimed: UP or DOWN), combined."""
    frame = axis_frame(axis, laws)
    readings = {q: direction(frame, q, sign) for q, sign in claimed.items()}
    stat = {q: {k: r[k] for k in ("slope", "slope_interval", "worst_local_interval", "supported", "refuted")}
            for q, r in readings.items()}
    return case(*window_rule(readings), stat, how)


WINDOW_0, Q_NORM_0 = 0.65, 3.5  # the window r_1/2 and ||Q||_2 at the base point (after 100 Adam steps)
CL1_CASES = {  # along L: name -> ({quantity: law of L}, what it is)
    "null": ({"Q_norm": lambda L: Q_NORM_0, "window": lambda L: WINDOW_0},
             "||Q|| and the window the same at every L (3% seed noise): the attention does not sharpen with L"),
    "null_reversed": ({"Q_norm": lambda L: Q_NORM_0 * (L / 4) ** -0.3, "window": lambda L: WINDOW_0 * (L / 4) ** 0.15},
                      "||Q|| falling as L^-0.3 and the window widening as L^0.15: it blurs as L grows"),
    "planted": ({"Q_norm": lambda L: Q_NORM_0 * (L / 4) ** 0.7, "window": lambda L: WINDOW_0 * (L / 4) ** -0.38},
                "||Q|| rising as L^0.7 and the window shrinking as L^-0.38 (the quick size's slopes), 3% noise"),
}
CL2_CASES = {  # along tau: name -> (law of the window, what it is)
    "null": (lambda tau: WINDOW_0, "the window the same at every tau (3% seed noise)"),
    "null_reversed": (lambda tau: WINDOW_0 * (tau / 0.5) ** -0.2, "the window narrowing as tau^-0.2"),
    "planted": (lambda tau: WINDOW_0 * (tau / 0.5) ** 0.36, "the window widening as tau^0.36 (the quick size's "
                "slope), 3% noise"),
}
CL3_CASES = {  # along N: name -> (law of the window, what it is)
    "null": (lambda N: WINDOW_0, "the window the same at every N (3% seed noise)"),
    "null_reversed": (lambda N: WINDOW_0 * (N / 32) ** 0.15, "the window widening as N^0.15"),
    "planted": (lambda N: WINDOW_0 * (N / 32) ** -0.21, "the window shrinking as N^-0.21 (the quick size's "
                "slope), 3% noise"),
}
CL2_FIXED = ("CL2 is CL1 read backwards: under f = L g the loss only scales by L^2 and Adam's steps do not see the "
             "scale, so a run depends on (L, tau) only through L / tau; the tau axis (L / tau = 40, 16, 8, 4, 2) "
             "re-reads four of the L axis's five runs (L / tau = 2, 4, 8, 16, 32), same seeds and prompts (after 100 "
             "Adam steps the window is 0.646658 at (L, tau) = (2, 0.25), (4, 0.5) and (8, 1), equal within 3e-7), "
             "so its outcome follows from CL1's window reading and is no separate test")


@controls("CL1")
def cl1_controls() -> Controls:
    """CL1's rule (||Q|| up and the window down along L) on synthetic seeds."""
    return controls_from(CL1_CASES, lambda laws, how: read_directions("L", {"Q_norm": UP, "window": DOWN}, laws, how))


@controls("CL2")
def cl2_controls() -> Controls:
    """CL2's rule (the window up along tau) on synthetic seeds; its outcome is CL1's (f = L g)."""
    return controls_from(CL2_CASES, lambda law, how: read_directions("tau", {"window": UP}, {"window": law}, how),
                         fixed=CL2_FIXED)


@controls("CL3")
def cl3_controls() -> Controls:
    """CL3's rule (the window down along N) on synthetic seeds."""
    return controls_from(CL3_CASES, lambda law, how: read_directions("N", {"window": DOWN}, {"window": law}, how))


NAN = float("nan")
CL4_CASES = {  # eigenvalue ratio of sym(Q) per seed at the largest L: name -> (ratios, what they are)
    "null": ([1.8, 2.1, 2.4, 1.9, 2.6], "a clearly anisotropic Q: lambda_max / lambda_min = 1.8-2.6"),
    "null_control": ([1.32, 1.33, 1.35, 1.36, 1.37], f"the spread the anisotropic control class ({CONTROL_KIND}, "
                     "its law favouring the first axes) gave at quick size: 1.32-1.37"),
    "null_indefinite": ([NAN] * 5 + [1.1, 1.2, 1.15], "sym(Q) indefinite (no ratio) in 5 of the full size's 8 seeds"),
    "planted": ([1.03, 1.04, 1.05, 1.04, 1.06], "a near-isotropic Q: 1.03-1.06 (the quick size's 1.04-1.05)"),
}
CL4_FIXED = (f"for a rotation-invariant class (relu_net on the sphere) the loss is invariant under Q -> R Q R^T, so "
             "from Q^(0) = 0 the expected gradient is a multiple of I and only the sampling noise of fresh prompts "
             f"moves Q off it: the quick size gave 1.04-1.05; even the anisotropic control class, built to favour the "
             f"first axes, gave 1.32-1.37, never the refutation line {ANISOTROPIC_ABOVE:g}, and the rule's other "
             "refutation (sym(Q) indefinite in most seeds) cannot fire with <= 10 seeds, since a verdict needs >= 5 "
             "finite ratios")


@controls("CL4")
def cl4_controls() -> Controls:
    """CL4's rule on synthetic per-seed eigenvalue ratios; fixed by the rotation symmetry of the class."""
    def read(ratios: list[float], how: str) -> Case:
        sup, ref, interval, _, enough = cl4_rule(ratios)
        return case(sup, ref, {"eig_ratio_median_interval": interval, "enough": enough,
                               "isotropic_below": ISOTROPIC_BELOW, "anisotropic_above": ANISOTROPIC_ABOVE}, how)

    return controls_from(CL4_CASES, read, fixed=CL4_FIXED)


def _cl5_seeds(ratio: tuple[float, float], gap_L: tuple[float, float], gap_N: tuple[float, float]) -> tuple:
    """Five seeds' values spread evenly over each (low, high): (ratio, {axis: gaps}); tau's gap is L's reversed."""
    def spread(lo_hi: tuple[float, float]) -> list[float]:
        return [float(v) for v in np.roll(np.linspace(*lo_hi, SEEDS), 2)]

    return spread(ratio), {"L": spread(gap_L), "tau": [-g for g in spread(gap_L)], "N": spread(gap_N)}


CL5_CASES = {  # per seed: name -> ((min ratio linear / softmax, growth gaps), what they are)
    "null": (_cl5_seeds((0.85, 0.95), (-0.1, 0.1), (-0.1, 0.1)), "linear attention as good as softmax (error "
             "ratio 0.85-0.95) and its error changing as softmax's along L and N (gaps -0.1 to 0.1)"),
    "null_follows": (_cl5_seeds((1.3, 1.6), (-0.1, 0.1), (-0.1, 0.1)), "linear attention worse by a constant factor "
                     "(1.3-1.6) whose curves follow softmax's (gaps -0.1 to 0.1): it adapts as softmax does"),
    "planted": (_cl5_seeds((1.32, 1.65), (2.15, 2.58), (1.62, 1.89)), "linear attention worse everywhere (1.32-1.65), "
                "its error growing faster with L (gap 2.15-2.58) and falling slower with N (1.62-1.89): the quick "
                "size's intervals"),
}


@controls("CL5")
def cl5_controls() -> Controls:
    """CL5's rule on synthetic per-seed error ratios and growth gaps."""
    def read(data: tuple, how: str) -> Case:
        sup, ref, ivs = cl5_rule(*data)
        return case(sup, ref, {"intervals": {k: iv[0] for k, iv in ivs.items()}}, how)

    return controls_from(CL5_CASES, read)


CL6_CASES = {  # each seed's largest error ratio softmax / NW(h*): name -> (ratios, what they are)
    "null": ([1.3, 1.45, 1.6, 1.35, 1.5], "softmax attention worse than Nadaraya-Watson with the best fixed "
             "bandwidth in every seed's worst setting (ratio 1.3-1.6)"),
    "planted": ([0.93, 0.97, 1.0, 1.02, 0.95], "softmax attention as good as NW(h*) or better (0.93-1.02)"),
}
CL6_FIXED = ("Nadaraya-Watson with bandwidth h on the sphere is softmax attention with Q = I / h^2 (||x_i - x||^2 = "
             "2 - 2 x_i^T x), inside the trained model's class, so the trained optimum's error is at most NW(h*)'s up "
             f"to h* being picked on finite training prompts: a ratio above {TOLERANCE:g} can only measure "
             "under-training, not the claim (the quick size's worst ratios: median interval [1.06, 1.10], "
             "inconclusive)")


@controls("CL6")
def cl6_controls() -> Controls:
    """CL6's rule on synthetic per-seed worst ratios; fixed: NW(h) is the attention with Q = I / h^2."""
    def read(worst: list[float], how: str) -> Case:
        sup, ref, interval, _, _ = cl6_rule(worst)
        return case(sup, ref, {"worst_ratio_median_interval": interval, "tolerance": TOLERANCE}, how)

    return controls_from(CL6_CASES, read, fixed=CL6_FIXED)

