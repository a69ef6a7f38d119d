"""Whether numba, the optional dependency of the compiled paths (``engine.fused``, ``ExactEngine(compiled=True)``),
is installed, and the one line that says what to install when it is not. Asking costs no import of numba."""

from __future__ import annotations

import importlib.util

NUMBA_MISSING = "needs numba, which is not installed (pip install numba, or lipschitz-icl[fused])"


def numba_installed() -> bool:
    return importlib.util.find_spec("numba") is not None
