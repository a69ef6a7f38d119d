"""Task classes for the sweep reliability tests: one that kills its process (standing for an OOM
kill or a segfault), one that raises with rich markup in its message, and a healthy one whose
``fate`` parameter picks one of these behaviours (the chaos test)."""

import os

import torch

from lipschitz_icl import TaskClass, register_task


def _unit_rows(n, d, gen, dtype):
    w = torch.randn(n, d, generator=gen, dtype=dtype)
    return {"w": w / w.norm(dim=1, keepdim=True)}


@register_task
class Fated(TaskClass):
    """f(x) = L wᵀx, unless ``fate`` says otherwise: ``exit`` ends the process with code 137 as the
    kernel is sampled, ``raise`` raises an error whose text holds rich markup."""

    name = "test_fated"
    defaults = {"fate": "ok"}

    def sample(self, n, gen, dtype, device="cpu"):
        if self.params["fate"] == "exit":
            os._exit(137)
        if self.params["fate"] == "raise":
            raise RuntimeError("disk [Errno 28] full [/x] [bold]")
        return _unit_rows(n, self.d, gen, dtype)

    def evaluate(self, funcs, x):
        return self.L * torch.einsum("nmd,nd->nm", x, funcs["w"])
