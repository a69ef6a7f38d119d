"""What makes a measurement evidence: distinct settings (copies merged), forced outcomes detected, power
laws tested before a slope is read, intervals over independent randomness, and refinement.

- ``settings_of`` groups an experiment's configs by their canonical form (``lipschitz_icl.equivalence``):
  statistics, fits and bootstraps count ``Settings.representatives()`` only, and the claim lists which
  settings were copies of which. When every setting a statistic reads is one shape, the outcome is fixed
  by the invariances that merged them: ``Settings.forced_by()`` names them and ``claim(..., settings=...)``
  marks the result forced.
- ``power_law`` tests a log-log relation before its slope is used: the local slopes between successive
  points must lie within a stated band of the fitted slope, else the statistic is "no power law".
- ``seed_interval`` is an interval over independent draws, with what it covers; fewer than
  ``MIN_SEEDS`` draws decide nothing.
- ``refined_context`` is the same experiment at a finer approximation (4x count draws, or the exact
  expectation over counts where it is tractable); ``refinement`` compares the two verdicts: a verdict
  that moves is inconclusive.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..config import Config
from ..engines.kernel_spec import EXACT_MAX, exact_count_vectors
from ..equivalence import SettingForm, SettingGroup, group_settings, setting_form
from .claims import INCONCLUSIVE, verdict
from .runner import Context
from .uncertainty import bootstrap_interval

MIN_SEEDS = 5  # independent draws an interval needs before a verdict may rest on it
LOCAL_SLOPE_BAND = 0.3  # a power law's local slopes stay within this of the fitted slope
REFINE_DRAWS = 4  # the finer approximation: this many times the count draws
SETTLED_TOL = 0.1  # a run stopped at its budget is settled when its quantity moved less than this (relative) at the end
MIN_RESOLVED_STEPS = 10  # an event time a verdict rests on must be at least this many steps (not inside the first few)

_FORMS: dict[str, SettingForm] = {}  # config hash -> canonical form (building a problem estimates Sigma)


def form_of(cfg: Config) -> SettingForm:
    """The canonical form of ``cfg``'s setting (cached by config hash)."""
    key = cfg.config_hash()
    if key not in _FORMS:
        if len(_FORMS) > 4096:
            _FORMS.clear()
        _FORMS[key] = setting_form(cfg)
    return _FORMS[key]


@dataclass
class Settings:
    """An experiment's settings grouped into copies."""

    groups: list[SettingGroup]
    by: str  # "shape" (the statistic reads no time or loss scale), "run" (it reads the time scale) or "loss" (both)

    @property
    def distinct(self) -> int:
        return len(self.groups)

    @property
    def members(self) -> int:
        return sum(len(g.members) for g in self.groups)

    def representatives(self) -> list[str]:
        """One name per distinct setting (its first member)."""
        return [g.members[0] for g in self.groups]

    def group_of(self, name: str) -> SettingGroup:
        return next(g for g in self.groups if name in g.members)

    def forced_by(self) -> str:
        """The invariances that make every setting one shape, when there are several settings and one shape
        (the statistic then cannot differ between them), else ""."""
        if self.distinct != 1 or self.members < 2:
            return ""
        why = sorted({w for by in self.groups[0].copies_by for w in by})
        return "; ".join(why)

    def as_dict(self) -> dict:
        return {"distinct": self.distinct, "settings": self.members, "by": self.by,
                "groups": [g.as_dict() for g in self.groups]}


def settings_of(named: Sequence[tuple[str, Config]], by: str = "shape") -> Settings:
    """Group named configs by canonical form: ``by="shape"`` for a statistic blind to the time and loss
    scales (attention, relative losses, rescaled times), ``"run"`` for one that reads the time scale (steps),
    ``"loss"`` for one that also reads the loss scale (a time to an absolute accuracy)."""
    return Settings(group_settings([(name, form_of(cfg)) for name, cfg in named], by=by), by)


def run_settings(runs, by: str = "shape") -> Settings:
    """``settings_of`` for Runs, named by their config's name."""
    return settings_of([(r.config.name or f"run{i}", r.config) for i, r in enumerate(runs)], by)


# ----------------------------------------------------------------------------- power laws


@dataclass(frozen=True)
class PowerLaw:
    """A log-log relation tested before its slope is read."""

    slope: float  # least-squares slope of log y on log x
    local_slopes: list[float]  # between successive distinct x (medians of y at each x)
    band: float
    is_power_law: bool  # every local slope within ``band`` of ``slope`` (and at least 3 distinct x)
    reason: str

    def as_dict(self) -> dict:
        return {"slope": self.slope, "local_slopes": self.local_slopes,
                "local_slope_range": [min(self.local_slopes), max(self.local_slopes)] if self.local_slopes else [],
                "is_power_law": self.is_power_law, "band": self.band, "reason": self.reason}


