"""The geometry of a trained attention head: its key-query matrix and the window it attends over.

Scalar metrics, recorded per logged step (``eval.geometry``; names as in metrics.parquet):

    Q_norm_2, Q_norm_F   spectral and Frobenius norm of the merged key-query matrix Q (Q for
                         reduced, W_K^T W_Q / sqrt(d_k) for factored, Gamma for linear attention)
    Q_eig_max, Q_eig_min largest and smallest eigenvalue of sym(Q) = (Q + Q^T) / 2
    Q_eig_ratio          the eigenvalue spread Q_eig_max / Q_eig_min, when Q_eig_min > 0 (1 for an
                         isotropic Q = q I); NaN otherwise (Q = 0, an indefinite or rank-deficient Q)
    window               r_1/2, the distance from the query at which the attention weight of a
                         token halves, relative to a token at the query itself (below)
    n_eff                effective number of attended tokens, (sum_i |a_i|)^2 / sum_i a_i^2 per
                         prompt (= 1 / sum_i a_i^2 for softmax weights), mean over the prompts
    attn_distance        sum_i |a_i| ||x_i - x_q|| / sum_i |a_i| per prompt (the attention-weighted
                         distance to the query), mean over the prompts

The window. With logits s_i = x_i^T Q x_q and s_q = x_q^T Q x_q (the logit a token placed at the
query would get), a token's weight relative to that token is rho_i = exp(s_i - s_q) for softmax
attention and rho_i = s_i / s_q for linear attention (the normaliser cancels in both). Over all
(prompt, token) pairs of the evaluation prompts, with r_i = ||x_i - x_q||, least squares through
rho = 1 at r = 0 fits the model's own profile:
    softmax: s_i - s_q = -beta r_i^2            (rho = exp(-beta r^2)),  window = sqrt(ln 2 / beta)
    linear:  s_i - s_q = -beta s_q r_i^2        (rho = 1 - beta r^2),    window = sqrt(1 / (2 beta))
and ``window`` is where the fitted rho is 1/2: exact for an isotropic Q = q I on the sphere, where
s_i - s_q = -q r_i^2 / 2 (softmax: window = sqrt(2 ln 2 / q), shrinking as q grows; linear: 1,
whatever q). +inf when beta <= 0 (the weights do not fall with distance: Q = 0 for softmax);
NaN when the fit has no data (linear attention at Gamma = 0, where every weight is 0).
"""

from __future__ import annotations

import math

import numpy as np
import torch

MATRIX_METRICS = ("Q_norm_2", "Q_norm_F", "Q_eig_max", "Q_eig_min", "Q_eig_ratio")
WINDOW_METRICS = ("window", "n_eff", "attn_distance")
GEOMETRY_METRICS = (*MATRIX_METRICS, *WINDOW_METRICS)
CHUNK_ELEMENTS = 2**22  # kernel-engine metrics are computed over the records in chunks of about this size


def matrix_metrics(Q: torch.Tensor) -> dict[str, torch.Tensor]:
    """MATRIX_METRICS of Q (..., d, d), each of shape (...); computed in float64."""
    Q = Q.double()
    eig = torch.linalg.eigvalsh(0.5 * (Q + Q.transpose(-1, -2)))  # ascending, of sym(Q)
    lo, hi = eig[..., 0], eig[..., -1]
    return {
        "Q_norm_2": torch.linalg.matrix_norm(Q, ord=2),
        "Q_norm_F": torch.linalg.matrix_norm(Q),
        "Q_eig_max": hi,
        "Q_eig_min": lo,
        "Q_eig_ratio": torch.where(lo > 0, hi / lo.clamp(min=1e-300), torch.full_like(hi, math.nan)),
    }


def window_of(delta: torch.Tensor, r2: torch.Tensor, weight: torch.Tensor, s_q: torch.Tensor | None,
              dims: tuple[int, ...]) -> torch.Tensor:
    """r_1/2 from pairs (delta = s_i - s_q, r2 = r_i^2, weight of the pair) reduced over ``dims``:
    softmax when ``s_q`` is None, linear attention otherwise (see the module doc)."""
    if s_q is None:  # softmax: delta = -beta r^2
        num, den = -(weight * r2 * delta).sum(dims), (weight * r2.square()).sum(dims)
        half = math.log(2.0)
    else:  # linear: delta = -beta s_q r^2
        u = -s_q * r2
        num, den = (weight * u * delta).sum(dims), (weight * u.square()).sum(dims)
        half = 0.5
    beta = num / torch.where(den > 0, den, torch.ones_like(den))
    out = torch.sqrt(half / beta.clamp(min=1e-300))
    out = torch.where(beta > 0, out, torch.full_like(out, math.inf))
    return torch.where(den > 0, out, torch.full_like(out, math.nan))


def _spread(w: torch.Tensor, dist: torch.Tensor, dim: int = -1) -> tuple[torch.Tensor, torch.Tensor]:
    """Per prompt: n_eff = (sum |w|)^2 / sum w^2 and sum |w| r / sum |w| (NaN where every w is 0)."""
    mass, sq = w.abs().sum(dim), w.square().sum(dim)
    safe_mass = torch.where(mass > 0, mass, torch.full_like(mass, math.nan))
    return safe_mass.square() / torch.where(sq > 0, sq, torch.full_like(sq, math.nan)), \
        (w.abs() * dist).sum(dim) / safe_mass


