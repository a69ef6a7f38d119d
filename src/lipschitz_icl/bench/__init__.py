"""Benchmarks: a registry of sections, each a function (size) -> dict, run by ``lipschitz-icl bench``.

A section returns ``{"title", "rows": [dict, ...], "targets": [Target.as_dict(), ...], "notes": [...]}``.
Register more with ``register(name, title)(fn)``; ``fn(size)`` takes a ``Size`` (quick / tiny / full).
The built-in sections are one file each under ``sections/``. The core never imports this package.
"""

from __future__ import annotations

from .registry import SectionFn, Size, Target, register
from .suite import registered_sections, run_benchmarks

__all__ = ["SectionFn", "Size", "Target", "register", "registered_sections", "run_benchmarks"]
