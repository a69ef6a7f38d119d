"""Controls: a claim's own decision rule run on a *null* (data where the claim is false) and on a *planted* case
(data where it is true). A verdict is evidence only if its rule could have failed, and that is shown, not argued:
the rule rejects its null (verdict "not supported") and accepts its planted case ("supported"): ``can_fail``.

Each claim's file registers its controls beside its experiment:

    @controls("P1")
    def p1_controls() -> Controls:
        return Controls(null=case(rule(power_law_curve()), "a single power law"), planted=case(...))

Controls are cheap (synthetic curves, the exact engine) and run at every size. A claim without registered
controls (a plugin's; every built-in claim has them) is reported as "controls missing", never as evidence; one whose
null passes is "cannot fail", never as evidence either. ``attach`` records them on each result."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from .claims import INCONCLUSIVE, NOT_SUPPORTED, SUPPORTED, ClaimResult, verdict

MISSING = "controls missing"  # the can-fail cell of a claim without controls
CANNOT_FAIL = "cannot fail"  # the can-fail cell of a claim whose rule passes its null or rejects its planted case


@dataclass(frozen=True)
class Case:
    """The claim's rule on one synthetic data set: its verdict, the statistic it read, and what the data is."""

    verdict: str
    statistic: dict[str, Any]
    how: str  # one line: what the data is, and why the claim is false (null) or true (planted) on it


def case(supported: bool, refuted: bool, statistic: dict[str, Any], how: str) -> Case:
    """A Case from the rule's two conditions (``claims.verdict``)."""
    return Case(verdict(bool(supported), bool(refuted)), dict(statistic), how)


@dataclass(frozen=True)
class Controls:
    null: Case
    planted: Case
    extra: dict[str, Case] = field(default_factory=dict)  # further nulls (e.g. a logistic and a ramp), each rejected
    # the protocol fixes the outcome: the rule rejects its null, but no run the claim's protocol makes can be that
    # null (say why, with what was measured); such a rule cannot fail on the runs, so it is never evidence
    fixed: str = ""

    @property
    def can_fail(self) -> bool:
        """Whether the rule rejects every null and accepts the planted case, and the protocol can produce a null."""
        nulls = [self.null, *self.extra.values()]
        return (all(c.verdict == NOT_SUPPORTED for c in nulls) and self.planted.verdict == SUPPORTED
                and not self.fixed)

    def failing(self) -> str:
        """Why the rule cannot fail, in one line ('' when it can)."""
        bad = [f"its null ({c.how}) is {c.verdict}" for c in [self.null, *self.extra.values()]
               if c.verdict != NOT_SUPPORTED]
        if self.planted.verdict != SUPPORTED:
            bad.append(f"its planted case ({self.planted.how}) is {self.planted.verdict}")
        if self.fixed:
            bad.append(f"the protocol fixes the outcome: {self.fixed}")
        return "; ".join(bad)

    def as_dict(self) -> dict[str, Any]:
        out = {"null": asdict(self.null), "planted": asdict(self.planted)}
        out.update({name: asdict(c) for name, c in self.extra.items()})
        if self.fixed:
            out["fixed"] = self.fixed
        return out


def controls_from(cases: dict[str, tuple[Any, str]], read: Callable[[Any, str], Case], fixed: str = "") -> Controls:
    """Controls from named cases (``null``, ``planted``, and further nulls), each data set read by the claim's rule
    through ``read(data, how)``; ``fixed``: why the protocol cannot produce the null ('' when it can)."""
    made = {name: read(data, how) for name, (data, how) in cases.items()}
    return Controls(null=made.pop("null"), planted=made.pop("planted"), extra=made, fixed=fixed)


ControlsFn = Callable[[], Controls]
_CONTROLS: dict[str, ControlsFn] = {}  # claim id -> the function that builds its controls
_MADE: dict[str, Controls] = {}  # claim id -> its controls, made once per process (they are deterministic)


def controls(*claim_ids: str) -> Callable[[ControlsFn], ControlsFn]:
    """Register the controls of ``claim_ids`` (one function may serve claims read by the same rule)."""
    if not claim_ids:
        raise ValueError("@controls needs at least one claim id")

    def wrap(fn: ControlsFn) -> ControlsFn:
        for cid in claim_ids:
            old = _CONTROLS.get(cid)
            if old is not None and (old.__module__, old.__qualname__) != (fn.__module__, fn.__qualname__):
                raise ValueError(f"claim {cid!r} already has controls ({old.__module__}.{old.__qualname__})")
            _CONTROLS[cid] = fn
            _MADE.pop(cid, None)
        return fn

    return wrap


def has_controls(cid: str) -> bool:
    return cid in _CONTROLS


def controls_of(cid: str) -> Controls | None:
    """The controls of claim ``cid`` (made once), or None when it has none."""
    if cid not in _CONTROLS:
        return None
    if cid not in _MADE:
        made = _CONTROLS[cid]()
        if not isinstance(made, Controls):
            raise TypeError(f"the controls of {cid!r} must return a Controls (got {type(made).__name__})")
        _MADE[cid] = made
    return _MADE[cid]


def attach(result: ClaimResult) -> None:
    """Record the controls of ``result``'s claim and whether its rule can fail (a comparison has none)."""
    if result.comparison:
        return
    made = controls_of(result.id)
    if made is None:
        result.controls, result.can_fail = {"missing": True}, None
        return
    result.controls, result.can_fail = made.as_dict(), made.can_fail
    if not made.can_fail:
        result.controls["why"] = made.failing()


def can_fail_cell(c: ClaimResult) -> str:
    """The claims table's "can fail": yes, cannot fail, or controls missing ('' for a comparison)."""
    if c.comparison:
        return ""
    if c.can_fail is None:
        return MISSING
    return "yes" if c.can_fail else CANNOT_FAIL


def is_evidence(c: ClaimResult) -> bool:
    """Whether a result counts as evidence: a verdict (not inconclusive, not a comparison), not forced, and a rule
    shown able to fail by its controls."""
    return (not c.comparison and c.verdict in (SUPPORTED, NOT_SUPPORTED) and not c.forced
            and c.can_fail is True)


def counts(claims: list[ClaimResult]) -> dict[str, int]:
    """claims, evidence, forced, cannot fail, controls missing, inconclusive: the report's headline counts."""
    real = [c for c in claims if not c.comparison]
    return {"claims": len(real), "evidence": sum(map(is_evidence, real)),
            "forced": sum(c.forced for c in real), "cannot fail": sum(c.can_fail is False for c in real),
            "controls missing": sum(c.can_fail is None for c in real),
            "inconclusive": sum(c.verdict == INCONCLUSIVE for c in real)}
