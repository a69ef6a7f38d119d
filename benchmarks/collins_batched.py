"""Where does stepping sampled-engine runs together pay? (docs/PERFORMANCE.md, "A batched sampled path for the
Collins runs": the measurement behind ``engines/sampled_batch.STACK_TOKENS`` and ``STACK_RUNS``).

R runs of one Collins setting (``papers/collins2024/sweep.collins_config``: reduced softmax attention, d = 3, N
context tokens on the sphere, ReLU-network labels with noise tau, Adam on B fresh prompts a step, the draws in
float32 and the model in float64), seeds 0..R-1, are stepped S times two ways from the same engines the toolkit
builds:

- one run at a time, as ``train.train`` steps them: ``engine.forward_backward()`` then ``optim.PlainAdam``;
- all R at once, as ``train_stacked`` steps them: ``SampledBatch.forward_backward(rows)`` (each run's draws on its
  own generator, the functions of all R evaluated in one call, one forward and backward from the logits to the
  losses, each run's products with its Q alone) then each run's own ``PlainAdam`` step.

Prints microseconds per run-step of each (and of the per-run draws alone, the part that stays per run), their
ratio, and whether the final Q are equal bit for bit (they must be). The step alone: the stopping rules, test errors
and records are the same code on both paths (``train.observe_step``); ``lipschitz-icl bench --only stacked`` times
whole runs.

    PYTHONPATH=src python benchmarks/collins_batched.py [R] [S] [B] [N]   # default 8 runs, 100 steps, 512, 32
"""

import sys
import time

import torch

from lipschitz_icl.api import prepare
from lipschitz_icl.config import load_config
from lipschitz_icl.engines.prompts import draw_inputs
from lipschitz_icl.engines.sampled_batch import SampledBatch
from lipschitz_icl.optim import PlainAdam

STEPS = ["features.kind=sphere", "features.d=3", "task.kind=relu_net", "task.L=4", "task.label_noise=0.5",
         "model.kind=reduced", "engine.kind=sampled", "engine.resample=true", "prompt.draw_dtype=float32",
         "train.optimizer=adam", "train.lr=0.1", "train.eps=1e-9", "eval.functions=64"]  # collins_config's run


def engines(R: int, B: int, N: int) -> list:
    cfgs = [load_config(None, [*STEPS, f"engine.batch={B}", f"prompt.N={N}", f"seed={s}"]) for s in range(R)]
    return [prepare(c)[1] for c in cfgs]


def one_at_a_time(built: list, S: int) -> tuple[float, torch.Tensor]:
    t0 = time.perf_counter()
    for engine in built:
        opt = PlainAdam(engine.parameters(), 0.1)
        for _ in range(S):
            engine.forward_backward()
            opt.step()
    return time.perf_counter() - t0, torch.stack([e.model.Q.detach() for e in built])


def draws_only(built: list, S: int) -> float:
    t0 = time.perf_counter()
    for engine in built:
        for _ in range(S):
            draw_inputs(engine.fs, engine.task, engine.N, engine.B, engine.tau, engine.gen, engine.draw_dtype)
    return time.perf_counter() - t0


def batched(built: list, S: int) -> tuple[float, torch.Tensor]:
    stacked = SampledBatch(built)
    rows = list(range(len(built)))
    opts = [PlainAdam(e.parameters(), 0.1) for e in built]
    t0 = time.perf_counter()
    for _ in range(S):
        stacked.forward_backward(rows)
        for opt in opts:
            opt.step()
    return time.perf_counter() - t0, torch.stack([e.model.Q.detach() for e in built])


def main() -> None:
    R, S, B, N = (int(a) for a in (sys.argv[1:] + ["8", "100", "512", "32"][len(sys.argv) - 1:]))
    torch.set_num_threads(1)
    one_at_a_time(engines(R, B, N), 3)
    batched(engines(R, B, N), 3)  # warm both paths
    t_loop, Q_loop = one_at_a_time(engines(R, B, N), S)
    t_batch, Q_batch = batched(engines(R, B, N), S)
    t_draw = draws_only(engines(R, B, N), S)
    per = 1e6 / (R * S)
    print(f"R={R} runs x S={S} steps, B={B} prompts, N={N}: one at a time {t_loop * per:.0f} us per run-step, "
          f"together {t_batch * per:.0f} us ({t_loop / t_batch:.2f}x); the per-run draws alone {t_draw * per:.0f} us; "
          f"final Q equal bit for bit: {torch.equal(Q_batch, Q_loop)}")


if __name__ == "__main__":
    main()
