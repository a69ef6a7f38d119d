"""(d) the L sweep batched into one tensor program against the same runs one after another."""

from __future__ import annotations

import numpy as np

from ...config import load_config
from ..common import REPO_ROOT, config, same_run, together_and_alone
from ..registry import Size, Target, register

CUDA_WHY = ("on CUDA the libraries may choose kernels by batch size, so batched runs equal single ones to rounding, "
            "not bit for bit (docs/PERFORMANCE.md, 'On a GPU')")


def sweep_configs(size: Size) -> list:
    """configs/quickstart.yaml over L = logspace(-1, 1, 10) x seeds 0, 1, 2 (the defaults equal the
    quickstart when the file is not at hand)."""
    path = REPO_ROOT / "configs" / "quickstart.yaml"
    Ls = size.pick(np.logspace(-1, 1, 10), np.logspace(-1, 1, 10), np.logspace(-0.5, 1, 3))
    seeds = size.pick([0, 1, 2], [0, 1, 2], [0, 1])
    extra = [*size.pick([], [], ["train.steps=300"]), f"engine.device={size.device}"]
    out = []
    for L in Ls:
        for seed in seeds:
            ov = [f"task.L={L:.10g}", f"seed={seed}", *extra]
            out.append(load_config(path, ov) if path.is_file() else config(ov, size.device))
    return out


def _why_slower(steps: list[int], t_batch: float, t_seq: float) -> str:
    """What bounds the batched speedup, said when it is under the target's 5x."""
    if t_seq / t_batch >= 5.0:
        return ""
    bound = sum(steps) / max(steps)
    per_batch_step = t_batch / max(steps) * 1e3
    per_run_step = t_seq / sum(steps) * 1e3
    return (f"at most total steps / longest run = {bound:.1f}x, since the batch steps until its slowest run stops; "
            f"a batch step costs {per_batch_step:.2f} ms against {per_run_step:.2f} ms for one run's step, "
            "the arithmetic of the runs still in the batch")


@register("batched", "(d) the L sweep (30 runs) batched vs one after another", order=4)
def batched(size: Size) -> dict:
    cfgs = sweep_configs(size)
    many, one, many2, t_seq, t_batch = together_and_alone(cfgs)  # batched before and after the sequential runs
    identical = all(same_run(a, b) for a, b in zip(one, many, strict=True)) and all(
        same_run(a, b) for a, b in zip(many, many2, strict=True)
    )
    steps = [r.summary["steps"] for r in one]
    row = {
        "runs": len(cfgs), "total steps": int(sum(steps)), "longest run (steps)": int(max(steps)),
        "one after another s": t_seq, "batched s (mean of 2)": t_batch, "speedup": t_seq / t_batch,
        "identical metrics and summaries": identical,
    }
    return {
        "rows": [row],
        "targets": [
            Target("(d) batched L sweep speedup", t_seq / t_batch, ">=", 5.0, "x",
                   why=_why_slower(steps, t_batch, t_seq)).as_dict(),
            Target("(d) batched results identical (1 = yes)", float(identical), ">=", 1.0,
                   why="" if identical or size.device == "cpu" else CUDA_WHY).as_dict(),
        ],
        "notes": ["one process, the same thread count; batched timed before and after the sequential runs "
                  "(their mean), to average out load on a shared machine"],
    }
