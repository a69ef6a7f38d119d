"""The kernel engine's loss, attention and gradient when Sigma is diagonal, in O(K^2 B) matrix products.

Sigma = diag(s) holds for the linear class on orthonormal features (s_n = L^2 / d), the paper's
worked case. Then every sum over the context features n factorises through the count matrix
c (K x B) and P_kn = softmax_n(M_kn): with Z_kb = sum_n c_nb P_kn and, for a query k,
e_kb = 1 - a_kkb = sum_{n != k} c_nb P_kn / Z_kb (computed without cancellation),

    err^T Sigma err      = sum_{n != k} s_n c_nb^2 P_kn^2 / Z_kb^2 + s_k e_kb^2
    tau^2 sum a_n^2/c_n  = tau^2 sum_n c_nb P_kn^2 / Z_kb^2
    Attn_{k->n}          = P_kn / B sum_b c_nb / Z_kb

and the gradient dL/dM_kn = p_k / B sum_b a_nkb (g_nkb - <a, g>_kb) reduces to a few (K x B)(B x K)
products. No (K, K, B) tensor is formed: a step costs a handful of small matrix products.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def loss_grad_diag(
    M: torch.Tensor,
    counts: torch.Tensor,
    s: torch.Tensor,
    p: torch.Tensor,
    tau2: torch.Tensor | None,
    inv_c: torch.Tensor | None,
    need_grad: bool,
    full_attn: bool,
    ws: Callable[[str], torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """(loss (R,), Attn_k (R, K), Attn_{k->n} (R, K, K) when ``full_attn``, dL/dM (R, K, K) when
    ``need_grad``) for M (R, K, K), counts (R, K, B) (feature first), s (R, K) the diagonal of
    Sigma, p (R, K), tau2 (R,) and inv_c = 1 / max(c, 1) (R, K, B), or None for no label noise.
    ``ws(name)``: a scratch tensor shaped like counts (the large temporaries live there, so a step
    causes no page faults)."""
    R, K, B = counts.shape
    P = torch.softmax(M, dim=-1)  # P_kn
    P_kk = torch.diagonal(P, dim1=1, dim2=2).unsqueeze(-1)  # (R, K, 1)
    P_off = P - torch.diag_embed(P_kk.squeeze(-1))  # P with a zero diagonal
    P2 = P * P
    s_k = s.unsqueeze(-1)  # (R, K, 1)
    c2 = torch.mul(counts, counts, out=ws("c2"))
    Z_off = torch.bmm(P_off, counts, out=ws("z_off"))  # (R, k, B): sum_{n != k} c_nb P_kn
    inv_Z = torch.mul(counts, P_kk, out=ws("inv_z")).add_(Z_off).reciprocal_()  # 1 / Z_kb
    inv_Z2 = torch.mul(inv_Z, inv_Z, out=ws("inv_z2"))
    e = Z_off.mul_(inv_Z)  # e_kb = 1 - a_kkb
    off = torch.bmm(P_off * P_off * s.unsqueeze(1), c2, out=ws("off")).mul_(inv_Z2)  # sum_{n != k} s_n a_n^2
    quad = torch.mul(e, e, out=ws("quad")).mul_(s_k).add_(off)  # err^T Sigma err, (R, k, B)
    noise = None
    if tau2 is not None:
        c_noise = c2.mul_(inv_c)  # a_n^2 / max(c_n, 1) = (c_n^2 / max(c_n, 1)) P_kn^2 / Z_kb^2
        noise = torch.bmm(P2, c_noise, out=ws("noise")).mul_(inv_Z2).mul_(tau2.view(R, 1, 1))
        quad.add_(noise)  # + tau^2 sum_n a_n^2 / max(c_n, 1)
    loss = 0.5 * (p * quad.mean(-1)).sum(-1)
    w = torch.mul(counts, inv_Z, out=quad)  # c_kb / Z_kb
    attn_self = P_kk.squeeze(-1) * w.sum(-1) / B  # Attn_k = P_kk / B sum_b c_kb / Z_kb
    attn = None
    if full_attn:
        S1 = torch.bmm(counts, inv_Z.transpose(1, 2))  # (R, n, k): sum_b c_nb / Z_kb
        attn = P * S1.transpose(1, 2) / B  # Attn_{k->n}
        torch.diagonal(attn, dim1=1, dim2=2).copy_(attn_self)  # the very numbers of Attn_k above
    if not need_grad:
        return loss, attn_self, attn, None
    we = w.mul_(e)  # c_kb e_kb / Z_kb, and a_kk e_k = P_kk we
    u = we.sum(-1)  # (R, k): sum_b c_kb e_kb / Z_kb
    ag = torch.mul(we, s_k * P_kk, out=ws("ag"))  # s_k a_kk e_k
    ag = torch.sub(off, ag, out=ag)  # <a, g> = sum_{n != k} s_n a_n^2 - s_k a_kk e_k, g = Sigma (a - e_k)
    if noise is not None:
        ag.add_(noise)
    T = torch.bmm(counts, ag.mul_(inv_Z).transpose(1, 2))  # (R, n, k): sum_b c_nb <a, g>_kb / Z_kb
    S2 = torch.bmm(c2 if noise is None else torch.mul(counts, counts, out=c2), inv_Z2.transpose(1, 2))
    grad = P2 * S2.transpose(1, 2) * s.unsqueeze(1)  # n != k: s_n sum_b a_n^2 (S2: sum_b c_nb^2 / Z_kb^2)
    torch.diagonal(grad, dim1=1, dim2=2).copy_(-s * P_kk.squeeze(-1) * u)  # n = k: -s_k sum_b a_k e_k
    if tau2 is not None:
        S0 = torch.bmm(torch.mul(c2, inv_c, out=ws("noise")), inv_Z2.transpose(1, 2))  # sum_b c_noise / Z^2
        grad = grad + tau2.view(R, 1, 1) * P2 * S0.transpose(1, 2)  # tau^2 sum_b a_n^2 / max(c_n, 1)
    grad = (grad - P * T.transpose(1, 2)) * (p / B).unsqueeze(-1)
    return loss, attn_self, attn, grad
