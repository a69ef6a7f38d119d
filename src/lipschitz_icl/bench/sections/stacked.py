"""(l) small sampled-engine runs of one shape stepped together (``run_many``, ``train_stacked``) against the same
runs one after another (``api.run``), whole runs: draws, steps, stopping rules, test errors and records."""

from __future__ import annotations

from ...config import load_config
from ..common import same_run, together_and_alone
from ..registry import Size, Target, register

# the Collins suite's runs (papers/collins2024/sweep.collins_config): sphere inputs, relu_net labels with noise, Adam
# on fresh prompts, the draws in float32
COLLINS = ["features.kind=sphere", "features.d=3", "task.kind=relu_net", "task.L=4", "task.label_noise=0.5",
           "engine.kind=sampled", "engine.resample=true", "prompt.draw_dtype=float32", "train.optimizer=adam",
           "train.lr=0.1", "train.eps=1e-9"]
CASES = {  # name -> (prompts a step B, context N, runs, steps): where stacking pays most, and the quick suite's size
    "32 prompts, N = 16": (32, 16, 16, 300),
    "128 prompts, N = 32 (the quick Collins size)": (128, 32, 5, 300),
}


def case_configs(B: int, N: int, runs: int, steps: int, device: str) -> list:
    """``runs`` seeds of one Collins setting at B prompts of N context tokens, logged every steps / 10."""
    return [load_config(None, [*COLLINS, f"engine.batch={B}", f"prompt.N={N}", f"train.steps={steps}",
                               f"train.log_every={max(1, steps // 10)}", "eval.functions=256", f"seed={s}",
                               f"engine.device={device}"]) for s in range(runs)]


def _row(name: str, cfgs: list) -> dict:
    """One case: stacked before and after the runs one after another (their mean), and whether every number agrees."""
    stacked, alone, _, t_alone, t_stacked = together_and_alone(cfgs)
    identical = all(same_run(a, b, params=True) for a, b in zip(alone, stacked, strict=True))
    return {"case": name, "runs": len(cfgs), "steps": cfgs[0].train.steps, "one after another s": t_alone,
            "stepped together s (mean of 2)": t_stacked, "speedup": t_alone / t_stacked,
            "identical metrics, summaries and parameters": identical}


@register("stacked", "(l) small sampled runs of one shape stepped together vs one after another", order=4.2)
def stacked(size: Size) -> dict:
    rows = []
    for name, (B, N, runs, steps) in CASES.items():
        runs, steps = size.pick((runs, steps), (runs, steps), (min(runs, 4), 20))
        rows.append(_row(name, case_configs(B, N, runs, steps, size.device)))
    small, quick = rows
    identical = all(r["identical metrics, summaries and parameters"] for r in rows)
    return {
        "rows": rows,
        "targets": [
            Target("(l) small sampled runs stepped together, speedup", small["speedup"], ">=", 1.3, "x").as_dict(),
            Target("(l) the quick Collins size stepped together, speedup", quick["speedup"], ">=", 1.0, "x").as_dict(),
            Target("(l) stepped-together results identical (1 = yes)", float(identical), ">=", 1.0).as_dict(),
        ],
        "notes": ["one process, the same thread count; stacked runs timed before and after the runs alone (their "
                  "mean). Above 4,608 tokens a step (sampled_batch.STACK_TOKENS) runs are not stacked: slower there"],
    }
