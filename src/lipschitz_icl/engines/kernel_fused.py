"""The fused kernel step (``engine.fused: true``): loss, attention and gradient of R runs in one
compiled call (numba), for gradient steps in S space on the CPU.

The unfused step (``kernel_grad.kernel_loss_grad``) is ~67 torch operator calls of a few
microseconds each at the quickstart's size (K = 5, B = 256); its arithmetic is ~64 000 flops.
Here one call walks run r, query k and draw b with loops whose innermost index is the draw b
(contiguous in the (R, K, B) counts), so the compiler vectorises them, and writes into buffers
allocated once per batch shape. The arithmetic is that of the unfused step (the same closed form,
1 - a_kk computed without cancellation), but the exponentials, the order of the sums over b (the
compiler may reassociate them, ``fastmath={"reassoc"}``) and the Sigma products are not the same
operations: results agree with the unfused step to ~1e-15 relative, not bit for bit. Every run's
numbers depend on its own slices only, so a run gets the same bits alone and in any batch. A diagonal Sigma
takes ``kernel_diag``'s closed form instead of forming Sigma err (``kernel_fused_diag``).

At log steps the same call also evaluates the test errors (the loss under the Sigma of unseen
functions, dense K x K) at the same attention, through the Gram matrix of err over the draws (``_test_errors``):
K (K + 1) / 2 sums over b per query instead of the K^2 of T err, and shared by every test Sigma. At the
quickstart's size this made a step with test errors 1.6x faster (2.42 -> 1.55 us per run-step). What stays
outside: the preconditioning G (dL/dM) G when G != I, and the log-space recomputation of a run whose attention
underflowed (the unfused ``kernel_loss_grad``, which has it).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numba
import numpy as np
import torch

from .kernel_fused_diag import count_squares, query_diag
from .kernel_grad import KernelOut, kernel_loss_grad

if TYPE_CHECKING:
    from .kernel_batch import KernelBatch

# numba finds a cached function stale by its own file only, and the cache holds the code of the compiled functions it
# calls from other files: their digests here make this file change whenever they do, so that a git pull or an
# edited checkout never loads a stale copy of them (tests/test_numba_cache.py keeps this current)
CALLEE_SOURCES = {"engines/kernel_fused_diag.py": "8cd3ca6894f134fb"}
# cache: compiled once per machine (a few seconds), then loaded; reassoc: sums over b may be vectorised;
# error_model numpy: x / 0 = inf as in torch (an underflowed attention is then found by its loss)
_JIT = {"cache": True, "fastmath": {"reassoc"}, "boundscheck": False, "error_model": "numpy"}


@numba.njit(**_JIT)
def _softmax_rows(M: np.ndarray, P: np.ndarray) -> None:
    """P = softmax(M) row by row (K x K)."""
    K = M.shape[0]
    for k in range(K):
        mx = M[k, 0]
        for n in range(1, K):
            mx = max(mx, M[k, n])
        s = 0.0
        for n in range(K):
            P[k, n] = math.exp(M[k, n] - mx)
            s += P[k, n]
        for n in range(K):
            P[k, n] /= s


@numba.njit(**_JIT)
def _attention_and_g(k, Pk, c, S, a, g, e, iz):
    """Query k: a_n = c_n P_kn / Z (K, B), e = 1 - a_kk = sum_{n != k} c_n P_kn / Z (no cancellation)
    and g = Sigma err with err = a - e_k, err_k = -e (Sigma dense)."""
    K, B = c.shape
    for b in range(B):
        e[b] = 0.0
    for n in range(K):
        if n != k:
            for b in range(B):
                e[b] += c[n, b] * Pk[n]  # sum_{n != k} c_n P_kn
    for b in range(B):
        iz[b] = 1.0 / (e[b] + c[k, b] * Pk[k])  # 1 / Z
        e[b] *= iz[b]
    for n in range(K):
        for b in range(B):
            a[n, b] = c[n, b] * Pk[n] * iz[b]
    _dense_err(k, a, e, S, g)


@numba.njit(**_JIT)
def _dense_err(k, a, e, S, g):
    """g = S err for a dense K x K matrix S, err = a - e_k with err_k = -e."""
    K, B = a.shape
    for n in range(K):
        for b in range(B):
            g[n, b] = 0.0
        for m in range(K):
            snm = S[n, m]
            if m != k:
                for b in range(B):
                    g[n, b] += snm * a[m, b]
            else:
                for b in range(B):
                    g[n, b] -= snm * e[b]


@numba.njit(**_JIT)
def _dot(x, y):
    """sum_b x_b y_b (the compiler may reassociate the sum)."""
    total = 0.0
    for b in range(x.shape[0]):
        total += x[b] * y[b]
    return total


@numba.njit(**_JIT)
def _test_errors(k, a, e, T, t2, inv_c, E, out):
    """Query k under each test Sigma T[t] (dense, symmetric): out[t] = mean_b [err^T T err + tau^2 sum_n a_n^2 / c_n]
    with err = a - e_k, err_k = -e, as sum_nm T_nm E_nm / B through the Gram matrix E_nm = sum_b err_nb err_mb
    (K x K scratch), formed once for every T: K (K + 1) / 2 sums over b where T err is K^2 per test Sigma."""
    K, B = a.shape
    noise = 0.0  # tau^2 sum_b sum_n a_n^2 / c_n, the same under every T
    if t2 > 0.0:
        for n in range(K):
            for b in range(B):
                noise += a[n, b] * a[n, b] * inv_c[n, b]
        noise *= t2
    for n in range(K):
        xn = e if n == k else a[n]
        sign_n = -1.0 if n == k else 1.0
        for m in range(n, K):
            xm = e if m == k else a[m]
            sign_m = -1.0 if m == k else 1.0
            E[n, m] = sign_n * sign_m * _dot(xn, xm)
    for t in range(T.shape[0]):
        Tt = T[t]
        total = 0.0
        for n in range(K):
            total += Tt[n, n] * E[n, n]
            for m in range(n + 1, K):
                total += 2.0 * Tt[n, m] * E[n, m]  # T symmetric (``symmetrize``)
        out[t] = (total + noise) / B


@numba.njit(**_JIT)
def _query(k, Pk, c, inv_c, S, t2, a, g, tmp, attn_row, grad_row, w):
    """Query k of one run: Attn_{k->n} and dL/dM_kn (times w = p_k / B) into the rows; returns
    mean_b [err^T Sigma err + tau^2 sum_n a_n^2 / c_n]. a, g (K, B) and tmp (4, B): scratch."""
    K, B = c.shape
    e, iz, quad, ag = tmp[0], tmp[1], tmp[2], tmp[3]
    _attention_and_g(k, Pk, c, S, a, g, e, iz)
    for b in range(B):
        quad[b] = 0.0
        ag[b] = 0.0
    for n in range(K):
        if n != k:
            for b in range(B):
                quad[b] += a[n, b] * g[n, b]  # err^T Sigma err
        else:
            for b in range(B):
                quad[b] -= e[b] * g[n, b]
        if t2 > 0.0:
            for b in range(B):
                h = a[n, b] * inv_c[n, b]
                quad[b] += t2 * a[n, b] * h  # + tau^2 a_n^2 / c_n
                g[n, b] += t2 * h  # dL/da up to p_k / B: g + tau^2 a / c
        for b in range(B):
            ag[b] += a[n, b] * g[n, b]  # <a, dL/da>
    q = 0.0
    for b in range(B):
        q += quad[b]
    for n in range(K):
        sa = 0.0
        sg = 0.0
        for b in range(B):
            sa += a[n, b]
            sg += a[n, b] * (g[n, b] - ag[b])  # softmax backward
        attn_row[n] = sa / B
        grad_row[n] = sg * w
    return q / B


@numba.njit(**_JIT)
def fused_step(
    M: np.ndarray, c: np.ndarray, inv_c: np.ndarray, S: np.ndarray, diag: bool, p: np.ndarray, tau2: np.ndarray,
    T: np.ndarray, summary: np.ndarray, attn: np.ndarray, grad: np.ndarray, tests: np.ndarray, want: np.ndarray,
) -> bool:
    """R runs: summary (R, 2 + K) = [loss, min_k Attn_k, Attn_1..Attn_K], attn (R, K, K),
    grad (R, K, K) = dL/dM, and tests (R, nT) the loss under the test Sigmas T (R, nT, K, K)
    (nT = 0: none) of the runs ``want`` (R,) says (NaN for the others: they record nothing at this step). Returns
    whether every loss is finite."""
    R, K, B = c.shape
    nT = T.shape[1]
    P = np.empty_like(M[0])
    a = np.empty_like(c[0])
    g = np.empty_like(c[0])  # the general query's Sigma err; with a diagonal Sigma: c^2 (count_squares)
    cn = np.empty_like(c[0])  # with a diagonal Sigma and label noise: c^2 / max(c, 1)
    E = np.empty_like(M[0])  # the test errors' Gram matrix of err (K x K)
    tmp = np.empty((4, B), c.dtype)
    s = np.empty(K, c.dtype)
    tk = np.empty(nT, c.dtype)
    finite = True
    for r in range(R):
        _softmax_rows(M[r], P)
        total = 0.0
        tested = nT > 0 and want[r]
        for t in range(nT):
            tests[r, t] = 0.0 if tested else np.nan
        if diag:
            for n in range(K):
                s[n] = S[r, n, n]
            count_squares(c[r], inv_c[r], tau2[r], g, cn)
        for k in range(K):
            w = p[r, k] / B
            if diag:
                q = query_diag(k, P[k], c[r], g, cn, s, tau2[r], tested, a, tmp, attn[r, k], grad[r, k], w)
            else:
                q = _query(k, P[k], c[r], inv_c[r], S[r], tau2[r], a, g, tmp, attn[r, k], grad[r, k], w)
            total += p[r, k] * q
            if tested:  # a and e = tmp[0] are still query k's
                _test_errors(k, a, tmp[0], T[r], tau2[r], inv_c[r], E, tk)
                for t in range(nT):
                    tests[r, t] += p[r, k] * tk[t]
        summary[r, 0] = 0.5 * total
        for t in range(nT):
            tests[r, t] *= 0.5
        low = attn[r, 0, 0]
        for k in range(K):
            summary[r, 2 + k] = attn[r, k, k]
            low = min(low, attn[r, k, k])
        summary[r, 1] = low
        finite = finite and math.isfinite(summary[r, 0])
    return finite


@numba.njit(**_JIT)
def fused_update(M: np.ndarray, lr: np.ndarray, grad: np.ndarray) -> None:
    """M <- M - eta grad, in place, run by run."""
    R, K, _ = M.shape
    for r in range(R):
        for k in range(K):
            for n in range(K):
                M[r, k, n] -= lr[r] * grad[r, k, n]


class FusedState:
    """The buffers and NumPy views of one batch shape: what ``fused_step`` reads and writes.
    Rebuilt when the batch's tensors are replaced (runs leave, M is assigned); new count draws
    only replace the count views (``set_counts``)."""

    def __init__(self, batch: KernelBatch) -> None:
        R, K, B = batch.counts.shape
        self.batch = batch
        self.M_t, self.M = batch.M, batch.M.numpy()  # the tensor these views belong to
        self.set_counts(batch.counts, batch.inv_c)
        self.sigma = batch.sigma.numpy()
        self.diag = batch.diag is not None
        self.p = batch.p.numpy()
        self.tau2 = np.zeros(R, self.counts.dtype) if batch.tau2 is None else batch.tau2.numpy()
        self.lr = batch.lr.numpy().reshape(R)
        self.summary_t = torch.empty(R, 2 + K, dtype=batch.dtype)
        self.attn_t = torch.empty(R, K, K, dtype=batch.dtype)
        self.grad_t = torch.empty(R, K, K, dtype=batch.dtype)
        self.summary, self.attn, self.grad = self.summary_t.numpy(), self.attn_t.numpy(), self.grad_t.numpy()
        self.loss_t, self.attn_self_t = self.summary_t[:, 0], self.summary_t[:, 2:]  # views, made once
        names = list(batch.tests)
        T = torch.stack([batch.tests[n] for n in names], 1) if names else batch.sigma.new_empty(R, 0, K, K)
        self.T, self.no_T = T.contiguous().numpy(), np.empty((R, 0, K, K), self.counts.dtype)
        self.tests_t = torch.empty(R, len(names), dtype=batch.dtype)
        self.every_run = np.ones(R, dtype=bool)  # ``fused_step``'s want: the test errors of every run
        self.tests, self.tests_out = self.tests_t.numpy(), {n: self.tests_t[:, i] for i, n in enumerate(names)}
        self.out = KernelOut(self.loss_t, self.attn_self_t, None, self.grad_t, table=self.summary_t)  # of step(False)

    def set_counts(self, counts: torch.Tensor, inv_c: torch.Tensor | None) -> None:
        """Views of new count draws (R, K, B) and, with label noise, 1 / max(c, 1)."""
        self.counts = counts.numpy()
        self.inv_c = self.counts if inv_c is None else inv_c.numpy()  # read only with label noise

    def step(self, full: bool, want: np.ndarray | None = None) -> KernelOut:
        """Loss, Attn_k, dL/dM (not preconditioned) of every run; with ``full`` also the whole
        attention and the test errors (of the runs ``want`` (R,) says, NaN for the others; None: every run's)."""
        finite = fused_step(self.M, self.counts, self.inv_c, self.sigma, self.diag, self.p, self.tau2,
                            self.T if full else self.no_T, self.summary, self.attn, self.grad, self.tests,
                            self.every_run if want is None else np.ascontiguousarray(want, dtype=bool))
        if not finite:
            self._redo_nonfinite(full)
        if full:
            return KernelOut(self.loss_t, self.attn_self_t, self.attn_t, self.grad_t, dict(self.tests_out),
                             table=self.summary_t)
        out = self.out  # the same buffers every step: one object, its fields set again (a caller may replace grad)
        out.attn, out.grad, out.tests, out.table, out.exact_rows = None, self.grad_t, {}, self.summary_t, []
        return out

    def _redo_nonfinite(self, full: bool) -> None:
        """Runs whose loss is not finite (attention underflowed, or the run diverged): the unfused
        step, which recomputes underflowed attention in log space."""
        b = self.batch
        for r in np.flatnonzero(~np.isfinite(self.summary[:, 0])).tolist():
            sl = slice(r, r + 1)
            one = kernel_loss_grad(b.M[sl], b.counts[sl], None if b.inv_c is None else b.inv_c[sl], b.sigma[sl],
                                   b.p[sl], None if b.tau2 is None else b.tau2[sl],
                                   {n: v[sl] for n, v in b.tests.items()} if full else None, need_grad=True,
                                   full_attn=True, sigma_diag=None if b.diag is None else b.diag[sl])
            self.summary_t[r] = one.summary_table()[0]
            self.attn_t[r], self.grad_t[r] = one.attn[0], one.grad[0]
            for name, v in one.tests.items():
                self.tests_out[name][r] = v[0]

    def update(self, grad: torch.Tensor) -> None:
        """M <- M - eta grad in place (``grad``: the preconditioned gradient, (R, K, K))."""
        fused_update(self.M, self.lr, self.grad if grad is self.grad_t else grad.contiguous().numpy())
