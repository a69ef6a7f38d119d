"""Would a batched path across runs pay for the Collins suite's sampled-engine runs? (docs/PERFORMANCE.md, "A batched
sampled path for the Collins runs").

R runs of one Collins setting (``papers/collins2024/sweep.collins_config``: reduced softmax attention, d = 3, N
context tokens on the sphere, ReLU-network labels with noise tau, Adam on B fresh prompts a step, the draws in
float32 and the model in float64), seeds 0..R-1, are stepped S times two ways from the same engines the toolkit
builds:

- one run at a time, as ``train.train`` steps them: ``engine.forward_backward()`` then ``optim.PlainAdam``;
- all R at once: each run's prompts drawn from its own generator in the same order (ids, tokens, functions, label
  noise: the draws stay per run, since each run's stream is its own), then the functions of all R evaluated in one
  call, the R models' forward and backward in one batched pass over the stacked Q (R, d, d), one Adam step on it.

Prints microseconds per run-step of each (and of the per-run draws alone, the part a batch cannot share), their
ratio, and the largest difference of the final Q (relative). Measures the step alone: a batched sampled trainer
would also need the stopping rules, records and test errors per run, which are not written.

    PYTHONPATH=src python benchmarks/collins_batched.py [R] [S] [B] [N]   # default 8 runs, 100 steps, 512, 32
"""

import sys
import time

import torch

from lipschitz_icl.api import prepare
from lipschitz_icl.config import load_config
from lipschitz_icl.optim import PlainAdam
from lipschitz_icl.rng import normals

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


def _draws(engine) -> tuple:
    """One run's draws for a step, in draw_prompts' order on its own generator: ids, tokens, functions, noise."""
    fs, task, gen, at = engine.fs, engine.task, engine.gen, engine.draw_dtype
    ids = fs.sample_ids((engine.B, engine.N + 1), gen)
    x = fs.tokens(ids, gen, at)
    funcs = task.sample(engine.B, gen, at)
    noise = engine.tau * normals((engine.B, engine.N), gen, x.dtype, at)
    return x, funcs, noise


def draws_only(built: list, S: int) -> float:
    t0 = time.perf_counter()
    for engine in built:
        for _ in range(S):
            _draws(engine)
    return time.perf_counter() - t0


def batched(built: list, S: int) -> tuple[float, torch.Tensor]:
    R, B, N, task, at = len(built), built[0].B, built[0].N, built[0].task, built[0].draw_dtype
    Q = torch.zeros(R, 3, 3, dtype=torch.float64, requires_grad=True)  # Q^(0) = 0, as the engines' models
    opt = PlainAdam([Q], 0.1)
    t0 = time.perf_counter()
    for _ in range(S):
        parts = [_draws(e) for e in built]
        x = torch.cat([p[0] for p in parts])  # (R B, N + 1, d)
        funcs = {k: torch.cat([p[1][k] for p in parts]) for k in parts[0][1]}
        y = task.evaluate(funcs, x.to(at or x.dtype)).to(x.dtype).view(R, B, N + 1)  # in the draws' dtype
        y = torch.cat([y[..., :N] + torch.stack([p[2] for p in parts]), y[..., N:]], dim=-1)
        x = x.view(R, B, N + 1, 3)
        Q.grad = None
        mx = torch.einsum("rbe,rde->rbd", x[:, :, -1], Q)  # Q x_q per run
        logits = torch.einsum("rbnd,rbd->rbn", x[:, :, :-1], mx)  # x_i^T Q x_q
        y_hat = (torch.softmax(logits, dim=-1) * y[..., :-1]).sum(-1)
        (0.5 * (y_hat - y[..., -1]).square().mean(-1)).sum().backward()  # each run's loss; their sum's gradient
        opt.step()
    return time.perf_counter() - t0, Q.detach().clone()


def main() -> None:
    R, S, B, N = (int(a) for a in (sys.argv[1:] + ["8", "100", "512", "32"][len(sys.argv) - 1:]))
    torch.set_num_threads(1)
    one_at_a_time(engines(R, B, N), 3)
    batched(engines(R, B, N), 3)  # warm both paths
    t_loop, Q_loop = one_at_a_time(engines(R, B, N), S)
    t_batch, Q_batch = batched(engines(R, B, N), S)
    t_draw = draws_only(engines(R, B, N), S)
    per = 1e6 / (R * S)
    diff = float((Q_batch - Q_loop).abs().max() / Q_loop.abs().max())
    print(f"R={R} runs x S={S} steps, B={B} prompts, N={N}: one at a time {t_loop * per:.0f} us per run-step, "
          f"batched {t_batch * per:.0f} us ({t_loop / t_batch:.2f}x); the per-run draws alone {t_draw * per:.0f} us; "
          f"final Q max rel diff {diff:.1e}")


if __name__ == "__main__":
    main()
