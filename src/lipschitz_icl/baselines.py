"""In-context regression baselines, as pure batched torch functions.

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

The methods that need the context's pairwise distances (``USES_DISTANCES``) take them as ``sq_ctx``,
so a caller that runs several of them computes them once.
"""

from __future__ import annotations

import torch

DEFAULT_GRID = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)  # bandwidths / length scales


def _sq_dists(x_ctx: torch.Tensor, x_q: torch.Tensor) -> torch.Tensor:
    """||x_i - x_q||^2, (B, N)."""
    return (x_ctx - x_q.unsqueeze(1)).square().sum(-1)


def pairwise_sq_dists(x_ctx: torch.Tensor) -> torch.Tensor:
    """||x_i - x_j||^2, (B, N, N), exact zeros on the diagonal and between duplicate tokens.

    torch.cdist without the matrix-product shortcut: each distance from its own difference vector,
    so no cancellation (the shortcut ||x||^2 + ||y||^2 - 2 x^T y leaves rounding noise where the
    answer is 0), and no (B, N, N, d) intermediate (about 4 GB at B = 1677, N = 50, d = 64)."""
    return torch.cdist(x_ctx, x_ctx, compute_mode="donot_use_mm_for_euclid_dist").square()


def _spd_inverse(mat: torch.Tensor) -> torch.Tensor:
    """The inverse of a batch of symmetric positive definite matrices, through their Cholesky factor
    (cholesky_inverse: about 3x cheaper than cholesky_solve against an identity)."""
    return torch.cholesky_inverse(torch.linalg.cholesky(mat))


def min_norm_solution(A: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A^+ b, the minimum-norm least-squares solution of a batch (A (..., m, n), b (..., m, k)).

    On the CPU: ``lstsq`` with gelsd, which truncates singular values below eps * max(m, n) * s_max,
    as pinv does, without forming the pseudo-inverse. CUDA's ``lstsq`` has only gels (full rank
    assumed, no minimum norm), so elsewhere: pinv (an SVD, the same default truncation) times b."""
    if A.device.type == "cpu":
        return torch.linalg.lstsq(A, b, driver="gelsd").solution
    return pinv_solution(A, b)


def pinv_solution(A: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A^+ b through the pseudo-inverse (what ``min_norm_solution`` does off the CPU)."""
    return torch.linalg.pinv(A) @ b


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
    x_ctx: torch.Tensor, y_ctx: torch.Tensor, grid: tuple[float, ...] = DEFAULT_GRID,
    sq_ctx: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per prompt, the bandwidth of ``grid`` with the smallest leave-one-out squared error on the
    context (B,). With N = 1 nothing can be left out: the first grid value (irrelevant then).
    ``sq_ctx``: the context's pairwise squared distances, when already computed."""
    B, N, _ = x_ctx.shape
    g = torch.as_tensor(grid, dtype=x_ctx.dtype, device=x_ctx.device)
    if N < 2:
        return g[0].expand(B)
    neg_sq = -(pairwise_sq_dists(x_ctx) if sq_ctx is None else sq_ctx)
    neg_sq.diagonal(dim1=-2, dim2=-1).fill_(-torch.inf)  # leave x_j out: weight 0 on itself
    errs = []
    for h in g:  # one (B, N, N) at a time: memory stays O(B N^2)
        w = torch.softmax(neg_sq / (2 * h * h), dim=-1)
        pred = (w @ y_ctx.unsqueeze(-1)).squeeze(-1)
        errs.append((pred - y_ctx).square().mean(-1))
    return g[torch.stack(errs, -1).argmin(-1)]  # the smallest bandwidth among equal errors


def nadaraya_watson(
    x_ctx: torch.Tensor,
    y_ctx: torch.Tensor,
    x_q: torch.Tensor,
    bandwidth: float | torch.Tensor | None = None,
    grid: tuple[float, ...] = DEFAULT_GRID,
    sq_ctx: torch.Tensor | None = None,
) -> torch.Tensor:
    if bandwidth is None:
        h = nadaraya_watson_loo_bandwidth(x_ctx, y_ctx, grid, sq_ctx)
    else:
        h = torch.as_tensor(bandwidth, dtype=x_ctx.dtype, device=x_ctx.device).expand(x_ctx.shape[0])
    w = _nw_weights(_sq_dists(x_ctx, x_q), h.unsqueeze(-1))
    return (w * y_ctx).sum(-1)


def least_squares(x_ctx: torch.Tensor, y_ctx: torch.Tensor, x_q: torch.Tensor) -> torch.Tensor:
    w = min_norm_solution(x_ctx, y_ctx.unsqueeze(-1))  # X^+ y, the minimum-norm least-squares solution (B, d, 1)
    return (x_q.unsqueeze(1) @ w).reshape(-1)


def _rbf(sq: torch.Tensor, ell: torch.Tensor) -> torch.Tensor:
    return torch.exp(-sq / (2 * ell.square()))


