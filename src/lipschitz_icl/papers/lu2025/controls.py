"""Controls of LU1 and LU2: each claim's own rule on synthetic per-seed numbers shaped like the quick size's, a
null (the claim false) and a planted case (the claim true); five seeds with a fixed lognormal or additive noise, so
every control is deterministic. The experiment also reads real nulls with the same rules (statistic.real_nulls)."""

from __future__ import annotations

import math

import numpy as np

from ...experiments.controls import Case, Controls, case, controls, controls_from
from .rules import lu1_rule, lu2_rule

SEEDS = 5
DIMS = (8, 16, 32)


def _noise(n: int, salt: int) -> np.ndarray:
    return np.random.default_rng(salt).standard_normal(n)


def _gaps(law, spread: float = 0.15) -> tuple[dict[int, list[float]], dict[int, list[float]]]:
    """(signed, absolute): d -> five seeds' gaps law(d) x exp(spread x noise); the absolute gap is the signed
    one's size plus a small spread (a curve whose points scatter about the theory)."""
    signed = {d: [float(law(d) * math.exp(spread * z)) for z in _noise(SEEDS, d)] for d in DIMS}
    return signed, {d: [abs(v) + 0.1 / d for v in vals] for d, vals in signed.items()}


LU1_CASES = {
    "null": (_gaps(lambda d: -1 / 6 + 0.5 / d), "simulations read against a theory scaled by 1.2: the signed gap "
             "tends to 1/1.2 - 1 = -0.17, the absolute gap still shrinks from d = 8 to 32"),
    "null_growing": (_gaps(lambda d: 0.03 * (d / 8) ** 0.5), "a gap growing as d^0.5 (simulations of a model that "
                     "drifts away from the theory)"),
    "planted": (_gaps(lambda d: 0.6 / d), "a gap 0.6/d (0.075 at d = 8, 0.019 at d = 32) with 15% seed noise: "
                "the quick size's shape"),
}


@controls("LU1")
def lu1_controls() -> Controls:
    """LU1's rule (the gap at the largest d below 10% and shrinking) on synthetic per-seed gaps."""
    def read(gaps: tuple, how: str) -> Case:
        sup, ref, stat = lu1_rule(*gaps)
        return case(sup, ref, stat, how)

    return controls_from(LU1_CASES, read)


def _lu2(memo: float, gap: float, loc: float | None, spread: float = 0.03) -> tuple:
    z = _noise(3 * SEEDS, 7).reshape(3, SEEDS)
    memo_s = [memo * math.exp(spread * v) for v in z[0]]
    gap_s = [gap + spread * v for v in z[1]]
    loc_s = [math.nan] * SEEDS if loc is None else [loc + spread * v for v in z[2]]
    return memo_s, gap_s, {10: [v * 2 for v in loc_s], 20: loc_s}


LU2_CASES = {
    "null": (_lu2(1.0, 0.02, None), "a model pretrained on fresh tasks: e_IDG = e_ICL at every kappa, flat e_ICL "
             "that never crosses the half-way level (no transition)"),
    "null_shifted": (_lu2(0.05, 0.05, -0.5), "memorisation and the right limit, but the transition at half the "
                     "theory's kappa_1/2 (the theory's kappa doubled)"),
    "null_no_memo": (_lu2(0.8, 0.05, 0.05), "e_IDG close to e_ICL at the smallest kappa (0.8): no memorisation"),
    "planted": (_lu2(0.05, 0.05, 0.06), "the quick size's shape: e_IDG/e_ICL ~ 0.05 at kappa = 0.2, e_ICL 5% above "
                "the kappa -> inf theory, the crossing 6% above the theory's kappa_1/2 (12% at d = 10)"),
}


@controls("LU2")
def lu2_controls() -> Controls:
    """LU2's rule (memorisation, the kappa -> inf limit, the half-way location) on synthetic per-seed readings."""
    def read(data: tuple, how: str) -> Case:
        sup, ref, stat = lu2_rule(*data)
        return case(sup, ref, stat, how)

    return controls_from(LU2_CASES, read)
