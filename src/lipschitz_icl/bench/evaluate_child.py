"""One evaluation in a fresh Python, for its peak resident memory: ``python -m
lipschitz_icl.bench.evaluate_child RUN_DIR PROMPTS N CLASS THREADS VARIANT`` prints one JSON line
(wall and CPU seconds of ``evaluate_run`` after a warm-up on 2 prompts, the process's peak RSS in
MB, the error of each method).
VARIANT is ``current`` or ``previous`` (the formulas of ``previous_evaluate``)."""

from __future__ import annotations

import contextlib
import json
import resource
import sys
import time

import torch

from ..evaluate import evaluate_run
from .previous_evaluate import previous_formulas


def main(argv: list[str]) -> dict:
    run_dir, prompts, n, cls, threads, variant = argv
    torch.set_num_threads(int(threads))
    formulas = previous_formulas() if variant == "previous" else contextlib.nullcontext()
    with formulas:
        evaluate_run(run_dir, prompts=2, contexts=[int(n)], classes=[cls])  # loads torch's kernels
        t0, c0 = time.perf_counter(), time.process_time()
        table = evaluate_run(run_dir, prompts=int(prompts), contexts=[int(n)], classes=[cls])
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "errors": dict(zip(table["method"], table["error"], strict=True))}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
