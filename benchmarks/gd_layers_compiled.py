"""Would a compiled loss and gradient pay for gd_layers (Ahn et al.'s exact multi-layer loss)? (docs/PERFORMANCE.md,
"Not done, and limits").

``linattn.engines.gd_layers_loss`` averages over S sample covariances (1,024-2,048 at the full size) the loss of L
preconditioned GD steps, as batched products of D x D matrices (D = 4), and torch's autograd takes its gradient:
torch's ``bmm`` spends about 150 ns on each 4 x 4 product. ``loss_grad`` below is the same loss with the closed-form
backward of the layer recursion (E_l = (I - A_l C) E_l-1, M_l = (I - A_l C) M_l-1 + A_l; signal tr(Lq E Om E^T),
noise sigma^2/N tr(Lq M C M^T)) in one numba loop over the covariances. It sums in another order, so it agrees with
the torch path to about 1e-15 relative, not bit for bit: wiring it in would change the last bits of AH1 and AH2 and
needs their verdicts checked at both sizes first. Not used by the toolkit.

Prints, for L = 2, 3, 4 at the full size's 1,024 draws, the relative differences of loss and gradient and the CPU
milliseconds of one loss + gradient each way (the least of 5 rounds of 40).

    PYTHONPATH=src python benchmarks/gd_layers_compiled.py
"""

import time

import numba
import numpy as np
import torch

from lipschitz_icl.linattn.engines import ExactEngine, gd_layers_loss
from lipschitz_icl.papers.ahn2023.setting import AHN_SIZES, ahn_task


@numba.njit(cache=False)
def _forward(A, c, E, M, St):
    """E[l+1] = St[l] E[l], M[l+1] = St[l] M[l] + A[l], St[l] = I - A[l] c, from E[0] = I, M[0] = 0."""
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
        for i in range(dim):
            for j in range(dim):
                e, m = 0.0, 0.0
                for k in range(dim):
                    e += St[layer, i, k] * E[layer, k, j]
                    m += St[layer, i, k] * M[layer, k, j]
                E[layer + 1, i, j] = e
                M[layer + 1, i, j] = m + A[layer, i, j]


@numba.njit(cache=False)
def _outputs(e_last, m_last, c, Om, Lq, coef, GE, GM, te, tm):
    """signal + coef noise of one draw; GE, GM its gradients 2 Lq E Om and 2 coef Lq M c (Lq, Om, c symmetric)."""
    dim = c.shape[0]
    for i in range(dim):
        for j in range(dim):
            t1, t2 = 0.0, 0.0
            for k in range(dim):
                t1 += e_last[i, k] * Om[k, j]
                t2 += m_last[i, k] * c[k, j]
            te[i, j], tm[i, j] = t1, t2
    total = 0.0
    for i in range(dim):
        for j in range(dim):
            ls, ln = 0.0, 0.0
            for k in range(dim):
                ls += Lq[i, k] * te[k, j]
                ln += Lq[i, k] * tm[k, j]
            total += ls * e_last[i, j] + coef * ln * m_last[i, j]
            GE[i, j], GM[i, j] = 2.0 * ls, 2.0 * coef * ln
    return total


@numba.njit(cache=False)
def _backward(A, c, E, M, St, GE, GM, gA, d_step, new_e, new_m):
    """Through the layers from the last: dSt = GE E^T + GM M^T, dA += GM - dSt c, GE <- St^T GE, GM <- St^T GM."""
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


@numba.njit(cache=False)
def loss_grad(A, C, Om, Lq, coef):
    """The mean over the draws C (S, D, D) of signal + coef noise (without the label-noise constant) and its
    gradient in A (L, D, D)."""
    n_layers, dim = A.shape[0], A.shape[1]
    gA = np.zeros_like(A)
    E, M = np.empty((n_layers + 1, dim, dim)), np.empty((n_layers + 1, dim, dim))
    St = np.empty((n_layers, dim, dim))
    work = np.empty((5, dim, dim))  # the gradients GE, GM and work space
    GE, GM, w1, w2, w3 = work[0], work[1], work[2], work[3], work[4]
    total = 0.0
    for s in range(C.shape[0]):
        _forward(A, C[s], E, M, St)
        total += _outputs(E[n_layers], M[n_layers], C[s], Om, Lq, coef, GE, GM, w1, w2)
        _backward(A, C[s], E, M, St, GE, GM, gA, w1, w2, w3)
    return total / C.shape[0], gA / C.shape[0]

def main() -> None:
    torch.set_num_threads(1)
    task = ahn_task(AHN_SIZES["full"])
    covs = ExactEngine(task, 0, AHN_SIZES["full"].draws).covs()
    C, Om, Lq = covs.numpy(), task.omega().numpy(), task.lam_q.numpy()
    coef = task.noise ** 2 / task.n_context
    gen = torch.Generator().manual_seed(0)
    for L in (2, 3, 4):
        A = 0.3 * torch.randn(L, task.dim, task.dim, generator=gen, dtype=torch.float64)
        At = A.clone().requires_grad_()
        loss = gd_layers_loss(At, task, covs)
        (grad,) = torch.autograd.grad(loss, At)
        loss_n, grad_n = loss_grad(A.numpy(), C, Om, Lq, coef)
        loss_n += task.noise ** 2
        rel_loss = abs(loss_n - loss.item()) / abs(loss.item())
        rel_grad = float(np.abs(grad_n - grad.numpy()).max() / np.abs(grad.numpy()).max())
        torch_ms, numba_ms = [], []
        for _ in range(5):
            t = time.process_time()
            for _ in range(40):
                torch.autograd.grad(gd_layers_loss(At, task, covs), At)
            torch_ms.append((time.process_time() - t) / 40 * 1e3)
            t = time.process_time()
            for _ in range(40):
                loss_grad(A.numpy(), C, Om, Lq, coef)
            numba_ms.append((time.process_time() - t) / 40 * 1e3)
        print(f"L={L}: loss rel diff {rel_loss:.1e}, grad rel diff {rel_grad:.1e}; CPU ms per loss + gradient: "
              f"torch {min(torch_ms):.3f}, numba {min(numba_ms):.3f} ({min(torch_ms) / min(numba_ms):.1f}x)")


if __name__ == "__main__":
    main()
