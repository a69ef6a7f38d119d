"""The built-in task classes: linear, relu_net, rbf, sinusoid, norm."""

from __future__ import annotations

import math

import torch

from ..rng import normals
from .base import Funcs, TaskClass, register_task
from .spectral import spectral_norm


@register_task
class Linear(TaskClass):
    """f(x) = w^T x, w uniform on the sphere of radius L."""

    name = "linear"
    rotation_invariant = True  # w, W1, centres, omega, c: isotropic laws

    def sample(self, n, gen, dtype, device="cpu") -> Funcs:
        w = normals((n, self.d), gen, dtype, device=device)
        return {"w": self.L * w / w.norm(dim=1, keepdim=True)}

    def evaluate(self, funcs, x):
        return torch.einsum("nmd,nd->nm", x, funcs["w"])

    def lipschitz(self, funcs):
        return funcs["w"].norm(dim=1)

    def exact_kernel(self, V):
        return (self.L**2 / self.d) * (V.T @ V)  # E[w w^T] = (L^2/d) I


@register_task
class ReluNet(TaskClass):
    """f(x) = W2 relu(W1 x + b1), rescaled so that ||W2||_2 ||W1||_2 = L."""

    name = "relu_net"
    rotation_invariant = True  # w, W1, centres, omega, c: isotropic laws
    defaults = {"width": 32, "bias": 1.0}

    def sample(self, n, gen, dtype, device="cpu") -> Funcs:
        h, d = self.params["width"], self.d
        W1 = normals((n, h, d), gen, dtype, device=device) / math.sqrt(d)
        b1 = self.params["bias"] * normals((n, h), gen, dtype, device=device) / math.sqrt(d)
        W2 = normals((n, h), gen, dtype, device=device) / math.sqrt(h)
        bound = W2.norm(dim=1) * spectral_norm(W1)
        return {"W1": W1, "b1": b1, "W2": W2 * (self.L / bound).unsqueeze(1)}

    def evaluate(self, funcs, x):
        # one (n, m, h) hidden tensor, the bias added by the batched product itself and the ReLU in place: a
        # 512-prompt batch's 4 MB is allocated (and page-faulted) once, not three times (the Collins step's labels)
        hidden = torch.baddbmm(funcs["b1"].unsqueeze(1), x, funcs["W1"].transpose(1, 2)).relu_()
        return (hidden @ funcs["W2"].unsqueeze(2)).squeeze(2)

    def lipschitz(self, funcs):
        return funcs["W2"].norm(dim=1) * spectral_norm(funcs["W1"])

    def elements(self, n, m):
        h = self.params["width"]
        return n * h * (self.d + 2) + n * m * (self.d + h)  # W1 (n, h, d) and the hidden layer (n, m, h)


@register_task
class RBF(TaskClass):
    """f(x) = sum_j a_j exp(-||x - c_j||^2 / (2 s^2)), scaled to the certified bound
    e^{-1/2} / s * sum_j |a_j| = L."""

    name = "rbf"
    rotation_invariant = True  # w, W1, centres, omega, c: isotropic laws
    defaults = {"centers": 8, "width": 0.5, "spread": 1.0}

    def sample(self, n, gen, dtype, device="cpu") -> Funcs:
        J, d = self.params["centers"], self.d
        c = self.params["spread"] * normals((n, J, d), gen, dtype, device=device) / math.sqrt(d)
        a = normals((n, J), gen, dtype, device=device)
        bound = a.abs().sum(1) * math.exp(-0.5) / self.params["width"]
        return {"c": c, "a": a * (self.L / bound).unsqueeze(1)}

    def evaluate(self, funcs, x):
        s = self.params["width"]
        r2 = torch.cdist(x, funcs["c"]) ** 2  # (n, m, J)
        return torch.einsum("nmj,nj->nm", torch.exp(-r2 / (2 * s * s)), funcs["a"])

    def lipschitz(self, funcs):
        return funcs["a"].abs().sum(1) * math.exp(-0.5) / self.params["width"]

    def elements(self, n, m):
        J = self.params["centers"]
        return n * J * (self.d + 1) + n * m * (self.d + J)  # centres (n, J, d) and distances (n, m, J)


@register_task
class Sinusoid(TaskClass):
    """f(x) = L / ||omega|| * sin(omega^T x + phi), omega ~ N(0, freq^2 I / d), phi ~ U[0, 2 pi)."""

    name = "sinusoid"
    rotation_invariant = True  # w, W1, centres, omega, c: isotropic laws
    defaults = {"freq": 2.0}

    def sample(self, n, gen, dtype, device="cpu") -> Funcs:
        omega = self.params["freq"] * normals((n, self.d), gen, dtype, device=device) / math.sqrt(self.d)
        phi = 2 * math.pi * torch.rand(n, generator=gen, dtype=dtype, device=device)
        return {"omega": omega, "phi": phi}

    def evaluate(self, funcs, x):
        omega = funcs["omega"]
        arg = torch.einsum("nmd,nd->nm", x, omega) + funcs["phi"].unsqueeze(1)
        return (self.L / omega.norm(dim=1)).unsqueeze(1) * torch.sin(arg)


@register_task
class Norm(TaskClass):
    """f(x) = L ||x - c||, c ~ N(0, spread^2 I / d)."""

    name = "norm"
    rotation_invariant = True  # w, W1, centres, omega, c: isotropic laws
    defaults = {"spread": 1.0}

    def sample(self, n, gen, dtype, device="cpu") -> Funcs:
        c = self.params["spread"] * normals((n, self.d), gen, dtype, device=device) / math.sqrt(self.d)
        return {"c": c}

    def evaluate(self, funcs, x):
        return self.L * (x - funcs["c"].unsqueeze(1)).norm(dim=-1)


@register_task
class AnisoLinear(TaskClass):
    """f(x) = L w^T x / ||w|| with w = D z, z ~ N(0, I_d), D = diag(decay^(j / (d - 1))): a linear class whose
    directions favour the first input axes (not rotation-invariant, so on orthonormal features Sigma is not
    a I + b 1 1^T). ||w / ||w|| || = 1, so every f is exactly L-Lipschitz."""

    name = "aniso_linear"
    defaults = {"decay": 0.25}

    def axis_scales(self, dtype: torch.dtype, device="cpu") -> torch.Tensor:
        j = torch.arange(self.d, dtype=dtype, device=device)
        return self.params["decay"] ** (j / max(self.d - 1, 1))

    def sample(self, n, gen, dtype, device="cpu") -> Funcs:
        w = normals((n, self.d), gen, dtype, device=device) * self.axis_scales(dtype, device)
        return {"w": self.L * w / w.norm(dim=1, keepdim=True)}

    def evaluate(self, funcs, x):
        return torch.einsum("nmd,nd->nm", x, funcs["w"])

    def lipschitz(self, funcs):
        return funcs["w"].norm(dim=1)
