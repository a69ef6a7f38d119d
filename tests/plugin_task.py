"""A task class registered from outside the package, as a user would (see docs/EXTENDING.md)."""

import torch

from lipschitz_icl import TaskClass, register_task


@register_task
class Tanh(TaskClass):
    """f(x) = L tanh(w^T x) with ||w|| = 1: Lipschitz constant L."""

    name = "test_tanh"
    defaults = {"scale": 1.0}

    def sample(self, n, gen, dtype, device="cpu"):
        w = torch.randn(n, self.d, generator=gen, dtype=dtype)
        return {"w": w / w.norm(dim=1, keepdim=True)}

    def evaluate(self, funcs, x):
        return self.L * torch.tanh(self.params["scale"] * torch.einsum("nmd,nd->nm", x, funcs["w"]))


@register_task
class Broken(TaskClass):
    """Returns NaN: the sampled engine must catch and name it."""

    name = "test_broken"

    def sample(self, n, gen, dtype, device="cpu"):
        return {"w": torch.zeros(n, 1, dtype=dtype)}

    def evaluate(self, funcs, x):
        return torch.full(x.shape[:2], float("nan"), dtype=x.dtype)


@register_task
class NanLater(TaskClass):
    """Fine for its first ``good_calls`` evaluations, then NaN: a fault that appears mid-training."""

    name = "test_nan_later"
    defaults = {"good_calls": 6}

    def __init__(self, L, d, **params):
        super().__init__(L, d, **params)
        self.calls = 0

    def sample(self, n, gen, dtype, device="cpu"):
        w = torch.randn(n, self.d, generator=gen, dtype=dtype)
        return {"w": w / w.norm(dim=1, keepdim=True)}

    def evaluate(self, funcs, x):
        self.calls += 1
        y = self.L * torch.einsum("nmd,nd->nm", x, funcs["w"])
        return y if self.calls <= self.params["good_calls"] else y * float("nan")
