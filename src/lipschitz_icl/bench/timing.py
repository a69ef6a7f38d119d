"""Measurement helpers for the benchmarks: timing, peak memory, exponent fits, the machine."""

from __future__ import annotations

import ctypes
import math
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class Timing:
    wall_s: float  # median wall time per call
    cpu_s: float  # median process CPU time per call
    calls: int

    def as_dict(self) -> dict:
        return {"wall_s": self.wall_s, "cpu_s": self.cpu_s, "calls": self.calls}


def time_call(fn: Callable[[], object], *, repeats: int = 5, warmup: int = 1, budget_s: float = 5.0) -> Timing:
    """Median wall and CPU time of ``fn()`` over up to ``repeats`` calls (fewer if the budget runs out)."""
    for _ in range(warmup):
        fn()
    walls, cpus = [], []
    start = time.perf_counter()
    while len(walls) < repeats and (not walls or time.perf_counter() - start < budget_s):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return Timing(statistics.median(walls), statistics.median(cpus), len(walls))


def time_interleaved(fns: list[Callable[[], object]], *, rounds: int = 5, min_s: float = 0.002) -> list[Timing]:
    """Time several functions round-robin (one timing of each per round, each timing a loop of
    enough calls to last ``min_s``) and keep the fastest round of each: load on a shared machine
    only ever adds time, and interleaving spreads its drifts over all the points alike."""
    loops = []
    for fn in fns:
        fn()  # warm-up
        t0 = time.perf_counter()
        fn()
        one = max(time.perf_counter() - t0, 1e-7)
        loops.append(max(1, int(min_s / one)))
    best_w = [math.inf] * len(fns)
    best_c = [math.inf] * len(fns)
    for _ in range(rounds):
        for i, (fn, n) in enumerate(zip(fns, loops, strict=True)):
            w, c = time.perf_counter(), time.process_time()
            for _ in range(n):
                fn()
            best_w[i] = min(best_w[i], (time.perf_counter() - w) / n)
            best_c[i] = min(best_c[i], (time.process_time() - c) / n)
    return [Timing(w, c, r * n) for w, c, r, n in zip(best_w, best_c, [rounds] * len(fns), loops, strict=True)]


def fit_exponent(xs: list[float], ys: list[float]) -> float | None:
    """Least-squares slope of log y against log x (y ~ x^slope); None with fewer than 2 points."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if x > 0 and y and y > 0]
    if len(pts) < 2:
        return None
    lx, ly = np.array(pts).T
    return float(np.polyfit(lx, ly, 1)[0])


def _status_mb(key: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _trim() -> None:
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)  # give freed heap memory back, so RSS starts low
    except (OSError, AttributeError):
        pass


def peak_memory_mb(fn: Callable[[], object], device: str = "cpu") -> float | None:
    """Peak resident memory added while ``fn()`` runs, in MB (Linux: resets VmHWM through
    /proc/self/clear_refs); None where that is not available. On cuda: the peak of the device
    memory torch allocated while ``fn()`` ran, above what it held before."""
    if device == "cuda":
        return _peak_cuda_mb(fn)
    _trim()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return None
    before = _status_mb("VmRSS")
    fn()
    peak = _status_mb("VmHWM")
    if before is None or peak is None:
        return None
    return max(0.0, peak - before)


def _peak_cuda_mb(fn: Callable[[], object]) -> float:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return max(0.0, (torch.cuda.max_memory_allocated() - before) / 2**20)


def machine_info() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            mem = round(int(f.readline().split()[1]) / 1024**2, 1)
    except (OSError, ValueError, IndexError):
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": mem,
        "load_avg_1min_at_start": load,
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "platform": platform.platform(),
    }
