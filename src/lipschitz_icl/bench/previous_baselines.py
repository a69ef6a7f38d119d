"""A frozen copy of ``lipschitz_icl.baselines`` as of commit 961c2b1, before the changes for
evaluate at scale, kept so that ``bench`` section (g) measures them against the code they replaced.
Not used anywhere else; do not fix or extend it.

In-context regression baselines, as pure batched torch functions.

Every baseline maps (x_ctx (B, N, d), y_ctx (B, N), x_q (B, d)) to predictions (B,), using
only the prompt's own N examples (no training across prompts):

- ``nearest_neighbor``: the label of the closest context token (the first one on ties).
- ``knn``: the mean label of the k closest (k capped at N).
- ``nadaraya_watson``: sum_i y_i w_i, w = softmax(-||x_i - x_q||^2 / (2 h^2)); with ``bandwidth``
  None, h is chosen per prompt by leave-one-out error on the context over ``grid``.
- ``least_squares``: x_q^T w with w = X^+ y, the minimum-norm least-squares solution (no ridge,
  no intercept).
- ``gp_regression``: the posterior mean k_q^T (K + s^2 I)^{-1} y of a zero-mean Gaussian process
  with RBF kernel exp(-||x - x'||^2 / (2 l^2)) and noise variance s^2; with ``length_scale``
  None, l is chosen per prompt by the closed-form leave-one-out error over ``grid``
  (Rasmussen & Williams 2006, eq. 5.12: r_i = [K^{-1} y]_i / [K^{-1}]_ii).
- ``context_mean``: the mean context label (what the reduced model predicts at Q = 0).
"""

from __future__ import annotations

import torch

DEFAULT_GRID = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)  # bandwidths / length scales


def _sq_dists(x_ctx: torch.Tensor, x_q: torch.Tensor) -> torch.Tensor:
    """||x_i - x_q||^2, (B, N)."""
    return (x_ctx - x_q.unsqueeze(1)).square().sum(-1)


def _pairwise_sq(x_ctx: torch.Tensor) -> torch.Tensor:
    """||x_i - x_j||^2, (B, N, N), exact zeros on the diagonal."""
    return (x_ctx.unsqueeze(2) - x_ctx.unsqueeze(1)).square().sum(-1)


def context_mean(x_ctx: torch.Tensor, y_ctx: torch.Tensor, x_q: torch.Tensor) -> torch.Tensor:
    return y_ctx.mean(-1)


def nearest_neighbor(x_ctx: torch.Tensor, y_ctx: torch.Tensor, x_q: torch.Tensor) -> torch.Tensor:
    idx = _sq_dists(x_ctx, x_q).argmin(-1, keepdim=True)  # first minimum on ties
    return y_ctx.gather(-1, idx).squeeze(-1)


def knn(x_ctx: torch.Tensor, y_ctx: torch.Tensor, x_q: torch.Tensor, k: int = 3) -> torch.Tensor:
    k = max(1, min(k, x_ctx.shape[1]))
    # stable sort, so ties go to the earlier context token, as in nearest_neighbor
    idx = _sq_dists(x_ctx, x_q).sort(dim=-1, stable=True).indices[:, :k]
    return y_ctx.gather(-1, idx).mean(-1)


