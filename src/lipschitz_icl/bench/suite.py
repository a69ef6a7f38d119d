"""Running the sections: the built-in ones (``sections/``), the extra files, and the report."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..api import versions
from . import sections as _builtin  # noqa: F401  (registers the built-in sections)
from .extras import register_defaults
from .registry import SectionFn, Size, registered
from .timing import machine_info

register_defaults()


def registered_sections() -> dict[str, tuple[str, SectionFn]]:
    """name -> (title, function), in report order."""
    return registered()


def run_benchmarks(
    size: Size,
    only: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the registered sections (all, or ``only``) and return the bench.json document."""
    start = time.perf_counter()
    report: dict[str, Any] = {
        "schema": 1,
        "size": size.name,
        "device": size.device,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine_info(),
        "versions": versions(),
        "sections": {},
    }
    for name, (title, fn) in registered_sections().items():
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
        on = result.setdefault("device", size.device)  # where the section ran (some run on the CPU whatever --device)
        result["rows"] = [{"device": on, **row} for row in result.get("rows") or []]
        report["sections"][name] = result
    report["targets"] = [t for s in report["sections"].values() for t in s.get("targets", [])]
    report["wall_s"] = round(time.perf_counter() - start, 2)
    return report
