"""What runs sweep points: ``execute_batch`` (a batch of points, trained together by
``batch.run_many``; in the driver with ``--workers 1``, else on a Dask worker through
``run_batch_task``), ``execute_config`` (one point alone), and the embedded cluster's worker set-up."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from typing import Any

import torch

from ..api import Run, versions
from ..api import run as run_api
from ..batch import run_many
from ..config import Config, validate_config
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


BatchResultFn = Callable[[int, dict[str, Any]], None]  # (position in the batch, result) as each run stops


def _encode(run: Run, save_params: bool, elapsed_s: float) -> dict[str, Any]:
    params = None
    if save_params and run.params is not None:
        params = {k: v.detach().cpu() for k, v in run.params.items()}
    return {"summary": run.summary, "metrics": parquet_bytes(metrics_table(run.metrics)), "params": params,
            "elapsed_s": elapsed_s}


def execute_batch(datas: list[dict[str, Any]], on_result: BatchResultFn, save_params: bool = True) -> None:
    """Run a batch of configs (plain mappings) with ``batch.run_many`` and hand each result to
    ``on_result(position, result)`` the moment its run stops, in the form ``execute_config`` returns.

    Per-run numbers equal those of ``execute_config`` bit for bit (``run_many``'s guarantee);
    ``elapsed_s`` is the batch's wall time since the previous result (so the batch's results sum
    to its wall time). A config that does not validate is a ``failed`` result at once; an error
    that stops ``run_many`` itself sends the runs not reported yet through ``execute_config`` one
    by one. Ctrl-C (``batch.RunsInterrupted``) propagates after the interrupted runs are reported."""
    clock = [time.perf_counter()]
    reported: set[int] = set()

    def report(pos: int, result: dict[str, Any]) -> None:
        now = time.perf_counter()
        result["elapsed_s"], clock[0] = now - clock[0], now
        reported.add(pos)
        on_result(pos, result)

    valid: list[tuple[int, Config]] = []
    for pos, data in enumerate(datas):
        try:
            valid.append((pos, validate_config(data)))
        except Exception:  # noqa: BLE001 - recorded in the index, the sweep goes on
            report(pos, execute_config(data, save_params))  # the same failed result as alone
    try:
        run_many([cfg for _, cfg in valid], on_run=lambda i, run: report(valid[i][0], _encode(run, save_params, 0.0)))
    except Exception:  # noqa: BLE001 - one config broke the batch's set-up: the rest one by one
        for pos, _ in valid:
            if pos not in reported:
                report(pos, execute_config(datas[pos], save_params))


def run_batch_task(datas: list[dict[str, Any]], save_params: bool = True) -> list[tuple[int, dict[str, Any]]]:
    """A batch of sweep points on a worker (single-threaded torch): ``(position, result)`` pairs,
    in the order the runs stopped."""
    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)
    results: list[tuple[int, dict[str, Any]]] = []
    execute_batch(datas, lambda pos, result: results.append((pos, result)), save_params)
    return results


def ignore_sigint() -> None:
    """For the embedded cluster's workers: Ctrl-C in the terminal reaches the whole process group;
    the driver handles it and closes the cluster, so the workers need not (nor print tracebacks)."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the worker's main thread: leave it
        pass
