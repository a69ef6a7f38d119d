"""The decision rules of AH1 and AH2: pure functions of per-seed readings (the experiment and the controls
call the same functions)."""

from __future__ import annotations

import math

from ...experiments.evidence import seed_interval

COMMUTE_TOL = 0.1  # AH1: commutator below this (a quarter of a random matrix's ~0.4): aligned with Lambda
NOT_ALIGNED = 0.2  # AH1: commutator above this (half a random matrix's): not aligned
FLAT_GAIN = 0.1  # AH1: a gain log(err_L / err_L+1) below this (under ~10% lower error): the layer adds nothing
SAME_TOL = 0.05  # AH2: relative error difference within +-5%: the same error
COVERS_AH1 = "seeds redraw the init and the exact engine's context draws"
COVERS_AH2 = "seeds redraw the inits, the training prompts and the held-out prompts"


def ah1_rule(errors: dict[int, list[float]], commutators: list[float]) -> tuple[bool, bool, dict]:
    """AH1's (supported, refuted, intervals). ``errors``: L -> per-seed test error of trained gd_layers;
    ``commutators``: per seed, the largest commutator over every layer of every L. Per seed and successive L,
    the gain log(err_L / err_L+1). Supported if every gain's interval (median over seeds) lies above FLAT_GAIN
    and the commutator's interval lies below COMMUTE_TOL; refuted if some gain's interval lies below FLAT_GAIN
    (that layer leaves the error flat) or the commutator's lies above NOT_ALIGNED."""
    ls = sorted(errors)
    ivs = {}
    for a, b in zip(ls, ls[1:], strict=False):
        gains = [math.log(x / y) if x > 0 and y > 0 else math.nan for x, y in zip(errors[a], errors[b], strict=True)]
        ivs[f"gain_L{a}_to_L{b}"] = seed_interval(gains, COVERS_AH1)
    ivs["commutator"] = seed_interval(commutators, COVERS_AH1)
    enough = all(iv[2] for iv in ivs.values())
    gains = [iv[0] for k, iv in ivs.items() if k.startswith("gain")]
    (c_lo, c_hi) = ivs["commutator"][0]
    sup = enough and all(lo > FLAT_GAIN for lo, _ in gains) and c_hi < COMMUTE_TOL
    ref = enough and (any(hi < FLAT_GAIN for _, hi in gains) or c_lo > NOT_ALIGNED)
    return sup, ref, ivs


def ah2_rule(rel: dict[int, list[float]]) -> tuple[bool, bool, dict]:
    """AH2's (supported, refuted, intervals). ``rel``: L -> per seed err(full L-layer) / err(gd_layers L) - 1 on
    the same held-out prompts. Supported if every L's interval lies within +-SAME_TOL; refuted if some L's
    interval lies below -SAME_TOL (the full model reaches a clearly lower error). An interval above +SAME_TOL
    (the full model worse: under-trained) decides nothing."""
    ivs = {f"rel_L{L}": seed_interval(v, COVERS_AH2) for L, v in sorted(rel.items())}
    enough = all(iv[2] for iv in ivs.values())
    sup = enough and all(-SAME_TOL <= lo and hi <= SAME_TOL for (lo, hi), _, _ in ivs.values())
    ref = enough and any(hi < -SAME_TOL for (_, hi), _, _ in ivs.values())
    return sup, ref, ivs
