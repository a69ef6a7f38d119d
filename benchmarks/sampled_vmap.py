"""Would a ``torch.func.vmap`` path pay for the sampled engine? (docs/PERFORMANCE.md, "A sweep at scale").

R quickstart-size sampled-engine runs (reduced softmax attention, full-batch gradient descent on each run's own
fixed B prompts: ``engine.batch``, 1024 by default) stepped S times two ways, from the same engines the toolkit builds:

- one run at a time, as ``train.train`` steps them: ``engine.forward_backward()`` then the SGD update;
- all R at once: ``torch.func.vmap(torch.func.grad_and_value(loss))`` over the stacked Q and prompts.

Prints seconds per run-step of each, their ratio, and the largest difference of the final Q (relative).
Measures the step alone: a batched sampled trainer would also need the stopping rules, records and test
errors per run (what ``train_batch`` does for the kernel engine), which are not written.

    PYTHONPATH=src python benchmarks/sampled_vmap.py [R] [S] [B]   # default 400 runs, 100 steps, 1024 prompts
"""

import sys
import time

import numpy as np
import torch

import lipschitz_icl as li
from lipschitz_icl.api import prepare


def engines(R: int, B: int) -> tuple[list, list[float]]:
    grid = [(float(L), float(lr)) for L in np.logspace(-0.5, 1, 10) for lr in np.logspace(-0.5, 1.5, 10)]
    cfgs = [li.load_config("configs/quickstart.yaml", ["engine.kind=sampled", f"engine.batch={B}", f"task.L={L}",
                                                       f"train.lr={lr}", f"seed={i // len(grid)}"])
            for i, (L, lr) in enumerate(grid * (R // len(grid) + 1))][:R]
    return [prepare(c)[1] for c in cfgs], [c.train.lr for c in cfgs]


def loop(built: list, lrs: list[float], S: int) -> tuple[float, torch.Tensor]:
    t0 = time.perf_counter()
    for engine, lr in zip(built, lrs, strict=True):
        Q = engine.model.Q
        for _ in range(S):
            engine.forward_backward()
            with torch.no_grad():
                Q -= lr * Q.grad
    return time.perf_counter() - t0, torch.stack([e.model.Q.detach() for e in built])


def loss(Q: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """One run's loss: 1/2 mean_b (sum_i softmax_i(x_i^T Q x_q) y_i - f(x_q))^2, as ReducedAttention computes it."""
    mx = x[:, -1] @ Q.T  # (B, d): Q x_q
    logits = torch.bmm(x[:, :-1], mx.unsqueeze(-1)).squeeze(-1)
    y_hat = (torch.softmax(logits, dim=-1) * y[:, :-1]).sum(-1)
    return 0.5 * (y_hat - y[:, -1]).square().mean()


def vmapped(built: list, lrs: list[float], S: int) -> tuple[float, torch.Tensor]:
    x = torch.stack([e.batch.x for e in built])
    y = torch.stack([e.batch.y for e in built])
    Q = torch.stack([e.model.Q.detach() for e in built])
    eta = torch.tensor(lrs, dtype=Q.dtype).view(-1, 1, 1)
    step = torch.func.vmap(torch.func.grad_and_value(loss))
    t0 = time.perf_counter()
    for _ in range(S):
        grad, _ = step(Q, x, y)
        Q = Q - eta * grad
    return time.perf_counter() - t0, Q


def main(R: int, S: int, B: int) -> None:
    torch.set_num_threads(1)
    t_loop, Q_loop = loop(*engines(R, B), S)
    t_vmap, Q_vmap = vmapped(*engines(R, B), S)
    scale = Q_loop.abs().amax(dim=(1, 2), keepdim=True).clamp(min=1e-300)
    print(f"{R} runs x {S} steps, {B} prompts each: one at a time {t_loop / (R * S) * 1e6:.1f} us per run-step, vmap "
          f"{t_vmap / (R * S) * 1e6:.1f} us ({t_loop / t_vmap:.1f}x); final Q differs by "
          f"{float(((Q_loop - Q_vmap).abs() / scale).max()):.1e} (relative)")


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:4]]
    main(*args, *(400, 100, 1024)[len(args):])
