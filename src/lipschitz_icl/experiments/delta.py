"""One protocol for every claim that names Delta = min_{k != n} ||v_k - v_n|| (P4a-P4d, P5, B3, R5).

Delta can be moved three ways, and each is a different experiment, so every such claim is measured under
all three and reports each reading's outcome; its criterion says, before the run, how they combine:

- ``rescale``: every feature scaled by c (features.scale = c; Delta = c sqrt 2 on orthonormal features).
  G scales by c^2 and, for a homogeneous class such as the linear one, Sigma too: the same shape at a
  new time scale (c^6 for the linear class), so outcomes in time are fixed by the mathematics.
- ``tilt``: unit features tilted towards their common direction, v_k = (e_k + t u) / ||e_k + t u||
  (u = 1 / sqrt K): G = a I + b 1 1^T, which with uniform p and a rotation-invariant class is again the
  same shape (the 1 1^T part drops out): a rescaling too.
- ``pair``: one pair moved, v_1 rotated towards v_0 (the other pairs stay sqrt 2 apart): the geometry
  itself changes, so nothing fixes the outcome.

A reading whose settings are all one shape is forced (``evidence.Settings.forced_by``): its outcome is
reported, flagged, and - where it contradicts the claim - it refutes it; it is never set aside.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..store import atomic_write_npy
from .claims import INCONCLUSIVE, NOT_SUPPORTED, verdict
from .evidence import Settings, power_law
from .runner import Context

READINGS = ("rescale", "tilt", "pair")
SQRT2 = math.sqrt(2.0)


@dataclass(frozen=True)
class DeltaSetting:
    """One value of Delta under one reading: the config overrides that make it."""

    reading: str
    Delta: float
    overrides: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.reading}-D{self.Delta:.4g}"


def delta_settings(ctx: Context, reading: str, K: int, deltas: list[float]) -> list[DeltaSetting]:
    """Feature overrides giving each Delta in ``deltas`` (each <= sqrt 2) under ``reading``, for K features
    (orthonormal at Delta = sqrt 2). Feature files are written under out/features/."""
    if reading not in READINGS:
        raise ValueError(f"reading {reading!r}: allowed {', '.join(READINGS)}")
    out = []
    for D in deltas:
        if reading == "rescale":
            ov = ("features.kind=orthonormal", f"features.K={K}", f"features.d={K}", f"features.scale={D / SQRT2:.12g}")
        else:
            rows = _tilted(K, D) if reading == "tilt" else _pair(K, D)
            ov = ("features.kind=file", f"features.path={_write(ctx, f'{reading}{D:.6g}', rows)}", "features.K=null",
                  "features.d=null")
        out.append(DeltaSetting(reading, D, ov))
    return out


def _tilted(K: int, Delta: float) -> np.ndarray:
    """Rows (e_k + t u) / ||e_k + t u||, u = ones / sqrt K, with t such that ||v_k - v_n|| = Delta: the
    distance is sqrt 2 / ||e_k + t u|| and ||e_k + t u||^2 = 1 + 2 t / sqrt K + t^2."""
    r2 = 2.0 / Delta**2  # ||e_k + t u||^2
    b = 2.0 / math.sqrt(K)
    t = (-b + math.sqrt(b * b - 4 * (1.0 - r2))) / 2.0
    rows = np.eye(K) + t * np.ones((K, K)) / math.sqrt(K)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _pair(K: int, Delta: float) -> np.ndarray:
    """Rows e_k, except v_1 = cos(a) e_1 + sin(a) e_0 with ||v_0 - v_1|| = Delta."""
    rows = np.eye(K)
    sin_a = 1.0 - Delta**2 / 2.0
    rows[1] = math.sqrt(max(1.0 - sin_a**2, 0.0)) * np.eye(K)[1] + sin_a * np.eye(K)[0]
    return rows


def _write(ctx: Context, stem: str, rows: np.ndarray) -> str:
    path = ctx.out / "features" / f"{stem}.npy"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_npy(path, rows)
    return str(path)


def combine(verdicts: dict[str, str]) -> tuple[bool, bool]:
    """The protocol's rule, stated in each criterion: the claim is supported when every reading supports
    it, not supported when some reading contradicts it (forced or not), inconclusive otherwise."""
    values = list(verdicts.values())
    return all(v == "supported" for v in values), any(v == "not supported" for v in values)


def combined(readings: dict[str, dict]) -> tuple[bool, bool, str]:
    """(supported, refuted, forced_by) of a claim from its readings' outcomes (each {"verdict", "forced_by",
    ...}) by ``combine``; ``forced_by`` is non-empty when the forced readings alone fix the combined verdict
    (some forced reading contradicts the claim, or every reading is forced): it names them and their
    invariances."""
    sup, ref = combine({name: r["verdict"] for name, r in readings.items()})
    forced = {name: r["forced_by"] for name, r in readings.items() if r.get("forced_by")}
    deciding = {n: f for n, f in forced.items() if readings[n]["verdict"] == NOT_SUPPORTED}
    if not deciding and forced and len(forced) == len(readings):
        deciding = forced
    return sup, ref, "; ".join(f"{n}: {f}" for n, f in deciding.items())


def distinct_runs(settings: Settings) -> dict[str, str]:
    """Each setting's name -> the name of the setting measured for it (its group's first member), for
    settings grouped ``by="run"``: a copy step for step is measured once."""
    return {m: g.members[0] for g in settings.groups for m in g.members}


def power_law_reading(x: list[float], y: list[float | None], predicted: float, margin: float,
                      censored: int = 0, min_span: float = 1.0) -> dict:
    """One reading's outcome for 'y ~ x^predicted' on a deterministic curve (one value per distinct x): the
    exact slope and local slopes (``evidence.power_law``), supported when it is a power law whose slope lies
    within ``margin`` of ``predicted``, not supported when it is no power law or its slope lies further,
    inconclusive with fewer than 3 values, x spanning less than ``min_span`` times, or a censored run."""
    law = power_law(x, y)
    xs = [a for a, b in zip(x, y, strict=True) if b is not None and b > 0 and a > 0]
    span = max(xs) / min(xs) if xs else None
    out = {**law.as_dict(), "predicted": predicted, "margin": margin, "censored": censored, "x_span": span}
    why = (f"{censored} censored run(s)" if censored else law.reason if len(law.local_slopes) < 2 else
           f"x spans {span:.3g}x (needs >= {min_span:g}x)" if span < min_span else "")
    if why:
        return {**out, "verdict": INCONCLUSIVE, "undecided_because": why}
    near = abs(law.slope - predicted) <= margin
    return {**out, "verdict": verdict(law.is_power_law and near, not law.is_power_law or not near),
            "undecided_because": ""}
