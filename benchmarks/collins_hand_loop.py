"""A hand-written float64 PyTorch loop of the toolkit's sampled-engine run in the Collins configuration.

The same math and the same random streams as

    lipschitz-icl run features.kind=sphere features.d=3 prompt.N=32 task.kind=relu_net model.kind=reduced \
        engine.kind=sampled engine.batch=512 train.optimizer=adam train.steps=400 train.log_every=40 \
        eval.functions=2048 --out /tmp/collinsX

written as one would by hand (plain torch, no lipschitz_icl import, no recorder), so that the two can be
timed whole process against whole process and their numbers compared:

- tokens x uniform on S^{d-1} (d = 3), N = 32 context tokens and one query per prompt;
- f(x) = W2 relu(W1 x + b1), width h = 32, W2 rescaled so that ||W2||_2 ||W1||_2 = L = 2; labels y_i = f(x_i)
  (no label noise);
- the reduced model y_hat = sum_i y_i softmax_i(x_i^T Q x_q), Q^(0) = 0;
- loss 1/2 mean (y_hat - f(x_q))^2 on one fixed batch of B = 512 prompts (Adam's default: no resampling),
  Adam with eta = 1, steps 0..400 (400 updates), stop early if the loss reaches eps = 1e-3;
- test error (the same loss, no gradient) on 2048 prompts of unseen functions every 40 steps and at the last.

Random streams: a generator per (seed, stream name), seeded by the first 8 bytes of sha256("seed:stream"):
"prompts" draws the training batch, "test" the test prompts (tokens first, then W1, b1, W2).

Run (from the repository root):

    python benchmarks/collins_hand_loop.py                 # hand Adam (no torch._dynamo import)
    python benchmarks/collins_hand_loop.py --optim torch   # torch.optim.Adam
    python benchmarks/collins_hand_loop.py --json out.json # also write the numbers

Prints the test error at each recorded step, the final training loss and the final test error.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math

import torch

SEED = 0
D = 3  # input dimension d
N = 32  # context tokens per prompt
WIDTH = 32  # hidden width h of the ReLU networks
L = 2.0  # Lipschitz bound L of the task class
BATCH = 512  # training prompts B
TEST = 2048  # test prompts (unseen functions)
LR = 1.0  # Adam step size eta
STEPS = 400
LOG_EVERY = 40
EPS = 1e-3  # target loss epsilon (the run stops when the loss reaches it)
DTYPE = torch.float64


def generator(seed: int, stream: str) -> torch.Generator:
    """The CPU generator of one named random stream: seeded by sha256("seed:stream")[:8]."""
    digest = hashlib.sha256(f"{seed}:{stream}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") & (2**63 - 1))


def draw_prompts(B: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """B prompts: tokens x (B, N + 1, d) on the sphere (the last is the query) and labels f(x) (B, N + 1)."""
    z = torch.randn(B, N + 1, D, generator=gen, dtype=DTYPE)
    x = z / z.norm(dim=-1, keepdim=True)  # uniform on S^{d-1}
    W1 = torch.randn(B, WIDTH, D, generator=gen, dtype=DTYPE) / math.sqrt(D)
    b1 = torch.randn(B, WIDTH, generator=gen, dtype=DTYPE) / math.sqrt(D)
    W2 = torch.randn(B, WIDTH, generator=gen, dtype=DTYPE) / math.sqrt(WIDTH)
    bound = W2.norm(dim=1) * torch.linalg.matrix_norm(W1, ord=2)  # ||W2|| ||W1||_2
    W2 = W2 * (L / bound).unsqueeze(1)  # certified bound ||W2|| ||W1||_2 = L
    hidden = torch.relu(torch.einsum("nhd,nmd->nmh", W1, x) + b1.unsqueeze(1))
    return x, torch.einsum("nmh,nh->nm", hidden, W2)  # y = f(x)


def loss_fn(Q: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """1/2 mean (y_hat - f(x_q))^2 with y_hat = sum_i y_i softmax_i(x_i^T Q x_q)."""
    x_ctx, x_q = x[:, :-1], x[:, -1]
    mx = x_q @ Q.T  # Q x_q, (B, d)
    logits = torch.bmm(x_ctx, mx.unsqueeze(-1)).squeeze(-1)  # x_i^T Q x_q, (B, N)
    y_hat = (torch.softmax(logits, dim=-1) * y[:, :-1]).sum(-1)
    return 0.5 * (y_hat - y[:, -1]).square().mean()


class HandAdam:
    """Adam (betas 0.9, 0.999, eps 1e-8) as torch's single-tensor CPU path computes it, for one parameter.
    The weights are 1 - beta in floating point (1 - 0.999 is not 0.001), as torch passes them."""

    beta1, beta2, eps = 0.9, 0.999, 1e-8

    def __init__(self, p: torch.Tensor, lr: float) -> None:
        self.p, self.lr, self.t = p, lr, 0
        self.m, self.v = torch.zeros_like(p), torch.zeros_like(p)  # first and second moments

    @torch.no_grad()
    def step(self) -> None:
        g, self.t = self.p.grad, self.t + 1
        b1, b2 = self.beta1, self.beta2
        self.m.lerp_(g, 1 - b1)  # m <- beta1 m + (1 - beta1) g
        self.v.mul_(b2).addcmul_(g, g, value=1 - b2)  # v <- beta2 v + (1 - beta2) g^2
        denom = (self.v.sqrt() / (1 - b2**self.t) ** 0.5).add_(self.eps)  # sqrt(v / (1 - beta2^t)) + eps
        self.p.addcdiv_(self.m, denom, value=-self.lr / (1 - b1**self.t))  # Q <- Q - eta m / (1 - beta1^t) / denom


def train(optim: str) -> tuple[float, dict[int, float], torch.Tensor]:
    """Full-batch Adam from Q^(0) = 0; returns the loss at the last step, the test error at each logged step
    and the final Q."""
    x, y = draw_prompts(BATCH, generator(SEED, "prompts"))
    x_test, y_test = draw_prompts(TEST, generator(SEED, "test"))
    Q = torch.zeros(D, D, dtype=DTYPE, requires_grad=True)  # Q, the merged key-query matrix
    opt = torch.optim.Adam([Q], lr=LR) if optim == "torch" else HandAdam(Q, LR)
    test_errors: dict[int, float] = {}
    for step in range(STEPS + 1):
        Q.grad = None
        loss = loss_fn(Q, x, y)
        loss.backward()
        value = float(loss.detach())
        done = value <= EPS or step == STEPS
        if step % LOG_EVERY == 0 or done:
            with torch.no_grad():
                test_errors[step] = float(loss_fn(Q, x_test, y_test))
        if done:
            return value, test_errors, Q.detach()
        opt.step()
    raise AssertionError("unreachable")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--optim", choices=("hand", "torch"), default="hand", help="Adam: hand-written or torch.optim")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the toolkit uses 1)")
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    final_loss, test_errors, Q = train(args.optim)
    for step, err in test_errors.items():
        print(f"step {step:4d}  test_error {err!r}")
    print(f"final_loss {final_loss!r}")
    print(f"final_test_error {test_errors[max(test_errors)]!r}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"final_loss": final_loss, "test_error": test_errors, "Q": Q.tolist()}, f)


if __name__ == "__main__":
    main()
