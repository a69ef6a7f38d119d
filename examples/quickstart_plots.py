"""The quickstart run and its figures: loss and Attn_k with T_1 and T_eps, the score
trajectories A_k and B_kn, and the final score matrix.

    python examples/quickstart_plots.py                  # full size (a few seconds)
    python examples/quickstart_plots.py --size small     # or LIPSCHITZ_ICL_EXAMPLE_SIZE=small

Run from the repository root (it reads configs/quickstart.yaml); writes into --out
(default example-out/quickstart).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import lipschitz_icl as li
from lipschitz_icl import plots

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "quickstart.yaml"
SIZE_VARIABLE = "LIPSCHITZ_ICL_EXAMPLE_SIZE"  # small: what CI runs
SIZES = {
    "full": [],  # the quickstart as it is: eps = 1e-3
    "small": ["train.eps=2e-2", "engine.draws=32", "eval.functions=32", "train.log_every=5"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default=os.environ.get(SIZE_VARIABLE, "full"))
    parser.add_argument("--out", type=Path, default=Path("example-out/quickstart"))
    args = parser.parse_args()
    if args.size not in SIZES:  # a default from the environment is not checked against choices
        parser.error(f"{SIZE_VARIABLE} must be one of {', '.join(SIZES)} (got {args.size!r})")

    run = li.run(CONFIG, SIZES[args.size], out=args.out / "run", force=True)
    s = run.summary
    print(f"status {s['status']} after {s['steps']} steps: T_1 = {s['T_1']}, T_eps = {s['T_eps']}, "
          f"L = {s['L']:g}, L* = {s['L_star']:.3g} ({s['regime']} regime)")

    figures = {
        "curves.png": plots.training_curves(run),  # the two phases: fast up to T_1, slow to T_eps
        "scores.png": plots.score_trajectories(run),  # A_k grows, B_kn stays small
        "score_matrix.png": plots.score_heatmap(run, "M"),  # a dominant diagonal
    }
    for name, fig in figures.items():
        fig.savefig(args.out / name)
        print(f"wrote {args.out / name}")


if __name__ == "__main__":
    main()
