"""gd_layers' exact-engine loss and its gradient in one compiled loop (numba; ``ExactEngine(compiled=True)``).

``engines.gd_layers_loss`` averages over S sample covariances Lh (1,024-2,048 at the Ahn et al. suite's full size)
the loss of L preconditioned GD steps as batched products of D x D matrices, and torch's autograd takes its
gradient: at D = 4 each batched product costs about 150 ns a matrix. Here one loop over the draws runs the layer
recursion and its closed-form backward:

    forward   St_l = I - A_l Lh,  E_l = St_l E_(l-1),  M_l = St_l M_(l-1) + A_l,  from E_0 = I, M_0 = 0
    loss      tr(Lq E_L Omega E_L^T) + sigma^2/N tr(Lq M_L Lh M_L^T)     (signal + noise; Lq, Omega, Lh symmetric)
    backward  GE = 2 Lq E_L Omega, GM = 2 sigma^2/N Lq M_L Lh; for l = L..1: dSt = GE E_(l-1)^T + GM M_(l-1)^T,
              dA_l += GM - dSt Lh, GE <- St_l^T GE, GM <- St_l^T GM

It sums in another order than the torch path, so the two agree to about 1e-15 relative, not bit for bit
(tests/test_linattn_compiled.py); ``reproduce`` takes it with the other compiled steps (``--no-fused``: torch's).
About 2.9x less CPU a step than the torch path at L = 2..4 (docs/PERFORMANCE.md)."""

from __future__ import annotations

import numba
import numpy as np
import torch

from .task import GaussianTask

_JIT = {"cache": True, "boundscheck": False}


@numba.njit(**_JIT)
def _two_products(a, b, c, d, ab, cd):  # pragma: no cover - compiled
    """ab = a b and cd = c d (square matrices of one size), in one pass."""
    dim = a.shape[0]
    for i in range(dim):
        for j in range(dim):
            t1, t2 = 0.0, 0.0
            for k in range(dim):
                t1 += a[i, k] * b[k, j]
                t2 += c[i, k] * d[k, j]
            ab[i, j], cd[i, j] = t1, t2


@numba.njit(**_JIT)
def _forward(A, c, E, M, St):  # pragma: no cover - compiled
    n_layers, dim = A.shape[0], A.shape[1]
    for i in range(dim):
        for j in range(dim):
            E[0, i, j] = 1.0 if i == j else 0.0
            M[0, i, j] = 0.0
    for layer in range(n_layers):
        for i in range(dim):
            for j in range(dim):
                acc = 0.0
                for k in range(dim):
                    acc += A[layer, i, k] * c[k, j]
                St[layer, i, j] = (1.0 if i == j else 0.0) - acc
        _two_products(St[layer], E[layer], St[layer], M[layer], E[layer + 1], M[layer + 1])
        M[layer + 1] += A[layer]


@numba.njit(**_JIT)
def _outputs(e_last, m_last, c, Om, Lq, coef, GE, GM, te, tm):  # pragma: no cover - compiled
    """One draw's signal + coef noise; GE, GM its gradients in E_L and M_L (te, tm: work space)."""
    dim = c.shape[0]
    _two_products(e_last, Om, m_last, c, te, tm)  # E_L Omega, M_L Lh
    _two_products(Lq, te, Lq, tm, GE, GM)  # Lq E_L Omega, Lq M_L Lh
    total = 0.0
    for i in range(dim):
        for j in range(dim):
            total += GE[i, j] * e_last[i, j] + coef * GM[i, j] * m_last[i, j]
            GE[i, j], GM[i, j] = 2.0 * GE[i, j], 2.0 * coef * GM[i, j]
    return total


@numba.njit(**_JIT)
def _backward(A, c, E, M, St, GE, GM, gA, d_step, new_e, new_m):  # pragma: no cover - compiled
    n_layers, dim = A.shape[0], A.shape[1]
    for layer in range(n_layers - 1, -1, -1):
        for i in range(dim):
            for j in range(dim):
                g = 0.0
                for k in range(dim):
                    g += GE[i, k] * E[layer, j, k] + GM[i, k] * M[layer, j, k]
                d_step[i, j] = g
        for i in range(dim):
            for j in range(dim):
                g = 0.0
                for k in range(dim):
                    g += d_step[i, k] * c[j, k]
                gA[layer, i, j] += GM[i, j] - g
                a, b = 0.0, 0.0
                for k in range(dim):
                    a += St[layer, k, i] * GE[k, j]
                    b += St[layer, k, i] * GM[k, j]
                new_e[i, j], new_m[i, j] = a, b
        GE[:, :] = new_e
        GM[:, :] = new_m


@numba.njit(**_JIT)
def loss_and_grad(A, C, Om, Lq, coef):  # pragma: no cover - compiled
    """The mean over the draws C (S, D, D) of signal + coef noise (without the label-noise constant sigma^2) and
    its gradient in the preconditioners A (L, D, D)."""
    n_layers, dim = A.shape[0], A.shape[1]
    gA = np.zeros_like(A)
    E, M = np.empty((n_layers + 1, dim, dim)), np.empty((n_layers + 1, dim, dim))
    St = np.empty((n_layers, dim, dim))
    work = np.empty((5, dim, dim))
    GE, GM, w1, w2, w3 = work[0], work[1], work[2], work[3], work[4]
    total = 0.0
    for s in range(C.shape[0]):
        _forward(A, C[s], E, M, St)
        total += _outputs(E[n_layers], M[n_layers], C[s], Om, Lq, coef, GE, GM, w1, w2)
        _backward(A, C[s], E, M, St, GE, GM, gA, w1, w2, w3)
    return total / C.shape[0], gA / C.shape[0]


class _GdLayersLoss(torch.autograd.Function):
    """The loss as a torch scalar whose backward is the compiled gradient (computed with the loss)."""

    @staticmethod
    def forward(ctx, preconditioners: torch.Tensor, covs: np.ndarray, omega: np.ndarray, lam_q: np.ndarray,
                coef: float, constant: float) -> torch.Tensor:
        a = preconditioners.detach().numpy()
        value, grad = loss_and_grad(np.ascontiguousarray(a), covs, omega, lam_q, coef)
        ctx.save_for_backward(torch.from_numpy(grad))
        return torch.tensor(value + constant, dtype=preconditioners.dtype)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        (grad,) = ctx.saved_tensors
        return grad_output * grad, None, None, None, None, None


class CompiledGdLayers:
    """``gd_layers_loss`` for one task and one set of draws, the arrays converted once."""

    def __init__(self, task: GaussianTask, covs: torch.Tensor) -> None:
        self.covs = np.ascontiguousarray(covs.numpy())
        self.omega, self.lam_q = task.omega().numpy(), np.ascontiguousarray(task.lam_q.numpy())
        self.coef, self.constant = task.noise ** 2 / task.n_context, task.noise ** 2  # sigma^2 / N, sigma^2

    def __call__(self, preconditioners: torch.Tensor) -> torch.Tensor:
        return _GdLayersLoss.apply(preconditioners, self.covs, self.omega, self.lam_q, self.coef, self.constant)
