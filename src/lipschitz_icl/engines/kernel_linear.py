"""Linear attention on the kernel engine: the exact population loss for noise-free tokens.

``model.kind=linear_attention`` predicts y_hat = sum_i y_i x_i^T Gamma x_q / N. With noise-free tokens
(x_i = v_{z_i}) and scores M_kn = v_n^T Gamma v_k, a query of feature k whose context holds c_n
tokens of feature n predicts

    y_hat = sum_n b_n f(v_n) + (tau / N) sum_i eps_i M_{k z_i},     b_n = c_n M_kn / N,

so y_hat - f(v_k) = sum_n (b - e_k)_n f(v_n) + noise, and averaging over f (Sigma_nm =
E_f[f(v_n) f(v_m)]) and the label noise gives (b - e_k)^T Sigma (b - e_k) + tau^2 sum_n c_n M_kn^2 / N^2.
That is quadratic in the scores and in the counts, so the average over the counts needs only their
first and second moments, c_bar = E[c] and C2 = E[c c^T] (over the engine's B count draws, or the
mean-field counts N p):

    loss    = 1/2 sum_k p_k [ M_k^T A M_k - 2 H_k^T M_k + Sigma_kk ]
    A       = (Sigma * C2 + tau^2 diag(c_bar)) / N^2          (elementwise product; symmetric)
    H_kn    = Sigma_kn c_bar_n / N
    dL/dM_k = p_k (A M_k - H_k),   i.e.  dL/dM = diag(p) (M A - H)

The attention the recorder shows is the expected weight a query of feature k puts on the tokens of
feature n, Attn_{k->n} = c_bar_n M_kn / N: it is not a softmax, so it need not be positive or sum
to 1. ``linear_kernel_loss`` below computes the same loss draw by draw, the autograd reference.
"""

from __future__ import annotations

import torch

from ..contract import einsum


def count_moments(counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """c_bar = E[c] (K,) and C2 = E[c c^T] (K, K) over count draws counts (B, K)."""
    return counts.mean(0), counts.T @ counts / counts.shape[0]


def linear_kernel_loss_grad(
    M: torch.Tensor, c_mean: torch.Tensor, c2: torch.Tensor, sigma: torch.Tensor, p: torch.Tensor, N: int,
    tau: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss, dL/dM, Attn_{k->n}) in closed form (module doc). M (K, K) scores; c_mean (K,), c2 (K, K)
    the count moments; sigma (K, K) symmetric; p (K,) the query's feature law; N context tokens."""
    A = (sigma * c2 + tau**2 * torch.diag(c_mean)) / N**2  # A, symmetric
    H = sigma * c_mean / N  # H_kn = Sigma_kn c_bar_n / N
    MA = M @ A  # row k: A M_k
    quad = (MA * M).sum(1) - 2 * (H * M).sum(1) + torch.diagonal(sigma)  # E[(y_hat - f(v_k))^2] per k
    loss = 0.5 * (p * quad).sum()
    return loss, p[:, None] * (MA - H), M * c_mean / N


def linear_kernel_loss(
    M: torch.Tensor, counts: torch.Tensor, sigma: torch.Tensor, p: torch.Tensor, N: int, tau: float = 0.0,
) -> torch.Tensor:
    """Autograd reference: the same loss averaged draw by draw over counts (B, K), with
    b_n = c_n M_kn / N for every query k and draw."""
    K = M.shape[0]
    b = counts.unsqueeze(0) * M.unsqueeze(1) / N  # (k, B, n)
    err = b - torch.eye(K, dtype=M.dtype, device=M.device).unsqueeze(1)  # b - e_k
    quad = einsum("kbn,nm,kbm->kb", err, sigma, err)
    if tau > 0:
        quad = quad + tau**2 * (counts.unsqueeze(0) * M.square().unsqueeze(1)).sum(-1) / N**2
    return 0.5 * (p * quad.mean(1)).sum()