def power_law(x: Sequence[float], y: Sequence[float | None], band: float = LOCAL_SLOPE_BAND) -> PowerLaw:
    """Fit log y = a + b log x and test it: the local slopes between successive distinct x (the median y at
    each x) must all lie within ``band`` of b. A curved relation fails, however good its r^2."""
    pts = [(float(a), float(b)) for a, b in zip(x, y, strict=True)
           if b is not None and a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)]
    xs = sorted({a for a, _ in pts})
    if len(xs) < 3:
        return PowerLaw(math.nan, [], band, False, f"{len(xs)} distinct x with a positive y (3 needed)")
    med = [float(np.median([b for a, b in pts if a == u])) for u in xs]
    lx, ly = np.log(xs), np.log(med)
    slope = float(np.polyfit(np.log([a for a, _ in pts]), np.log([b for _, b in pts]), 1)[0])
    local = [float((ly[i + 1] - ly[i]) / (lx[i + 1] - lx[i])) for i in range(len(xs) - 1)]
    worst = max(abs(s - slope) for s in local)
    ok = worst <= band
    reason = (f"local slopes {min(local):.3g} to {max(local):.3g}, within {band:g} of {slope:.3g}" if ok else
              f"no power law: local slopes run from {min(local):.3g} to {max(local):.3g} "
              f"({worst:.3g} from the fitted {slope:.3g}, band {band:g})")
    return PowerLaw(slope, local, band, ok, reason)


# ----------------------------------------------------------------------------- intervals


def seed_interval(values: Sequence[float | None], covers: str, statistic=np.median,
                  min_seeds: int = MIN_SEEDS) -> tuple[list[float], str, bool]:
    """(interval, what it covers, whether a verdict may rest on it): a bootstrap interval of ``statistic``
    over independent draws (one value per seed that redraws what the claim is about)."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    interval = bootstrap_interval(finite, statistic)
    enough = len(finite) >= min_seeds
    text = f"{len(finite)} independent draws: {covers}" + ("" if enough else f" (fewer than {min_seeds}: decides "
                                                                              "nothing)")
    return interval, text, enough


def unresolved(times: dict[str, float | None], minimum: int = MIN_RESOLVED_STEPS) -> list[str]:
    """The names whose event time is below ``minimum`` steps: a time inside the first steps (interpolated
    between steps 0 and 2, say) cannot decide a verdict; choose eta so the event is resolved."""
    return [name for name, t in times.items() if t is not None and t < minimum]


def settled(values: Sequence[float], tol: float = SETTLED_TOL, window: float = 0.1) -> bool:
    """Whether a run that stopped at its budget had stopped moving: the mean of its quantity over the last
    ``window`` of its recorded steps is within ``tol`` (relative) of the mean over the window before. A run that
    is still moving is censored for a statistic read at its end: its value there decides nothing."""
    vals = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    n = max(int(round(window * len(vals))), 1)
    if len(vals) < 2 * n:
        return False
    last, before = float(vals[-n:].mean()), float(vals[-2 * n:-n].mean())
    return abs(last - before) <= tol * max(abs(before), 1e-300)


# ----------------------------------------------------------------------------- refinement


def refined_context(ctx: Context, exact_N_K: tuple[int, int] | None = None) -> tuple[Context, str]:
    """The context at a finer approximation, writing under out/refined/: the exact expectation over counts
    when ``exact_N_K`` (the experiment's largest N, K) is small enough to enumerate, else REFINE_DRAWS x the
    count draws. Returns (context, what changed)."""
    sizes = ctx.sizes
    if exact_N_K is not None and exact_count_vectors(*exact_N_K) <= EXACT_MAX // 4:
        finer, what = dataclasses.replace(sizes, draws=sizes.draws), "the exact expectation over counts"
        exact = True
    else:
        finer, what = dataclasses.replace(sizes, draws=REFINE_DRAWS * sizes.draws), \
            f"{REFINE_DRAWS}x the count draws (B = {REFINE_DRAWS * sizes.draws})"
        exact = False
    out = Context(out=ctx.out / "refined", quick=ctx.quick, seed=ctx.seed, workers=ctx.workers,
                  progress=ctx.progress, sizes=finer, fused=ctx.fused and not exact, resume=ctx.resume,
                  exact_counts=exact)
    return out, what


def refinement(verdict: str, refined_verdict: str, what: str, statistic: dict) -> dict:
    """``ClaimResult.refinement``: the verdict at the finer approximation and whether it agrees."""
    return {"approximation": what, "verdict": refined_verdict, "agrees": verdict == refined_verdict,
            "statistic": statistic}


def settle(verdict: str, refined: dict) -> tuple[str, str]:
    """The verdict that stands after refinement, and why it is undecided when the two disagree."""
    if refined.get("agrees", True):
        return verdict, ""
    return INCONCLUSIVE, (f"the verdict moved under refinement ({verdict} -> {refined['verdict']} with "
                          f"{refined['approximation']}): the approximation decides it")


def refined_conditions(coarse: tuple[bool, bool], fine: tuple[bool, bool], what: str,
                       statistic: dict) -> tuple[bool, bool, dict, str]:
    """(supported, refuted, ClaimResult.refinement, undecided_because) from the conditions at the claim's
    approximation (``coarse``) and at the finer one (``fine``): the conditions stand when both verdicts agree;
    when they do not, neither holds (inconclusive) and the reason names the approximation."""
    refined = refinement(verdict(*coarse), verdict(*fine), what, statistic)
    _, why = settle(verdict(*coarse), refined)
    return (*(coarse if not why else (False, False)), refined, why)
