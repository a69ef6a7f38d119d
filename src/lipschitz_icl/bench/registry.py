"""The registry of benchmark sections: the sizes they run at, their targets, ``register``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SectionFn = Callable[["Size"], dict[str, Any]]


@dataclass(frozen=True)
class Size:
    """How big the benchmarks are: ``full``, ``quick`` (about 6 minutes on 2 cores, half of them
    section (f)'s two ``reproduce all --quick``) or ``tiny`` (tests),
    and the device (``cpu`` or ``cuda``) of the sections that train."""

    name: str = "quick"
    device: str = "cpu"

    @property
    def quick(self) -> bool:
        return self.name in ("quick", "tiny")

    @property
    def tiny(self) -> bool:
        return self.name == "tiny"

    def pick(self, full, quick, tiny):
        return {"full": full, "quick": quick, "tiny": tiny}[self.name]


@dataclass
class Target:
    name: str
    measured: float | None
    op: str  # ">=" or "<="
    threshold: float
    unit: str = ""
    why: str = ""  # what explains a miss, when known

    @property
    def met(self) -> bool | None:
        if self.measured is None:
            return None
        return self.measured >= self.threshold if self.op == ">=" else self.measured <= self.threshold

    def verdict(self) -> str:
        if self.measured is None:
            return "not measured"
        if self.met:
            return "met"
        if self.op == ">=":
            return f"missed: {self.measured / self.threshold:.2f}x of the target" if self.threshold else "missed"
        return f"missed by {self.measured - self.threshold:.3g}{self.unit}"

    def as_dict(self) -> dict:
        return {
            "name": self.name, "measured": self.measured, "op": self.op, "threshold": self.threshold,
            "unit": self.unit, "met": self.met, "verdict": self.verdict(), "why": self.why,
        }


_SECTIONS: dict[str, tuple[float, str, SectionFn]] = {}


def register(name: str, title: str, order: float = 100.0) -> Callable[[SectionFn], SectionFn]:
    """Register a section; the report lists sections by ``order`` (built-ins: 1 to 6)."""

    def deco(fn: SectionFn) -> SectionFn:
        _SECTIONS[name] = (order, title, fn)
        return fn

    return deco


def registered() -> dict[str, tuple[str, SectionFn]]:
    """name -> (title, function) of every section registered so far, in report order."""
    ordered = sorted(_SECTIONS.items(), key=lambda item: item[1][0])
    return {name: (title, fn) for name, (_, title, fn) in ordered}
