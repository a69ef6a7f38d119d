"""Whether numba, the optional dependency of the compiled paths (``engine.fused``, ``ExactEngine(compiled=True)``),
is installed, and the one line that says what to install when it is not. Asking costs no import of numba
(``numba_installed``); ``fused_available`` imports it, and is the default kernel step of ``reproduce`` and sweeps."""

from __future__ import annotations

import importlib
import importlib.util

from .errors import UserInputError

NUMBA_MISSING = "needs numba, which is not installed (pip install numba, or lipschitz-icl[fused])"


def numba_installed() -> bool:
    return importlib.util.find_spec("numba") is not None


def numba_problem() -> str | None:
    """Why the compiled kernel step cannot run here (numba missing, or installed but failing to import),
    or None when it can."""
    if not numba_installed():
        return NUMBA_MISSING
    try:
        importlib.import_module("numba")
    except Exception as e:  # noqa: BLE001 - a broken install is reported, never a crash
        return f"numba is installed but cannot be imported ({type(e).__name__}: {e})"
    return None


def fused_available() -> bool:
    """Whether the compiled kernel step can run here (numba installed and importable): the default of reproduce and
    of sweeps."""
    return numba_problem() is None


def resolve_fused(asked: bool | None, option: str = "fused", instead: str = "fused=False") -> bool:
    """The kernel step to use: ``asked``, or by default whether numba can be imported; asking for the
    fused step without a working numba raises UserInputError naming ``option`` and what to pass ``instead``."""
    problem = numba_problem()
    if asked and problem is not None:
        raise UserInputError(f"{option}: {problem}; allowed: {instead}")
    return problem is None if asked is None else asked
