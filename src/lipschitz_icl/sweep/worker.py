"""What runs sweep points: ``execute_batch`` (a batch of points, trained together by
``batch.run_many``; in the driver with ``--workers 1``, else in a forked process or on a Dask worker through
``run_batch_task``), ``execute_config`` (one point alone), and the embedded cluster's worker set-up."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..api import Run, versions
from ..api import run as run_api
from ..batch import run_many
from ..config import Config, validate_config
from ..recorder import SCHEMA, as_table
from ..train_batch import StepFn
from .results import Encoded, encode_batch


@dataclass(frozen=True)
class Keep:
    """What a sweep stores of each run: its trained parameters (``params``: params.pt; spec ``params:``) and its
    curves (``curves``: "summary" or "full", ``results.CURVES``; spec ``curves:``, ``--curves``)."""

    params: bool = True
    curves: str = "summary"


def failed_summary(data: dict[str, Any], error: str) -> dict[str, Any]:
    return {"status": "failed", "error": error, "seed": data.get("seed"), "versions": versions()}


ConfigData = dict[str, Any] | str | Config  # a config as a mapping, as JSON text, or validated


def as_config(data: ConfigData) -> Config:
    """A validated config from a mapping or JSON text (validated here, so that plugins are imported in the
    worker); a Config (in the driver's process) as it is."""
    if isinstance(data, Config):
        return data
    return validate_config(json.loads(data) if isinstance(data, str) else data)


def _mapping(data: ConfigData) -> dict[str, Any]:
    if isinstance(data, Config):
        return data.model_dump(mode="json")
    try:
        loaded = json.loads(data) if isinstance(data, str) else data
    except ValueError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def execute_config(data: ConfigData, save_params: bool = True) -> dict[str, Any]:
    """Run one config (a mapping or JSON text, validated here so plugins are imported in the worker).

    Returns ``{"summary": dict, "metrics": Arrow table (``recorder.SCHEMA``), "params": state dict or None,
    "elapsed_s": float}``; an error anywhere becomes a ``failed`` summary with its text, never
    an exception. ``params`` (the trained parameters, CPU tensors) is None when not wanted."""
    start = time.perf_counter()
    params, config = None, None
    try:
        cfg = as_config(data)
        result = run_api(cfg, write=False, threads=torch.get_num_threads())  # the caller's: one on a worker
        summary, metrics = result.summary, result.table()
        config = cfg.model_dump_json()
        if save_params and result.params is not None:
            params = {k: v.detach().cpu() for k, v in result.params.items()}
    except Exception as e:  # noqa: BLE001 - recorded in the index, the sweep goes on
        summary = failed_summary(_mapping(data), f"{type(e).__name__}: {e}")
        metrics = SCHEMA.empty_table()
    return {"summary": summary, "metrics": metrics, "params": params, "elapsed_s": time.perf_counter() - start,
            "config": config}


BatchResultFn = Callable[[int, dict[str, Any]], None]  # (position in the batch, result) as each run stops


def _encode(run: Run, save_params: bool, elapsed_s: float) -> dict[str, Any]:
    params = None
    if save_params and run.params is not None:
        params = {k: v.detach().cpu() for k, v in run.params.items()}
    return {"summary": run.summary, "metrics": run.table_source(), "params": params, "elapsed_s": elapsed_s,
            "config": run.config.model_dump_json()}


def execute_batch(datas: list[ConfigData], on_result: BatchResultFn, save_params: bool = True,
                  on_step: StepFn | None = None, hashes: list[str] | None = None) -> None:
    """Run a batch of configs (plain mappings) with ``batch.run_many`` and hand each result to
    ``on_result(position, result)`` the moment its run stops, in the form ``execute_config`` returns (``hashes``:
    the configs' hashes, the sweep points', for their summaries).

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
            valid.append((pos, as_config(data)))
        except Exception:  # noqa: BLE001 - recorded in the index, the sweep goes on
            report(pos, execute_config(data, save_params))  # the same failed result as alone
    try:
        run_many([cfg for _, cfg in valid], on_run=lambda i, run: report(valid[i][0], _encode(run, save_params, 0.0)),
                 on_step=on_step, hashes=None if hashes is None else [hashes[pos] for pos, _ in valid])
    except Exception:  # noqa: BLE001 - one config broke the batch's set-up: the rest one by one
        for pos, _ in valid:
            if pos not in reported:
                report(pos, execute_config(datas[pos], save_params))


def run_batch_task(datas: list[ConfigData], keep: Keep = Keep(), hashes: list[str] | None = None
                   ) -> tuple[list[tuple[int, dict[str, Any]]], Encoded | None]:
    """A batch of sweep points on a worker (single-threaded torch): ``(position, result)`` pairs, in the
    order the runs stopped, and with ``hashes`` (the points' config hashes) the batch's metrics (the rows
    ``keep.curves`` keeps) and params encoded as one results file (``results.encode_batch``; the results then
    carry neither), so that the driver only writes bytes."""
    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)
    results: list[tuple[int, dict[str, Any]]] = []
    execute_batch(datas, lambda pos, result: results.append((pos, result)), keep.params, hashes=hashes)
    if hashes is None:  # the results travel to the driver: tables, not recorders
        for _, result in results:
            result["metrics"] = as_table(result["metrics"])
        return results, None
    encoded = encode_results([r for _, r in results], [hashes[pos] for pos, _ in results], keep.curves)
    for _, result in results:
        result["metrics"] = result["params"] = None
    return results, encoded


def encode_pairs(pairs: list[tuple[Any, dict[str, Any]]], curves: str = "summary") -> Encoded:
    """``encode_results`` of (sweep point, result) pairs, each run named by its point's config hash."""
    return encode_results([r for _, r in pairs], [p.config_hash for p, _ in pairs], curves)


def encode_results(results: list[dict[str, Any]], hashes: list[str], curves: str = "summary") -> Encoded:
    """``encode_batch`` of results (``execute_config``'s form), the run of config ``hashes[i]`` in ``results[i]``,
    of their curves what ``curves`` keeps."""
    tables = {h: r["metrics"] if r["metrics"] is not None else SCHEMA.empty_table()
              for h, r in zip(hashes, results, strict=True)}  # tables, or recorders of the runs just trained
    params = {h: r["params"] for h, r in zip(hashes, results, strict=True) if r.get("params") is not None}
    return encode_batch(tables, params, curves)


def ignore_sigint() -> None:
    """For the embedded cluster's workers: Ctrl-C in the terminal reaches the whole process group;
    the driver handles it and closes the cluster, so the workers need not (nor print tracebacks)."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the worker's main thread: leave it
        pass