def query_distances(x_ctx: torch.Tensor, x_q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(r_i^2, r_i) = (||x_i - x_q||^2, ||x_i - x_q||) of evaluation prompts, (P, N) each, float64."""
    r2 = (x_ctx.double() - x_q.double().unsqueeze(1)).square().sum(-1)
    return r2, r2.sqrt()


def prompt_metrics(Q: torch.Tensor, x_ctx: torch.Tensor, x_q: torch.Tensor, linear: bool,
                   distances: tuple[torch.Tensor, torch.Tensor] | None = None) -> dict[str, float]:
    """GEOMETRY_METRICS of a merged key-query matrix Q (d, d) on evaluation prompts: contexts x_ctx
    (P, N, d), queries x_q (P, d); the weights are softmax_i(s_i) or, for linear attention, s_i / N.
    ``distances``: ``query_distances`` of the same prompts, when the caller keeps them."""
    Q, x_ctx, x_q = Q.double(), x_ctx.double(), x_q.double()
    qx = x_q @ Q.T  # Q x_q, (P, d)
    s = torch.bmm(x_ctx, qx.unsqueeze(-1)).squeeze(-1)  # s_i = x_i^T Q x_q, (P, N)
    s_q = (x_q * qx).sum(-1, keepdim=True)  # x_q^T Q x_q, (P, 1)
    r2, r = distances if distances is not None else query_distances(x_ctx, x_q)
    weights = s / s.shape[1] if linear else torch.softmax(s, dim=-1)
    n_eff, dist = _spread(weights, r)
    window = window_of(s - s_q, r2, torch.ones_like(r2), s_q.expand_as(s) if linear else None, (0, 1))
    out = {k: float(v) for k, v in matrix_metrics(Q).items()}
    return {**out, "window": float(window), "n_eff": float(n_eff.mean()), "attn_distance": float(dist.mean())}


def kernel_metrics(M: np.ndarray, V: torch.Tensor, counts: torch.Tensor, p: torch.Tensor,
                   linear: bool) -> dict[str, np.ndarray]:
    """GEOMETRY_METRICS of T recorded steps of a kernel-engine run from its scores M (T, K, K),
    M_kn = v_n^T Q v_k: the features V (d, K), the evaluation count draws counts (B, K) (tokens of
    feature n in a context) and p (K,), the query's feature law. Q is the minimum-norm matrix with
    V^T Q^T V = M (what params.pt holds). Every token of feature n is v_n, so a query of feature k
    puts per-token weight t_kn = exp(M_kn) / sum_m c_m exp(M_km) (softmax) or M_kn / N (linear) on
    each of its c_n tokens, at distance ||v_k - v_n||."""
    T = M.shape[0]
    out: dict[str, list[np.ndarray]] = {k: [] for k in GEOMETRY_METRICS}
    V = V.double().cpu()
    (d, K), B = V.shape, counts.shape[0]
    V_pinv = torch.linalg.pinv(V)  # V^+, (K, d)
    G = V.T @ V
    sq = torch.diagonal(G)
    dist2 = (sq[:, None] + sq[None, :] - 2 * G).clamp(min=0).fill_diagonal_(0.0)  # ||v_k - v_n||^2
    rows = max(1, CHUNK_ELEMENTS // max(1, K * K * B, d * d))
    c = counts.double().cpu()
    log_c = torch.log(c)  # -inf where no token of feature n
    c_mean, w_kn = c.mean(0), p.double().unsqueeze(1)  # E[c_n]; the query's weight p_k
    for lo in range(0, T, rows):
        Mt = torch.as_tensor(M[lo: lo + rows], dtype=torch.float64)  # (t, K, K)
        Q = V_pinv.T @ Mt.transpose(1, 2) @ V_pinv  # Q = V^{+T} M^T V^+, (t, d, d)
        for key, v in matrix_metrics(Q).items():
            out[key].append(v.numpy())
        diag = torch.diagonal(Mt, dim1=1, dim2=2).unsqueeze(-1)  # M_kk = s_q
        pair_w = w_kn * c_mean  # p_k E[c_n]: how often a (query k, token n) pair occurs
        r2 = dist2.expand_as(Mt)
        window = window_of(Mt - diag, r2, pair_w.expand_as(Mt), diag.expand_as(Mt) if linear else None, (1, 2))
        out["window"].append(window.numpy())
        if linear:  # per-token weight M_kn / N on each of c_n tokens; N cancels in both ratios
            mass = (c[None, None] * Mt.abs().unsqueeze(2))  # (t, K, B, K): c_n |M_kn|
            sq = (c[None, None] * Mt.square().unsqueeze(2)).sum(-1)
            tot = mass.sum(-1)
            n_eff = tot.square() / sq
            dist = (mass * dist2.sqrt()[None, :, None, :]).sum(-1) / tot
        else:  # log t_kn = M_kn - logsumexp_m (log c_m + M_km)
            logits = log_c[None, None] + Mt.unsqueeze(2)  # (t, K, B, K)
            log_t = Mt.unsqueeze(2) - torch.logsumexp(logits, -1, keepdim=True)
            n_eff = torch.exp(-torch.logsumexp(log_c[None, None] + 2 * log_t, -1))
            dist = (torch.softmax(logits, -1) * dist2.sqrt()[None, :, None, :]).sum(-1)
        pk = p.double()[None, :]
        out["n_eff"].append((pk * n_eff.mean(-1)).sum(-1).numpy())
        out["attn_distance"].append((pk * dist.mean(-1)).sum(-1).numpy())
    return {k: np.concatenate(v) for k, v in out.items()}
