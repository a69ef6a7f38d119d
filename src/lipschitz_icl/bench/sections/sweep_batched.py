"""(h) the L sweep through ``sweep --workers 1``: batched (``--batch 32``) against unbatched (``--batch 1``)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pandas as pd

from ...numba_support import fused_available
from ...sweep import load_metrics, load_sweep, run_sweep
from ..common import REPO_ROOT
from ..registry import Size, Target, register
from .batched import CUDA_WHY

TIMING = ["wall_s", "elapsed_s", "finished_at", "run_dir", "results"]  # the columns that may differ between two sweeps


def _spec(size: Size) -> dict:
    """configs/sweeps/l_sweep.yaml (30 runs); --tiny: 2 values of L x 2 seeds, 300 steps."""
    spec = load_sweep(REPO_ROOT / "configs" / "sweeps" / "l_sweep.yaml")
    data = {"name": "l_sweep", "base": spec.base, "grid": {"task.L": "logspace(-0.5, 1, 10)"}, "seeds": 3,
            "overrides": [f"engine.device={size.device}"]}
    if size.tiny:
        data.update(grid={"task.L": "logspace(-0.5, 1, 2)"}, seeds=2,
                    overrides=["train.steps=300", f"engine.device={size.device}"])
    return data


def _same_results(a: Path, b: Path, rows_a: pd.DataFrame, rows_b: pd.DataFrame) -> bool:
    """Equal index rows (timing and storage columns aside) and bit-identical metrics of every run."""
    if not rows_a.drop(columns=TIMING).equals(rows_b.drop(columns=TIMING)):
        return False
    return load_metrics(a).equals(load_metrics(b))


def _timed(data: dict) -> tuple[dict, bool]:
    """The sweep ``data`` batched (``--batch 32``, before and after) and unbatched: its row, and whether the three
    gave the same index rows and metrics."""
    with tempfile.TemporaryDirectory(prefix="bench-sweep-batch-") as tmp:
        dirs = {name: Path(tmp) / name for name in ("batched1", "unbatched", "batched2")}
        times, rows = {}, {}
        for name, batch in (("batched1", 32), ("unbatched", 1), ("batched2", 32)):  # batched before and after
            t0 = time.perf_counter()
            rows[name] = run_sweep(data, dirs[name], workers=1, batch=batch)
            times[name] = time.perf_counter() - t0
        identical = (_same_results(dirs["batched1"], dirs["unbatched"], rows["batched1"], rows["unbatched"])
                     and _same_results(dirs["batched2"], dirs["unbatched"], rows["batched2"], rows["unbatched"]))
    t_batched = (times["batched1"] + times["batched2"]) / 2
    return {"kernel step": "compiled" if data["fused"] else "torch", "runs": len(rows["unbatched"]),
            "total steps": int(rows["unbatched"]["steps"].sum()),
            "longest run (steps)": int(rows["unbatched"]["steps"].max()), "--batch 1 s": times["unbatched"],
            "--batch 32 s (mean of 2)": t_batched, "speedup": times["unbatched"] / t_batched,
            "identical index and metrics": identical}, identical


@register("sweep_batched", "(h) the L sweep through `sweep --workers 1`, batched vs --batch 1", order=4.5)
def sweep_batched(size: Size) -> dict:
    """The target on the torch kernel step, where batching is what makes a sweep fast (one tensor program for many
    runs); with the compiled step (the default where numba is installed) a run alone steps in about a microsecond a
    step, the 30 runs take well under a second either way and their fixed costs (a results file and an index
    transaction per batch) bound the ratio: reported, not a target."""
    rows, identical = [], True
    for fused in (False, True) if fused_available() and size.device == "cpu" else (False,):
        row, same = _timed({**_spec(size), "fused": fused})
        rows.append(row)
        identical = identical and same
    speedup = rows[0]["speedup"]
    why = "bounded by total steps / longest run" if speedup < 4 else ""
    return {
        "rows": rows,
        "targets": [
            Target("(h) sweep --workers 1, --batch 32 vs --batch 1 (torch step)", speedup, ">=", 4.0, "x",
                   why).as_dict(),
            Target("(h) batched sweep results identical (1 = yes)", float(identical), ">=", 1.0,
                   why="" if identical or size.device == "cpu" else CUDA_WHY).as_dict(),
        ],
        "notes": ["whole sweeps (spec expansion, results files, index) in this process, one torch thread; "
                  "the batched sweep timed before and after the unbatched one (their mean); the target is the torch "
                  "step's (the compiled step's row: under a second either way, bounded by fixed costs; not a target)"],
    }
