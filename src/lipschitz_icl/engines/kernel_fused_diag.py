"""The fused step's query for a diagonal Sigma = diag(s): ``kernel_diag``'s closed form, compiled (numba).

With Sigma diagonal (the linear class on orthonormal features, the paper's worked case) every sum over the
context features factorises through the counts c (K x B) and P_kn = softmax_n(M_kn) (see ``kernel_diag``): for
query k, Z_b = sum_n c_nb P_kn, e_b = 1 - a_kkb = sum_{n != k} c_nb P_kn / Z_b (no cancellation),

    err^T Sigma err      = sum_{n != k} s_n c_nb^2 P_kn^2 / Z_b^2 + s_k e_b^2
    tau^2 sum a_n^2/c_n  = tau^2 sum_n (c_nb^2 / max(c_nb, 1)) P_kn^2 / Z_b^2
    Attn_{k->n}          = P_kn / B sum_b c_nb / Z_b
    dL/dM_kn             = p_k / B [s_n P_kn^2 sum_b c_nb^2 / Z_b^2 (n != k), -s_k P_kk sum_b c_kb e_b / Z_b (n = k)
                           + tau^2 P_kn^2 sum_b (c_nb^2 / max(c_nb, 1)) / Z_b^2 - P_kn sum_b c_nb <a, g>_b / Z_b]

with <a, g>_b = sum_{n != k} s_n a_n^2 - s_k a_kk e_b + tau^2 sum_n a_n^2 / max(c_n, 1). One pass over (K, B)
for Z, one for the quadratic terms and one for the K sums of the gradient and attention, where the general
query (``kernel_fused._query``) forms the attention a (K, B) and Sigma err (K, B): about a third of its time
at the quickstart's size. The attention a itself is formed only when the test errors need it.
"""

from __future__ import annotations

import numba
import numpy as np

# as kernel_fused: cached, sums over b may be vectorised (reassoc), x / 0 = inf as in torch
_JIT = {"cache": True, "fastmath": {"reassoc"}, "boundscheck": False, "error_model": "numpy"}


@numba.njit(**_JIT)
def count_squares(c: np.ndarray, inv_c: np.ndarray, t2: float, c2: np.ndarray, cn: np.ndarray) -> None:
    """One run's c2 = c^2 and, with label noise (t2 = tau^2 > 0), cn = c^2 / max(c, 1), each (K, B)."""
    K, B = c.shape
    for n in range(K):
        for b in range(B):
            c2[n, b] = c[n, b] * c[n, b]
            if t2 > 0.0:
                cn[n, b] = c2[n, b] * inv_c[n, b]


@numba.njit(**_JIT)
def query_diag(k, Pk, c, c2, cn, s, t2, want_a, a, tmp, attn_row, grad_row, w):  # noqa: ANN001, ANN201
    """Query k of one run with Sigma = diag(s): Attn_{k->n} into ``attn_row`` and dL/dM_kn (times w = p_k / B)
    into ``grad_row``; returns mean_b [err^T Sigma err + tau^2 sum_n a_n^2 / c_n]. With ``want_a`` also the
    attention a (K, B) and e = 1 - a_kk (tmp[0]), as ``kernel_fused._test_errors`` reads them.
    c2, cn: ``count_squares``; tmp (4, B): scratch."""
    K, B = c.shape
    e, iz, acc, agz = tmp[0], tmp[1], tmp[2], tmp[3]
    pkk, sk = Pk[k], s[k]
    for b in range(B):
        e[b] = 0.0
        acc[b] = 0.0
    for n in range(K):
        if n != k:
            pn = Pk[n]
            f = s[n] * pn * pn
            for b in range(B):
                e[b] += pn * c[n, b]  # sum_{n != k} c_nb P_kn
                acc[b] += f * c2[n, b]  # sum_{n != k} s_n c_nb^2 P_kn^2
        if t2 > 0.0:
            f = t2 * Pk[n] * Pk[n]
            for b in range(B):
                acc[b] += f * cn[n, b]  # + tau^2 (c_nb^2 / max(c_nb, 1)) P_kn^2
    q = 0.0
    u = 0.0
    for b in range(B):
        iz[b] = 1.0 / (e[b] + pkk * c[k, b])  # 1 / Z_b
        e[b] *= iz[b]  # e_b = 1 - a_kkb
        i2 = iz[b] * iz[b]
        rest = acc[b] * i2  # sum_{n != k} s_n a_n^2 + tau^2 sum_n a_n^2 / c_n
        q += sk * e[b] * e[b] + rest
        we = c[k, b] * iz[b] * e[b]  # a_kk e_b / P_kk
        u += we
        agz[b] = (rest - sk * pkk * we) * iz[b]  # <a, g>_b / Z_b
        acc[b] = i2
    for n in range(K):
        s1 = 0.0  # sum_b c_nb / Z_b
        s2 = 0.0  # sum_b c_nb^2 / Z_b^2
        s0 = 0.0  # sum_b (c_nb^2 / max(c_nb, 1)) / Z_b^2
        tn = 0.0  # sum_b c_nb <a, g>_b / Z_b
        for b in range(B):
            s1 += c[n, b] * iz[b]
            s2 += c2[n, b] * acc[b]
            tn += c[n, b] * agz[b]
        if t2 > 0.0:
            for b in range(B):
                s0 += cn[n, b] * acc[b]
        pn = Pk[n]
        g = s[n] * pn * pn * s2 if n != k else -sk * pkk * u
        grad_row[n] = (g + t2 * pn * pn * s0 - pn * tn) * w
        attn_row[n] = pn * s1 / B
        if want_a:
            for b in range(B):
                a[n, b] = c[n, b] * pn * iz[b]
    return q / B
