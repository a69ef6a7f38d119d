"""lipschitz-icl: in-context learning of nonlinear L-Lipschitz regression with softmax attention."""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"
# Raised whenever a change alters the numbers a config gives while its hash stays the same (another order of a sum,
# another formula for the same quantity): runs and saved experiments record it, and reproduce --resume reuses only
# those of the same revision. 1: relu_net's spectral norm in closed form (d <= 3); prompt.draw_dtype: float32
# evaluates the labels in float32. 2: the fused kernel step (engine.fused) with a diagonal Sigma takes kernel_diag's
# closed form (engines/kernel_fused_diag.py): its sums are other sums. 3: the fused step's test errors through the
# Gram matrix of err (kernel_fused._test_errors): other sums again; and in a batch, the last record of a run that ends
# between its log steps evaluated apart, as alone (train_batch._record), not read from another run's full step.
NUMERICS_REVISION = 3

# The public names, loaded on first use (PEP 562): importing the package stays instant, so the
# command line can catch a Ctrl-C during the heavy imports (torch) and print one line instead of a
# traceback (see __main__.py).
_EXPORTS = {
    "Run": "api", "load_run": "api", "run": "api", "write_run": "api",
    "Config": "config", "default_config": "config", "load_config": "config",
    "TaskClass": "tasks", "register_task": "tasks", "task_names": "tasks",
    "attention_map": "attention", "diff": "compare",
}

__all__ = ["NUMERICS_REVISION", "__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
