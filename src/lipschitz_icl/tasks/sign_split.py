"""The sign-split class: the reviewers' counterexample to the paper's guarantee (issue 31, item 7).

    f(x) = eps L (||x_P|| - ||x_N||) / sqrt 2,   eps = +-1 with probability 1/2 each (one sign per function),

P the even input coordinates (0, 2, 4, ...) and N the odd ones. On orthonormal features v_k = e_k it is
+L/sqrt 2 on the features of even index and -L/sqrt 2 on the others (times eps): the largest split an
L-Lipschitz function allows, since |f(e_k) - f(e_n)| = sqrt 2 L = L ||e_k - e_n||.

Its kernel is exact, Sigma = L^2 g g^T with g_k = (||v_{k,P}|| - ||v_{k,N}||) / sqrt 2, rank one. Two features with
the same g (any two orthonormal features of the same parity once K >= 3, or any two features lying in one of the
two coordinate subspaces) have f(v_k) = f(v_n) for every f of the class, so E_f[(f(v_k) - f(v_n))^2] = 0 and the
theory's delta is 0: a degenerate class, where L* = 1/(Delta delta) is infinite and the paper's guarantee
(Attn_k -> 1) does not apply.

Why one fixed split and not a random sign vector per function: delta is a minimum over pairs of an *expectation*
over f, so any law that sometimes separates two features makes it positive. With independent signs per feature,
E[(f(v_k) - f(v_n))^2] = L^2 for every pair of orthonormal features (delta = 1/sqrt 2); with a random balanced
split (K even) it is L^2 K / (K - 1) > 0. Averaged over such a sign law the kernel is a non-degenerate one. Only a split
that every function shares makes delta = 0; the common sign eps keeps E[f] = 0, as for the other classes,
without touching Sigma.
"""

from __future__ import annotations

import math

import torch

from .base import Funcs, TaskClass, register_task


def _split_norms(x: torch.Tensor) -> torch.Tensor:
    """(||x_P|| - ||x_N||) / sqrt 2 over the last axis: P the even coordinates, N the odd ones. 1-Lipschitz:
    each norm is 1-Lipschitz in its own coordinates, and a + b <= sqrt 2 sqrt(a^2 + b^2)."""
    return (x[..., 0::2].norm(dim=-1) - x[..., 1::2].norm(dim=-1)) / math.sqrt(2.0)


@register_task
class SignSplit(TaskClass):
    """f(x) = eps L (||x_P|| - ||x_N||) / sqrt 2, eps = +-1: +-L/sqrt 2 on orthonormal features of even / odd index.
    Degenerate (delta = 0) wherever two features share a side of the split (module docstring)."""

    name = "sign_split"
    rotation_invariant = False  # the split is along the input axes

    def sample(self, n, gen, dtype, device="cpu") -> Funcs:
        coin = torch.randint(0, 2, (n,), generator=gen, device="cpu")  # drawn on the CPU like the other classes
        return {"sign": (2.0 * coin - 1.0).to(dtype=dtype, device=device)}  # eps

    def evaluate(self, funcs, x):
        return (self.L * funcs["sign"]).unsqueeze(1) * _split_norms(x)

    def exact_kernel(self, V):
        g = _split_norms(V.T)  # g_k for each feature v_k (a column of V)
        return self.L**2 * torch.outer(g, g)  # Sigma = E[eps^2] L^2 g g^T, eps^2 = 1
