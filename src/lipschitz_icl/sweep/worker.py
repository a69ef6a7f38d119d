"""What a Dask worker runs. Importing this module warms a worker up: torch, the package, and
``torch._dynamo`` (which the first ``torch.optim`` optimizer of a process imports, ~2 s), so
the embedded cluster preloads it once in its fork server instead of once per worker."""

from __future__ import annotations

from typing import Any

import torch
import torch._dynamo  # noqa: F401 - imported lazily by torch.optim otherwise: see the docstring

from .execute import execute_config


def run_task(data: dict[str, Any]) -> dict[str, Any]:
    """One sweep point on a worker: single-threaded torch (one worker process per core)."""
    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)
    return execute_config(data)


def ignore_sigint() -> None:
    """For the embedded cluster's workers: Ctrl-C in the terminal reaches the whole process group;
    the driver handles it and closes the cluster, so the workers need not (nor print tracebacks)."""
    import signal

    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the worker's main thread: leave it
        pass
