"""The sweep benchmark: many short kernel-engine runs with 1 worker (in-process) and 2 (forked processes).

Figures (docs/PERFORMANCE.md, "Sweeps"):
- ``compute_s``: the runs alone, one after another in this process (``api.run(write=False)``);
- ``sweep_1_s`` / ``sweep_2_s``: the same runs through ``run_configs`` with 1 and 2 workers,
  store and index included; ``cluster_restart_s``: starting and stopping an embedded Dask cluster (what a local
  sweep uses where the platform cannot fork) a second time in the same process;
- ``speedup`` = sweep_1_s / sweep_2_s (target >= 1.6 on 2 cores);
- ``overhead_1_s`` = (sweep_1_s - compute_s) / n and ``overhead_2_s`` = (2 sweep_2_s - compute_s) / n:
  worker-seconds each run costs beyond its own computation (target <= 0.2 s);
- ``run_slowdown``: mean time of a run on a worker with 2 workers / with 1 (1.0 on idle cores;
  about 2 when other processes leave the sweep one core's worth), and ``worker_busy``: the share
  of the workers' wall time spent inside runs; ``idle_per_run_2_s`` = (2 sweep_2_s - time inside
  runs) / n, the engine's own cost per run in worker-seconds (start-up, scheduling, transfers,
  idle slots), which other processes on the machine barely change. On a shared machine these
  tell contention apart from the engine's cost.
"""

from __future__ import annotations

import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from ..api import run as run_api
from ..config import Config, load_config
from .dask_backend import close_client, open_local_cluster
from .execute import run_configs
from .index import load_index

STEPS = 150  # gradient steps per run: a short run (about 0.1-0.2 s on one core)


def bench_configs(n: int, steps: int = STEPS) -> list[Config]:
    """n short kernel-engine runs: the default problem (K = d = 5, linear, L = 2), seeds 0..n-1,
    a fixed step budget (eps too small to stop early, so every run does the same work)."""
    base = ["engine.kind=kernel", f"train.steps={steps}", "train.eps=1e-12", "train.log_every=10"]
    return [load_config(None, [*base, f"seed={s}"]) for s in range(n)]


def _timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _start_and_stop(workers: int) -> None:
    client, cluster = open_local_cluster(workers)
    try:
        client.wait_for_workers(workers)
    finally:
        close_client(client, cluster)


def bench_sweep(quick: bool = False, workers: int = 2) -> dict[str, Any]:
    """Run the benchmark (200 runs, or 40 with ``quick``) and return its figures."""
    n = 40 if quick else 200
    configs = bench_configs(n)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in the workers: one single-threaded process per core
    try:
        run_api(configs[0], write=False)  # warm-up: lazy imports inside torch (a fixed cost per process)
        compute = _timed(lambda: [run_api(cfg, write=False) for cfg in configs])
        with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
            one = _timed(lambda: run_configs(configs, Path(tmp) / "w1", workers=1))
            many = _timed(lambda: run_configs(configs, Path(tmp) / f"w{workers}", workers=workers))
            in_runs_1 = float(load_index(Path(tmp) / "w1")["elapsed_s"].sum())
            in_runs_n = float(load_index(Path(tmp) / f"w{workers}")["elapsed_s"].sum())
        restart = _timed(lambda: _start_and_stop(workers))  # a second cluster in this process
    finally:
        torch.set_num_threads(threads)
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return {
        "runs": n,
        "steps_per_run": STEPS,
        "workers": workers,
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "compute_s": round(compute, 2),
        "compute_per_run_s": round(compute / n, 4),
        "sweep_1_s": round(one, 2),
        f"sweep_{workers}_s": round(many, 2),
        "cluster_restart_s": round(restart, 2),
        "speedup": round(one / many, 2),
        "overhead_1_s": round((one - compute) / n, 4),
        f"overhead_{workers}_s": round((workers * many - compute) / n, 4),
        # contention: how much slower a run is when `workers` of them share the machine (1.0: no slowdown)
        "run_slowdown": round(in_runs_n / in_runs_1, 2),
        # the share of the workers' time spent inside runs (start-up, scheduling, idling excluded)
        "worker_busy": round(in_runs_n / (workers * many), 2),
        # the engine's own cost per run, whatever the machine's load: worker-seconds not spent in runs
        f"idle_per_run_{workers}_s": round((workers * many - in_runs_n) / n, 4),
        "idle_per_run_1_s": round((one - in_runs_1) / n, 4),
        "load_avg_1min": round(load[0], 2),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }
