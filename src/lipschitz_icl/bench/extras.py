"""Extra sections from files: ``benchmarks/bench_sweep.py:bench_sweep`` in a source checkout, and any
``FILE:FUNCTION`` given to ``lipschitz-icl bench --extra``. FUNCTION(quick: bool) returns a dict
(rows / targets / notes, as the built-in sections do)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ..errors import UserInputError
from .common import REPO_ROOT
from .registry import Size, register

DEFAULT_EXTRAS = [("sweep", "Sweeps (benchmarks/bench_sweep.py)", REPO_ROOT / "benchmarks" / "bench_sweep.py",
                   "bench_sweep")]


def _load(path: Path, func: str):
    spec = importlib.util.spec_from_file_location(f"lipschitz_icl_bench_extra_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise UserInputError(f"{path}: cannot be loaded as a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, func, None)
    if not callable(fn):
        raise UserInputError(f"{path}: has no function {func!r}")
    return fn


def register_file(name: str, title: str, path: Path, func: str) -> None:
    fn = _load(path, func)

    def section(size: Size) -> dict:
        out = fn(size.quick)
        out = out if isinstance(out, dict) and "rows" in out else {"rows": [out] if isinstance(out, dict) else [],
                                                                    "targets": [], "raw": out}
        out.setdefault("device", "cpu")  # FUNCTION(quick) is not told --device
        return out

    register(name, title)(section)


def register_defaults() -> None:
    for name, title, path, func in DEFAULT_EXTRAS:
        if path.is_file():
            register_file(name, title, path, func)


def register_spec(spec: str) -> str:
    """``FILE:FUNCTION`` -> a registered section named after the file; returns the name."""
    path_s, sep, func = spec.rpartition(":")
    if not sep or not path_s or not func:
        raise UserInputError(f"--extra {spec!r}: expected FILE:FUNCTION")
    path = Path(path_s)
    if not path.is_file():
        raise UserInputError(f"--extra {spec!r}: {path} does not exist")
    name = path.stem
    register_file(name, f"{name} ({path.name}:{func})", path, func)
    return name
