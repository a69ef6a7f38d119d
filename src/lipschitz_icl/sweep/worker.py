"""What a Dask worker runs for a sweep (functions the driver submits by reference)."""

from __future__ import annotations

from typing import Any

import torch

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
