"""(g) ``evaluate`` at d = 64, N = 50: wall time and peak RSS, now and with the previous formulas,
each in a fresh child process, on the same trained run and the same prompts."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from ...api import run as run_one
from ..common import child_env, config
from ..registry import Size, Target, register


def _train(out: Path, d: int, N: int) -> Path:
    """A short kernel-engine run with gaussian features in d dimensions and N context tokens."""
    cfg = config(["features.kind=gaussian", "features.K=8", f"features.d={d}", f"prompt.N={N}", "train.steps=50"])
    run_one(cfg, out=out)
    return out


def _child(run_dir: Path, prompts: int, n: int, variant: str, timeout: float) -> dict:
    args = [str(run_dir), str(prompts), str(n), "linear", str(torch.get_num_threads()), variant]
    proc = subprocess.run([sys.executable, "-m", "lipschitz_icl.bench.evaluate_child", *args], capture_output=True,
                          text=True, env=child_env(), timeout=timeout, check=False)
    if proc.returncode != 0:
        last = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit code {proc.returncode}"
        raise RuntimeError(f"evaluate child ({variant}) failed: {last}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _max_relative_difference(a: dict, b: dict) -> float:
    return max(abs(a[m] - b[m]) / max(abs(b[m]), 1e-300) for m in b)


@register("evaluate", "(g) `evaluate` at d = 64, N = 50: now against the previous formulas", order=5)
def evaluate_section(size: Size) -> dict:
    d, N = size.pick((64, 50), (64, 50), (16, 20))
    prompts = size.pick(1677, 1677, 64)  # the previous chunk size at N = 50 (2^22 / N^2 prompts)
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = _train(Path(tmp) / "run", d, N)
        now = _child(run_dir, prompts, N, "current", timeout=600)
        before = _child(run_dir, prompts, N, "previous", timeout=1800)
    speedup = before["cpu_s"] / now["cpu_s"]  # CPU time: what load on a shared machine does not inflate
    same = _max_relative_difference(now["errors"], before["errors"])
    rows = [{"formulas": name, "d": d, "N": N, "prompts": prompts, "evaluate s": r["wall_s"],
             "evaluate cpu s": r["cpu_s"], "peak RSS MB": r["peak_rss_mb"]}
            for name, r in (("previous", before), ("now", now))]
    return {
        "device": "cpu",  # the comparison with the previous formulas (CPU-only lstsq drivers) runs on the CPU
        "rows": rows,
        "targets": [
            Target(f"(g) evaluate peak RSS at d={d}, N={N}", now["peak_rss_mb"], "<=", 1024, " MB").as_dict(),
            Target(f"(g) evaluate speedup over the previous formulas, d={d}, N={N}", speedup, ">=", 5.0,
                   "x").as_dict(),
            Target("(g) largest relative difference of the errors, now vs previous", same, "<=", 1e-9).as_dict(),
        ],
        "notes": [
            "one class (linear), the model, all six baselines and the Bayes (Sigma) predictor (both variants compute "
            "it) at n = N context examples; each variant in a fresh child process (peak RSS: the whole process, "
            "interpreter and torch included, ~400 MB).",
            "previous: the baselines as of commit 961c2b1 (bench/previous_baselines.py: pairwise distances through a "
            "(B, N, N, d) array, three times per chunk, the GP's inverse by cholesky_solve against an identity, "
            "least squares by pinv) and chunks of 2^22 / n^2 prompts (bench/previous_evaluate.py).",
            "speedup: the ratio of CPU seconds of evaluate_run (one thread, after a warm-up on 2 prompts), both "
            "measured in this bench run; wall seconds are shown beside them.",
        ],
    }