def _nw_weights(sq: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    return torch.softmax(-sq / (2 * h.square()), dim=-1)


def nadaraya_watson_loo_bandwidth(
    x_ctx: torch.Tensor, y_ctx: torch.Tensor, grid: tuple[float, ...] = DEFAULT_GRID
) -> torch.Tensor:
    """Per prompt, the bandwidth of ``grid`` with the smallest leave-one-out squared error on the
    context (B,). With N = 1 nothing can be left out: the first grid value (irrelevant then)."""
    B, N, _ = x_ctx.shape
    g = torch.as_tensor(grid, dtype=x_ctx.dtype, device=x_ctx.device)
    if N < 2:
        return g[0].expand(B)
    sq = _pairwise_sq(x_ctx)
    eye = torch.eye(N, dtype=torch.bool, device=x_ctx.device)
    errs = []
    for h in g:  # one (B, N, N) at a time: memory stays O(B N^2)
        w = torch.softmax((-sq / (2 * h * h)).masked_fill(eye, -torch.inf), dim=-1)  # leave x_j out
        pred = (w @ y_ctx.unsqueeze(-1)).squeeze(-1)
        errs.append((pred - y_ctx).square().mean(-1))
    return g[torch.stack(errs, -1).argmin(-1)]  # the smallest bandwidth among equal errors


def nadaraya_watson(
    x_ctx: torch.Tensor,
    y_ctx: torch.Tensor,
    x_q: torch.Tensor,
    bandwidth: float | torch.Tensor | None = None,
    grid: tuple[float, ...] = DEFAULT_GRID,
) -> torch.Tensor:
    if bandwidth is None:
        h = nadaraya_watson_loo_bandwidth(x_ctx, y_ctx, grid)
    else:
        h = torch.as_tensor(bandwidth, dtype=x_ctx.dtype, device=x_ctx.device).expand(x_ctx.shape[0])
    w = _nw_weights(_sq_dists(x_ctx, x_q), h.unsqueeze(-1))
    return (w * y_ctx).sum(-1)


def least_squares(x_ctx: torch.Tensor, y_ctx: torch.Tensor, x_q: torch.Tensor) -> torch.Tensor:
    w = torch.linalg.pinv(x_ctx) @ y_ctx.unsqueeze(-1)  # X^+ y: minimum-norm least squares, (B, d, 1)
    return (x_q.unsqueeze(1) @ w).reshape(-1)


def _rbf(sq: torch.Tensor, ell: torch.Tensor) -> torch.Tensor:
    return torch.exp(-sq / (2 * ell.square()))


def gp_loo_length_scale(
    x_ctx: torch.Tensor, y_ctx: torch.Tensor, noise: float = 1e-3, grid: tuple[float, ...] = DEFAULT_GRID
) -> torch.Tensor:
    """Per prompt, the RBF length scale of ``grid`` with the smallest closed-form leave-one-out
    squared error (B,). With N = 1: the first grid value."""
    B, N, _ = x_ctx.shape
    g = torch.as_tensor(grid, dtype=x_ctx.dtype, device=x_ctx.device)
    if N < 2:
        return g[0].expand(B)
    sq = _pairwise_sq(x_ctx)
    eye = torch.eye(N, dtype=x_ctx.dtype, device=x_ctx.device)
    errs = []
    for ell in g:
        Kinv = torch.cholesky_solve(eye.expand(B, N, N), torch.linalg.cholesky(_rbf(sq, ell) + noise * eye))
        alpha = (Kinv @ y_ctx.unsqueeze(-1)).squeeze(-1)  # K^{-1} y
        resid = alpha / torch.diagonal(Kinv, dim1=-2, dim2=-1)  # y_i - mu_{-i}(x_i)
        errs.append(resid.square().mean(-1))
    return g[torch.stack(errs, -1).argmin(-1)]


def gp_regression(
    x_ctx: torch.Tensor,
    y_ctx: torch.Tensor,
    x_q: torch.Tensor,
    length_scale: float | torch.Tensor | None = None,
    noise: float = 1e-3,
    grid: tuple[float, ...] = DEFAULT_GRID,
) -> torch.Tensor:
    B, N, _ = x_ctx.shape
    if length_scale is None:
        ell = gp_loo_length_scale(x_ctx, y_ctx, noise, grid)
    else:
        ell = torch.as_tensor(length_scale, dtype=x_ctx.dtype, device=x_ctx.device).expand(B)
    eye = torch.eye(N, dtype=x_ctx.dtype, device=x_ctx.device)
    Kmat = _rbf(_pairwise_sq(x_ctx), ell.view(B, 1, 1)) + noise * eye
    k_q = _rbf(_sq_dists(x_ctx, x_q), ell.view(B, 1))  # (B, N)
    alpha = torch.cholesky_solve(y_ctx.unsqueeze(-1), torch.linalg.cholesky(Kmat))  # (K + s^2 I)^{-1} y
    return (k_q.unsqueeze(1) @ alpha).reshape(-1)


BASELINES = {
    "1-NN": nearest_neighbor,
    "3-NN": knn,
    "Nadaraya-Watson": nadaraya_watson,
    "least squares": least_squares,
    "GP": gp_regression,
    "context mean": context_mean,
}
