"""(c) peak resident memory of a large kernel-engine step, measured in a fresh child process."""

from __future__ import annotations

import json
import subprocess
import sys

import torch

from ..common import child_env
from ..registry import Size, Target, register

CHILD = r"""
import json, resource, sys, time
import torch
torch.set_num_threads(int(sys.argv[4]))
from lipschitz_icl.bench.common import config, kernel_step
K, B = int(sys.argv[1]), int(sys.argv[2])
device = sys.argv[5]
step, batch = kernel_step(config(["features.kind=gaussian", f"features.K={K}", f"features.d={K}",
                                  f"engine.draws={B}", f"eval.functions={sys.argv[3]}"], device))
t = time.perf_counter()
step()
wall = time.perf_counter() - t
gpu = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else None
print(json.dumps({"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "step_s": wall,
                  "peak_device_mb": gpu}))
"""


def measure_child(K: int, B: int, functions: int = 256, threads: int = 1, timeout: float = 600,
                  device: str = "cpu") -> dict:
    """Build a kernel engine with dense Sigma (gaussian features, d = K) in a fresh Python, take one
    step, and report the child's peak RSS (everything: interpreter, torch, setup, the step) and, on
    cuda, the peak device memory torch allocated."""
    threads = threads or torch.get_num_threads()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(K), str(B), str(functions), str(threads), device],
        capture_output=True, text=True, env=child_env(), timeout=timeout, check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"child failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr else proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


@register("memory", "(c) peak RSS of a kernel step at K = 256, B = 1024 (child process)", order=3)
def memory(size: Size) -> dict:
    K, B = size.pick((256, 1024), (256, 1024), (32, 64))
    res = measure_child(K, B, threads=torch.get_num_threads(), device=size.device)
    row = {"K": K, "B (draws)": B, "features": "gaussian (dense Sigma)", "peak RSS MB": res["peak_rss_mb"],
           "step s": res["step_s"]}
    if res.get("peak_device_mb") is not None:
        row["peak device MB"] = res["peak_device_mb"]
    return {
        "rows": [row],
        "targets": [Target(f"(c) peak RSS at K={K}, B={B}", res["peak_rss_mb"], "<=", 2048, " MB").as_dict()],
        "notes": ["the whole child process: interpreter, torch, problem setup and one step; queries are processed "
                  "in blocks of about 2^16 (n, k, b) entries, at least two queries each"],
    }
