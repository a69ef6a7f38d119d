"""10,000 quickstart-size runs (bench (j)'s full-size workload) through ``run_sweep`` with default options on
this machine, progress printed every 1,000 runs (docs/PERFORMANCE.md, "On a GPU"):

    PYTHONPATH=src python benchmarks/sweep_10k.py cpu      # or cuda
"""

import sys
import tempfile
import time
from pathlib import Path

from lipschitz_icl.bench.anchor_vmap import AnchorSetting
from lipschitz_icl.bench.registry import Size
from lipschitz_icl.bench.sections.sweep_scale import _spec
from lipschitz_icl.sweep import run_sweep


def main(device: str) -> None:
    spec = _spec(Size("full", device), AnchorSetting())
    t0 = time.perf_counter()
    shown = [0]

    def progress(done: int, failed: int, total: int) -> None:
        ended = done + failed
        if ended >= shown[0] + 1000 or ended == total:
            shown[0] = ended
            t = time.perf_counter() - t0
            print(f"{device}: {ended}/{total} runs at {t:.1f} s ({ended / t:.1f} runs/s)", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        rows = run_sweep(spec, Path(tmp) / "s", progress=progress)
    t = time.perf_counter() - t0
    print(f"{device}: {len(rows)} runs in {t:.1f} s = {len(rows) / t:.1f} runs/s = {3600 * len(rows) / t:.0f} "
          f"runs/hour; statuses {rows['status'].value_counts().to_dict()}", flush=True)


if __name__ == "__main__":  # Dask's workers start from a fork server: the guard is needed
    main(sys.argv[1] if len(sys.argv) > 1 else "cpu")
