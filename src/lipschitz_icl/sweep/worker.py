"""What runs one sweep point: ``execute_config`` (in the driver with ``--workers 1``, else on a
Dask worker through ``run_task``), and the embedded cluster's worker set-up."""

from __future__ import annotations

import signal
import time
from typing import Any

import torch

from ..api import run as run_api
from ..api import versions
from ..config import validate_config
from ..recorder import SCHEMA, metrics_table
from ..store import parquet_bytes


def failed_summary(data: dict[str, Any], error: str) -> dict[str, Any]:
    return {"status": "failed", "error": error, "seed": data.get("seed"), "versions": versions()}


def execute_config(data: dict[str, Any], save_params: bool = True) -> dict[str, Any]:
    """Run one config (a plain mapping, validated here so plugins are imported in the worker).

    Returns ``{"summary": dict, "metrics": parquet bytes, "params": state dict or None,
    "elapsed_s": float}``; an error anywhere becomes a ``failed`` summary with its text, never
    an exception. ``params`` (the trained parameters, CPU tensors) is None when not wanted."""
    start = time.perf_counter()
    params = None
    try:
        cfg = validate_config(data)
        result = run_api(cfg, write=False)
        summary, metrics = result.summary, parquet_bytes(metrics_table(result.metrics))
        if save_params and result.params is not None:
            params = {k: v.detach().cpu() for k, v in result.params.items()}
    except Exception as e:  # noqa: BLE001 - recorded in the index, the sweep goes on
        summary = failed_summary(data, f"{type(e).__name__}: {e}")
        metrics = parquet_bytes(SCHEMA.empty_table())
    return {"summary": summary, "metrics": metrics, "params": params, "elapsed_s": time.perf_counter() - start}


def run_task(data: dict[str, Any], save_params: bool = True) -> dict[str, Any]:
    """One sweep point on a worker: single-threaded torch (one worker process per core)."""
    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)
    return execute_config(data, save_params)


def ignore_sigint() -> None:
    """For the embedded cluster's workers: Ctrl-C in the terminal reaches the whole process group;
    the driver handles it and closes the cluster, so the workers need not (nor print tracebacks)."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the worker's main thread: leave it
        pass
