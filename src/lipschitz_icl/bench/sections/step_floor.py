"""(i) the quickstart's kernel step against a floor measured in the same run.

The floor is one elementwise pass over the step's largest data, the (R, K, B) count draws
(``torch.mul(counts, counts, out=buf)``: one operator call, its dispatch included); a step needs
at least that. The step is ``common.kernel_step``: loss, Attn_k, the closed-form gradient, the
host read of the losses and the update, as the trainer does it, for one run and per run of a
batch of 30 (the L sweep's size).
"""

from __future__ import annotations

import torch

from ...api import prepare
from ...engines.kernel_batch import KernelBatch
from ..common import config, kernel_step, synced
from ..registry import Size, Target, register
from ..timing import time_interleaved

QUICKSTART = ["task.L=2", "train.lr=1"]  # the defaults are the quickstart's K = 5, d = 5, N = 50, B = 256


def _batch_step(runs: int, device: str):
    engines = [prepare(config([*QUICKSTART, f"seed={s}"], device))[1] for s in range(runs)]
    batch = KernelBatch([e.spec for e in engines], [1.0] * runs)

    def step() -> None:
        out = batch.step(False)
        torch.stack([out.loss, out.attn_self.amin(-1)]).tolist()
        batch.update()

    return step, batch


def _floor(counts: torch.Tensor):
    buf = torch.empty_like(counts)
    return lambda: torch.mul(counts, counts, out=buf)


@register("step_floor", "(i) the quickstart kernel step as a multiple of a floor measured in the same run", order=1.5)
def step_floor(size: Size) -> dict:
    runs = size.pick(30, 30, 4)
    one, batch1 = kernel_step(config(QUICKSTART, size.device))
    many, batch_r = _batch_step(runs, size.device)
    fns = [synced(f, size.device) for f in (one, _floor(batch1.counts), many, _floor(batch_r.counts))]
    t_one, f_one, t_many, f_many = time_interleaved(fns, rounds=size.pick(7, 5, 2), min_s=size.pick(0.05, 0.02, 0.002))
    rows = [
        {"step": "one run (R = 1)", "K": batch1.counts.shape[1], "B": batch1.counts.shape[2],
         "step ms": t_one.wall_s * 1e3, "floor ms": f_one.wall_s * 1e3, "step / floor": t_one.wall_s / f_one.wall_s},
        {"step": f"batch of {runs} (per batch step)", "K": batch_r.counts.shape[1], "B": batch_r.counts.shape[2],
         "step ms": t_many.wall_s * 1e3, "floor ms": f_many.wall_s * 1e3,
         "step / floor": t_many.wall_s / f_many.wall_s},
    ]
    ratio = rows[0]["step / floor"]
    why = ("the step is ~67 operator calls of 1-3 microseconds each (docs/PERFORMANCE.md, 'Where the time "
           "of a kernel step goes'); no fused step exists yet") if ratio > 10 else ""
    return {
        "rows": rows,
        "targets": [
            Target("(i) quickstart step (R = 1) / floor", ratio, "<=", 10.0, "x", why).as_dict(),
            Target("(i) unfused step / fused step", None, ">=", 3.0, "x",
                   "not measured: no fused step has been written (the step is unchanged)").as_dict(),
        ],
        "notes": ["floor: one elementwise multiply over the (R, K, B) count draws, out= a preallocated buffer; "
                  "fastest of interleaved rounds, one torch thread; on cuda each call (floor too) ends with a "
                  "wait for the device, so the floor there is one kernel launch and one synchronisation"],
    }
