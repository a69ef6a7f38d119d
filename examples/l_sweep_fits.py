"""An L sweep of the quickstart on Dask, its scaling fits, and the figures that show them.

The flat-regime bound T_f = K log(K/eps) / (eta delta^2 L^2 Delta^2) predicts that the time to
reach the loss eps falls as L^-2 below the threshold L* = 1/(Delta delta). This script runs the
sweep (eps relative to the initial loss, which grows as L^2, so that a small L is not
"converged" from the start), fits log T_eps against log L in the flat regime (95 % interval over seeds), says whether
the interval holds -2, and draws T against L/L*, the phase diagram and T against T_f.

    python examples/l_sweep_fits.py                  # full: 10 values of L from 0.3 to 10 x 3 seeds, 2 workers
    python examples/l_sweep_fits.py --size small     # or LIPSCHITZ_ICL_EXAMPLE_SIZE=small

Writes the sweep directory and the figures into --out (default example-out/l_sweep); running it
again reuses the finished runs.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

import lipschitz_icl as li
from lipschitz_icl import plots
from lipschitz_icl.fits import PREDICTED_SLOPES, fit_loglog
from lipschitz_icl.sweep import run_configs

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "quickstart.yaml"
# size -> (values of L, seeds, workers, overrides)
SIZE_VARIABLE = "LIPSCHITZ_ICL_EXAMPLE_SIZE"  # small: what CI runs
SIZES = {
    # L from 0.3: the time grows as L^-2 below L*, and L = 0.1 would spend minutes per run
    "full": (np.geomspace(0.3, 10, 10), 3, 2, ["train.eps_mode=relative", "train.steps=200000"]),
    "small": (np.geomspace(0.5, 4, 4), 2, 1, ["train.eps_mode=relative", "train.eps=1e-2", "engine.draws=32",
                                             "eval.functions=32"]),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default=os.environ.get(SIZE_VARIABLE, "full"))
    parser.add_argument("--out", type=Path, default=Path("example-out/l_sweep"))
    args = parser.parse_args()
    if args.size not in SIZES:  # a default from the environment is not checked against choices
        parser.error(f"{SIZE_VARIABLE} must be one of {', '.join(SIZES)} (got {args.size!r})")
    values, seeds, workers, overrides = SIZES[args.size]

    configs = [li.load_config(CONFIG, [*overrides, f"task.L={L:.6g}", f"seed={seed}"])
               for L in values for seed in range(seeds)]
    rows = run_configs(configs, args.out / "sweep", workers=workers)
    print(rows[["L", "seed", "status", "T_1", "T_eps", "regime"]].to_string(index=False))

    flat = rows[(rows["regime"] == "flat") & rows["T_eps"].notna()]
    fit = fit_loglog(flat["L"], flat["T_eps"].astype(float), flat["seed"])
    predicted = PREDICTED_SLOPES["L"]  # d log T / d log L from T_f: -2
    print(f"flat regime: T_eps ~ L^{fit.slope:.3f}, 95 % interval [{fit.lo:.3f}, {fit.hi:.3f}] over "
          f"{fit.n} runs; theory {predicted}: {'inside' if fit.contains(predicted) else 'outside'} the interval")

    sweep = args.out / "sweep"
    for name, fig in {"T_vs_L.png": plots.time_vs_lipschitz(sweep), "phases.png": plots.phase_diagram(sweep),
                      "T_vs_Tf.png": plots.time_vs_theory(sweep)}.items():
        fig.savefig(args.out / name)
        print(f"wrote {args.out / name}")


if __name__ == "__main__":  # Dask workers import this module: the guard keeps them from rerunning it
    main()
