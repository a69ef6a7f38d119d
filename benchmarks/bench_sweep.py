"""Benchmark: 200 short kernel-engine runs through the sweep engine with 1 and 2 workers.

    PYTHONPATH=src python benchmarks/bench_sweep.py [--quick] [--json FILE]

Prints the figures (see lipschitz_icl.sweep.bench for their definitions). Not a test: the
numbers depend on the machine and on what else runs on it.
"""

import argparse
import json

from lipschitz_icl.sweep.bench import bench_sweep

if __name__ == "__main__":  # the Dask workers start by re-importing this file: keep the work under the guard
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="40 runs instead of 200")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    figures = bench_sweep(quick=args.quick, workers=args.workers)
    for key, value in figures.items():
        print(f"{key:>22}  {value}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(figures, fh, indent=2)
