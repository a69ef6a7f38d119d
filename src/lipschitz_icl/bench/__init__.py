"""Benchmarks: a registry of sections, each a function (size) -> dict, run by ``lipschitz-icl bench``.

A section returns ``{"title", "rows": [dict, ...], "targets": [Target.as_dict(), ...], "notes": [...]}``.
Register more with ``register(name, title)(fn)``; ``fn(size)`` takes a ``Size`` (quick / tiny / full).
The core never imports this package.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .measure import machine_info

SectionFn = Callable[["Size"], dict[str, Any]]


@dataclass(frozen=True)
class Size:
    """How big the benchmarks are: ``full``, ``quick`` (<= 2 minutes on 2 cores) or ``tiny`` (tests)."""

    name: str = "quick"

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


def sections() -> dict[str, tuple[str, SectionFn]]:
    """name -> (title, function), in report order."""
    from . import all_sections  # noqa: F401  (registers the built-in sections)

    ordered = sorted(_SECTIONS.items(), key=lambda item: item[1][0])
    return {name: (title, fn) for name, (_, title, fn) in ordered}


def run_benchmarks(
    size: Size,
    only: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the registered sections (all, or ``only``) and return the bench.json document."""
    from ..api import versions

    start = time.perf_counter()
    report: dict[str, Any] = {
        "schema": 1,
        "size": size.name,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine_info(),
        "versions": versions(),
        "sections": {},
    }
    for name, (title, fn) in sections().items():
        if only and name not in only:
            continue
        if progress is not None:
            progress(title)
        t0 = time.perf_counter()
        try:
            result = fn(size)
        except Exception as e:  # noqa: BLE001 - a broken section is reported, the others still run
            result = {"title": title, "rows": [], "targets": [], "error": f"{type(e).__name__}: {e}"}
        result.setdefault("title", title)
        result["wall_s"] = round(time.perf_counter() - t0, 2)
        report["sections"][name] = result
    report["targets"] = [t for s in report["sections"].values() for t in s.get("targets", [])]
    report["wall_s"] = round(time.perf_counter() - start, 2)
    return report