def _gp_loo(
    x_ctx: torch.Tensor, y_ctx: torch.Tensor, noise: float, grid: tuple[float, ...], sq_ctx: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The leave-one-out length scale per prompt (B,) and, at it, alpha = (K + s^2 I)^{-1} y (B, N)
    (None with N = 1, where the first grid value is returned)."""
    B, N, _ = x_ctx.shape
    g = torch.as_tensor(grid, dtype=x_ctx.dtype, device=x_ctx.device)
    if N < 2:
        return g[0].expand(B), None
    neg_sq = -(pairwise_sq_dists(x_ctx) if sq_ctx is None else sq_ctx)
    errs, alphas = [], []
    for ell in g:
        kernel = torch.div(neg_sq, 2 * ell.square()).exp_()  # the RBF kernel K, built in place
        kernel.diagonal(dim1=-2, dim2=-1).add_(noise)  # K + s^2 I
        Kinv = _spd_inverse(kernel)  # (K + s^2 I)^{-1}
        alpha = (Kinv @ y_ctx.unsqueeze(-1)).squeeze(-1)  # K^{-1} y
        resid = alpha / torch.diagonal(Kinv, dim1=-2, dim2=-1)  # y_i - mu_{-i}(x_i)
        errs.append(resid.square().mean(-1))
        alphas.append(alpha)
    best = torch.stack(errs, -1).argmin(-1)  # (B,)
    alpha = torch.stack(alphas, 1).gather(1, best.view(B, 1, 1).expand(B, 1, N)).squeeze(1)
    return g[best], alpha


def gp_loo_length_scale(
    x_ctx: torch.Tensor, y_ctx: torch.Tensor, noise: float = 1e-3, grid: tuple[float, ...] = DEFAULT_GRID,
    sq_ctx: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per prompt, the RBF length scale of ``grid`` with the smallest closed-form leave-one-out
    squared error (B,). With N = 1: the first grid value."""
    return _gp_loo(x_ctx, y_ctx, noise, grid, sq_ctx)[0]


def gp_regression(
    x_ctx: torch.Tensor,
    y_ctx: torch.Tensor,
    x_q: torch.Tensor,
    length_scale: float | torch.Tensor | None = None,
    noise: float = 1e-3,
    grid: tuple[float, ...] = DEFAULT_GRID,
    sq_ctx: torch.Tensor | None = None,
) -> torch.Tensor:
    B, N, _ = x_ctx.shape
    alpha = None
    if length_scale is None:  # the leave-one-out fit already holds alpha at the chosen length scale
        ell, alpha = _gp_loo(x_ctx, y_ctx, noise, grid, sq_ctx)
    else:
        ell = torch.as_tensor(length_scale, dtype=x_ctx.dtype, device=x_ctx.device).expand(B)
    if alpha is None:
        eye = torch.eye(N, dtype=x_ctx.dtype, device=x_ctx.device)
        sq = pairwise_sq_dists(x_ctx) if sq_ctx is None else sq_ctx
        Kmat = _rbf(sq, ell.view(B, 1, 1)) + noise * eye
        alpha = torch.cholesky_solve(y_ctx.unsqueeze(-1), torch.linalg.cholesky(Kmat)).squeeze(-1)  # (K + s^2 I)^{-1} y
    k_q = _rbf(_sq_dists(x_ctx, x_q), ell.view(B, 1))  # (B, N)
    return (k_q * alpha).sum(-1)


def kernel_posterior_mean(
    sigma: torch.Tensor, ids_ctx: torch.Tensor, y_ctx: torch.Tensor, ids_q: torch.Tensor, noise: float
) -> torch.Tensor:
    """k_q^T (K + tau^2 I)^+ y with K_ij = Sigma[z_i, z_j], k_q,i = Sigma[z_q, z_i] (B,): regression on
    the feature ids z with the task class's own kernel Sigma_nm = E_f[f(v_n) f(v_m)] and the true
    label-noise variance tau^2 (``noise``). The minimum-norm solution when K is singular (repeated
    features, tau = 0). It is the best predictor linear in the labels given the ids; it is the
    posterior mean, so Bayes-optimal, where f's values on the features are jointly elliptical and the
    labels exact (the linear class, w uniform on a sphere, with tau = 0 and noise-free tokens)."""
    K = sigma[ids_ctx.unsqueeze(-1), ids_ctx.unsqueeze(-2)]  # (B, n, n)
    if noise > 0:
        K = K + noise * torch.eye(K.shape[-1], dtype=K.dtype, device=K.device)
    k_q = sigma[ids_q.unsqueeze(-1), ids_ctx]  # (B, n)
    alpha = min_norm_solution(K, y_ctx.unsqueeze(-1).to(K.dtype)).squeeze(-1)
    return (k_q * alpha).sum(-1).to(y_ctx.dtype)


USES_DISTANCES = frozenset({"Nadaraya-Watson", "GP"})  # baselines that take ``sq_ctx``, shared within a prompt

BASELINES = {
    "1-NN": nearest_neighbor,
    "3-NN": knn,
    "Nadaraya-Watson": nadaraya_watson,
    "least squares": least_squares,
    "GP": gp_regression,
    "context mean": context_mean,
}
