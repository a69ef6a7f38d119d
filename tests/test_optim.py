"""The run's optimizers (optim.py) against torch.optim's on the CPU: the same numbers, bit for bit."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from lipschitz_icl.optim import PlainAdam, PlainSGD, make_optimizer


def _trajectory(make, dtype: torch.dtype, steps: int = 60) -> list[torch.Tensor]:
    """Two parameters trained on seeded gradients (one skips every third step: no gradient)."""
    gen = torch.Generator().manual_seed(3)
    params = [torch.randn(4, 3, generator=gen, dtype=dtype).requires_grad_(),
              torch.randn(5, generator=gen, dtype=dtype).requires_grad_()]
    opt = make(params)
    for t in range(steps):
        for j, p in enumerate(params):
            p.grad = None if (j == 1 and t % 3 == 0) else torch.randn(p.shape, generator=gen, dtype=dtype) * 10**(t % 4)
        opt.step()
    return [p.detach().clone() for p in params]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize(("ours", "theirs"), [
    (lambda ps: PlainAdam(ps, lr=0.03), lambda ps: torch.optim.Adam(ps, lr=0.03)),
    (lambda ps: PlainSGD(ps, lr=0.07), lambda ps: torch.optim.SGD(ps, lr=0.07)),
], ids=["adam", "sgd"])
def test_the_same_numbers_as_torch_optim_bit_for_bit(ours, theirs, dtype):
    mine, torchs = _trajectory(ours, dtype), _trajectory(theirs, dtype)
    assert all(torch.equal(a, b) for a, b in zip(mine, torchs, strict=True))
    assert not torch.equal(mine[0], _trajectory(lambda ps: PlainAdam(ps, lr=0.031), dtype)[0])  # it can differ


def test_make_optimizer_picks_adam_or_plain_steps():
    p = [torch.zeros(2, requires_grad=True)]
    assert type(make_optimizer("adam", p, 0.1)) is PlainAdam
    assert type(make_optimizer("sgd", p, 0.1)) is PlainSGD and type(make_optimizer("gd", p, 0.1)) is PlainSGD


def test_constructing_and_stepping_does_not_import_dynamo():
    code = ("import sys, torch; from lipschitz_icl.optim import PlainAdam; p = torch.zeros(3, requires_grad=True); "
            "p.grad = torch.ones(3); PlainAdam([p], 0.1).step(); print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "False"
