"""Controls of AH1 and AH2: each claim's rule on synthetic per-seed readings shaped like the quick size's (a fixed
draw of seed noise, five seeds), a null (the claim false) and a planted case (the claim true)."""

from __future__ import annotations

import numpy as np

from ...experiments.controls import Case, Controls, case, controls, controls_from
from .rules import ah1_rule, ah2_rule

SEEDS = 5
ERRORS = {1: 0.92, 2: 0.33, 3: 0.165, 4: 0.127}  # about the quick size's medians (tr Lambda = 4)


def _noisy(values: dict[int, float], spread: float, stream: int) -> dict[int, list[float]]:
    rng = np.random.default_rng(stream)
    return {k: [v * float(np.exp(spread * rng.standard_normal())) for _ in range(SEEDS)] for k, v in values.items()}


def _comms(level: float, stream: int) -> list[float]:
    rng = np.random.default_rng(100 + stream)
    return [level * float(np.exp(0.2 * rng.standard_normal())) for _ in range(SEEDS)]


AH1_CASES = {  # name -> ((errors by L, commutators per seed), what they are)
    "null": ((_noisy({L: 0.92 for L in ERRORS}, 0.02, 0), _comms(0.03, 0)),
             "the error the same at every L (2% seed noise), commutators 0.03: extra layers do nothing"),
    "null_unaligned": ((_noisy(ERRORS, 0.02, 1), _comms(0.35, 1)),
                       "the error falling with L but commutators about 0.35 (a random matrix's ~0.4): steps not "
                       "aligned with Lambda"),
    "null_stalls": ((_noisy({**ERRORS, 4: 0.165}, 0.02, 2), _comms(0.03, 2)),
                    "the error falling up to L = 3, then the same at L = 4"),
    "planted": ((_noisy(ERRORS, 0.02, 3), _comms(0.03, 3)),
                "the error falling at every L (0.92, 0.33, 0.165, 0.127; 2% noise), commutators 0.03"),
}

AH2_CASES = {  # name -> (rel by L, what it is)
    "null": ({1: [0.005, 0.01, 0.0, 0.012, 0.008], 2: [-0.2, -0.17, -0.22, -0.15, -0.19]},
             "the free model at gd_layers' error at L = 1 and 15-22% below it at L = 2 (it computes more than GD)"),
    "planted": ({1: [0.005, 0.01, 0.0, 0.012, 0.008], 2: [0.01, -0.01, 0.02, 0.0, 0.015]},
                "the free model within 2% of gd_layers at L = 1 and 2"),
}


@controls("AH1")
def ah1_controls() -> Controls:
    """AH1's rule (every gain above 0, commutator below 0.1) on synthetic seeds."""
    def read(data, how: str) -> Case:
        sup, ref, ivs = ah1_rule(*data)
        return case(sup, ref, {k: iv[0] for k, iv in ivs.items()}, how)

    return controls_from(AH1_CASES, read)


@controls("AH2")
def ah2_controls() -> Controls:
    """AH2's rule (every L's relative difference within +-5%) on synthetic seeds."""
    def read(rel, how: str) -> Case:
        sup, ref, ivs = ah2_rule(rel)
        return case(sup, ref, {k: iv[0] for k, iv in ivs.items()}, how)

    return controls_from(AH2_CASES, read)
