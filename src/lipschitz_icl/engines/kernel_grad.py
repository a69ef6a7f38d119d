"""Closed-form loss, gradient and attention of the kernel engine, for R runs stacked.

For run r, a query of feature k and count draw b (context counts c_b), attention gives feature
n the mass a_n = c_n e^{M_kn} / sum_m c_m e^{M_km}. With err = a - e_k and g = Sigma err,

    loss  = 1/2 sum_k p_k mean_b [ err^T Sigma err + tau^2 sum_n a_n^2 / c_n ]
    dL/da = p_k / B (g + tau^2 a / c)                                  (Sigma symmetric)
    dL/dM_kn = sum_b a_n (dL/da_n - sum_m a_m dL/da_m)                 (softmax backward)

so one step costs one (K, K) x (K, B) product per query and a few passes over the (n, k, b)
attention tensor: no autograd graph, and nothing that depends on d or N. The exponentials are
taken once per step on the K x K scores, P = softmax_n(M_kn), and a_n = c_n P_kn / sum_m c_m P_km
needs only products and sums. Where that underflows (every feature present in a prompt has
P_kn = 0, which takes score gaps above ~700 in float64, ~100 in float32) the run is recomputed
with a = softmax_n(log c_n + M_kn), the exact log-space form.

Bitwise reproducibility across batch sizes: every number of run r is computed from run r's
slices only; exponentials only come from a last-dimension softmax (each row computed whole,
by the same vector code); queries are processed in chunks whose size never depends on R; every
reduction keeps at least two outputs per call (so torch never splits one sum across threads);
the log-space fallback runs one run at a time. A run gets the same numbers alone (R = 1) as
inside any batch, which ``tests/test_batch.py`` checks.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from functools import lru_cache

import torch

from .kernel_diag import loss_grad_diag

CHUNK_ELEMENTS = 2**16  # (n, k, b) entries per block of runs and queries: keeps a step in cache, bounds memory


@dataclass
class KernelOut:
    loss: torch.Tensor  # (R,) the population loss
    attn_self: torch.Tensor  # (R, K) Attn_k
    attn: torch.Tensor | None  # (R, K, K) attn[r, k, n] = Attn_{k->n} (when asked for)
    grad: torch.Tensor | None  # (R, K, K) dL/dM (not preconditioned; when asked for)
    tests: dict[str, torch.Tensor] = field(default_factory=dict)  # name -> (R,) loss under a test Sigma
    table: torch.Tensor | None = None  # (R, 2 + K) [loss, min_k Attn_k, Attn_k], when the step made it
    exact_rows: list[int] = field(default_factory=list)  # runs recomputed in log space (P underflowed)

    def summary_table(self) -> torch.Tensor:
        """(R, 2 + K): loss, min_k Attn_k and every Attn_k of each run (what the trainer reads per step)."""
        if self.table is None:
            self.table = torch.cat([self.loss[:, None], self.attn_self.amin(-1)[:, None], self.attn_self], 1)
        return self.table


@lru_cache(maxsize=256)
def query_chunks(K: int, B: int, chunk_elements: int = CHUNK_ELEMENTS) -> list[slice]:
    """Slices of the K queries, about chunk_elements / (B K) queries each, balanced so that every
    slice holds at least 2 (a one-query slice with R = 1 would leave one-output reductions that
    torch may split across threads, changing the rounding). Independent of the number of runs."""
    size = max(2, chunk_elements // max(1, B * K))
    n = max(1, min(-(-K // size), K // 2))  # number of slices
    bounds = [K * i // n for i in range(n + 1)]
    return [slice(bounds[i], bounds[i + 1]) for i in range(n)]


@lru_cache(maxsize=256)
def run_chunks(R: int, rows: int) -> list[slice]:
    """Slices of the R runs, ``rows`` runs each: bounds memory when many runs are stacked."""
    return [slice(start, min(R, start + rows)) for start in range(0, R, rows)]


def symmetrize(sigma: torch.Tensor) -> torch.Tensor:
    """Sigma as exactly symmetric (the closed form uses Sigma err for Sigma^T err)."""
    return 0.5 * (sigma + sigma.transpose(-1, -2))


def diagonal_of(sigma: torch.Tensor) -> torch.Tensor | None:
    """The diagonals (R, K) when every Sigma in the stack is diagonal (linear class on orthonormal
    features), else None. Sigma a is then an elementwise product; with exact zeros off the
    diagonal it equals the matrix product bit for bit, so batches may mix both kinds."""
    d = torch.diagonal(sigma, dim1=1, dim2=2)
    return d.contiguous() if torch.equal(torch.diag_embed(d), sigma) else None


class _Workspace(threading.local):
    """Reusable scratch tensors for the (r, n, k, b) blocks, one set per thread: a step allocates
    no large tensor, so it costs no page faults (fresh large allocations were a third of a
    step's time). Keyed by name and exact shape; forgets everything past a few dozen keys."""

    def __init__(self) -> None:
        self.bufs: dict[tuple, torch.Tensor] = {}

    def get(self, name: str, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
        key = (name, shape, like.dtype, like.device)
        buf = self.bufs.get(key)
        if buf is None:
            if len(self.bufs) >= 48:
                self.bufs.clear()
            buf = self.bufs[key] = torch.empty(shape, dtype=like.dtype, device=like.device)
        return buf


_WS = _Workspace()


def _quad(
    a: torch.Tensor, sigma: torch.Tensor, qs: slice, diag: torch.Tensor | None, g: torch.Tensor, tmp: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """For queries qs, with err = a - e_k and a laid out (r, n, k, b): fills g = Sigma err, and
    returns <a, g> (r, 1, kc, B) and err^T Sigma err = <a, g> - g_k (r, kc, B). ``diag``:
    Sigma's diagonal (r, K) when Sigma is diagonal. g and tmp: scratch of a's shape."""
    r, K, kc, B = a.shape
    if diag is None:
        torch.bmm(sigma, a.view(r, K, kc * B), out=g.view(r, K, kc * B))  # (Sigma a)_n
        g.sub_(sigma[:, :, qs].unsqueeze(-1))  # - Sigma e_k (column k of Sigma)
        g_k = torch.diagonal(g[:, qs], dim1=1, dim2=2).transpose(1, 2)  # (r, kc, B): g at n = k
    else:
        torch.mul(a, diag.view(r, K, 1, 1), out=g)  # (Sigma a)_n = Sigma_nn a_n
        g_k = torch.diagonal(g[:, qs], dim1=1, dim2=2)  # (r, B, kc), a view
        g_k.sub_(diag[:, qs].unsqueeze(1))  # - Sigma e_k: only at n = k
        g_k = g_k.transpose(1, 2)
    ag = torch.mul(a, g, out=tmp).sum(1, keepdim=True)  # <a, g>
    return ag, ag.squeeze(1) - g_k


def _attention(P: torch.Tensor, counts: torch.Tensor, qs: slice, out: torch.Tensor) -> torch.Tensor:
    """a_n = c_n P_kn / sum_m c_m P_km into ``out`` (r, n, k, b). P (r, K, K), counts (r, K, B)."""
    torch.mul(counts.unsqueeze(2), P[:, qs].transpose(1, 2).unsqueeze(-1), out=out)  # c_n P_kn
    return out.div_(out.sum(1, keepdim=True))


def _attention_exact(M: torch.Tensor, counts: torch.Tensor, qs: slice, out: torch.Tensor) -> torch.Tensor:
    """The same as softmax_n(log c_n + M_kn): exact when P underflows (one run at a time)."""
    logits = torch.log(counts).transpose(1, 2).unsqueeze(1) + M[:, qs].unsqueeze(2)  # (r, kc, B, n)
    return out.copy_(torch.softmax(logits, dim=-1).permute(0, 3, 1, 2))


def kernel_loss_grad(
    M: torch.Tensor,
    counts: torch.Tensor,
    inv_c: torch.Tensor | None,
    sigma: torch.Tensor,
    p: torch.Tensor,
    tau2: torch.Tensor | None = None,
    tests: dict[str, torch.Tensor] | None = None,
    need_grad: bool = True,
    full_attn: bool = True,
    chunk_elements: int | None = None,
    sigma_diag: torch.Tensor | None = None,
    weights: torch.Tensor | None = None,
) -> KernelOut:
    """Loss, Attn_k, and optionally the full attention and the closed-form gradient of R runs.

    M (R, K, K) scores M[r, k, n] = v_n^T Q v_k; counts (R, K, B) the count draws c_n (feature
    first); inv_c (R, K, B) 1 / max(c_n, 1) (used only with label noise); sigma (R, K, K)
    symmetric Sigma; p (R, K) p_k; tau2 (R,) tau^2, or None for no label noise; tests:
    name -> (R, K, K) symmetric Sigma of unseen functions, evaluated at the same attention;
    sigma_diag: ``diagonal_of(sigma)`` when the caller knows Sigma is diagonal (a faster path);
    weights (R, B): the probability of each count vector (``engine.counts: exact``, summing to 1), else
    None for the plain mean over B draws.
    """
    chunk_elements = chunk_elements or CHUNK_ELEMENTS
    if weights is not None:
        sigma_diag = None  # the weighted expectation takes the (n, k, b) path
    args = (counts, inv_c, sigma, p, tau2, tests or {}, need_grad, full_attn, chunk_elements, sigma_diag, weights)
    out = _loss_grad(M, *args, exact=False)
    if not math.isfinite(float(out.loss.sum())):  # P underflowed (or a run diverged): redo those runs
        out.exact_rows = (~torch.isfinite(out.loss)).nonzero().flatten().tolist()
        for r in out.exact_rows:
            one = _loss_grad(M[r : r + 1], *_rows(args, r), exact=True)
            for name in ("loss", "attn_self", "attn", "grad"):
                if getattr(out, name) is not None:
                    getattr(out, name)[r] = getattr(one, name)[0]
            for name in out.tests:
                out.tests[name][r] = one.tests[name][0]
    return out


def kernel_test_errors(
    M: torch.Tensor,
    counts: torch.Tensor,
    inv_c: torch.Tensor | None,
    sigma: torch.Tensor,
    p: torch.Tensor,
    tau2: torch.Tensor | None,
    tests: dict[str, torch.Tensor],
    exact_rows: list[int],
) -> dict[str, torch.Tensor]:
    """The test errors alone, the very numbers ``kernel_loss_grad`` returns as ``tests`` for the same runs
    (no weights): ``exact_rows``, the runs it recomputed in log space, are recomputed so here too."""
    args = (counts, inv_c, sigma, p, tau2, tests, False, False, CHUNK_ELEMENTS, None, None)
    out = _loss_grad(M, *args, exact=False, train=False).tests
    for r in exact_rows:
        one = _loss_grad(M[r : r + 1], *_rows(args, r), exact=True, train=False).tests
        for name in out:
            out[name][r] = one[name][0]
    return out


def _rows(args: tuple, r: int) -> tuple:
    counts, inv_c, sigma, p, tau2, tests, need_grad, full_attn, chunk, diag, weights = args
    sl = slice(r, r + 1)
    return (
        counts[sl], None if inv_c is None else inv_c[sl], sigma[sl], p[sl], None if tau2 is None else tau2[sl],
        {k: v[sl] for k, v in tests.items()}, need_grad, full_attn, chunk, None if diag is None else diag[sl],
        None if weights is None else weights[sl],
    )


def _average(x: torch.Tensor, w: torch.Tensor | None) -> torch.Tensor:
    """The expectation over the count draws (last dimension): their mean, or the weighted sum (w (r, B))."""
    if w is None:
        return x.mean(-1)
    return (x * w.view(w.shape[0], *([1] * (x.dim() - 2)), w.shape[1])).sum(-1)


def _loss_grad(
    M: torch.Tensor,
    counts: torch.Tensor,
    inv_c: torch.Tensor | None,
    sigma: torch.Tensor,
    p: torch.Tensor,
    tau2: torch.Tensor | None,
    tests: dict[str, torch.Tensor],
    need_grad: bool,
    full_attn: bool,
    chunk_elements: int,
    diag: torch.Tensor | None,
    weights: torch.Tensor | None,
    exact: bool,
    train: bool = True,
) -> KernelOut:
    """The (n, k, b) tensor path; ``train=False`` computes the test errors only."""
    if diag is not None and not exact:  # diagonal Sigma: matrix products only (kernel_diag)
        return _loss_grad_diagonal(M, counts, inv_c, sigma, p, tau2, tests, need_grad, full_attn, chunk_elements,
                                   diag)
    R, K, _ = M.shape
    B = counts.shape[-1]
    P = None if exact else torch.softmax(M, dim=-1)  # P_kn = e^{M_kn} / sum_m e^{M_km}
    q_slices = query_chunks(K, B, chunk_elements)
    kc_max = max(q.stop - q.start for q in q_slices)
    blocks = [(rs, qs) for rs in run_chunks(R, max(1, chunk_elements // (kc_max * B * K))) for qs in q_slices]
    inputs = (M, P, counts, inv_c, sigma, p, tau2, tests, diag, weights)
    parts = [_block(inputs, rs, qs, need_grad, full_attn, exact, train) for rs, qs in blocks]
    out = parts[0] if len(blocks) == 1 else _assemble(M, blocks, parts)
    tests_out = {name: 0.5 * (p * out["test:" + name]).sum(-1) for name in tests}
    if not train:
        return KernelOut(M.new_zeros(R), M.new_zeros(R, K), None, None, tests_out)
    loss = 0.5 * (p * out["quad"]).sum(-1)
    return KernelOut(loss, out["attn_self"], out.get("attn"), out.get("grad"), tests_out)


def _loss_grad_diagonal(
    M: torch.Tensor, counts: torch.Tensor, inv_c: torch.Tensor | None, sigma: torch.Tensor, p: torch.Tensor,
    tau2: torch.Tensor | None, tests: dict[str, torch.Tensor], need_grad: bool, full_attn: bool,
    chunk_elements: int, diag: torch.Tensor,
) -> KernelOut:
    """Diagonal Sigma (``diag`` (R, K)): loss, attention and gradient from ``kernel_diag`` in
    chunks of runs; the test errors (dense Sigma of unseen functions) from the (n, k, b) path."""
    R, K, B = counts.shape
    pieces = []
    for rs in run_chunks(R, max(1, 4 * chunk_elements // (K * B))):  # bounds the (r, K, B) scratch
        pieces.append(loss_grad_diag(
            M[rs], counts[rs], diag[rs], p[rs], None if tau2 is None else tau2[rs],
            None if inv_c is None else inv_c[rs], need_grad, full_attn,
            lambda name, shape=(rs.stop - rs.start, K, B): _WS.get(name, shape, M),
        ))
    loss, attn_self, attn, grad = (
        None if piece[0] is None else (piece[0] if len(pieces) == 1 else torch.cat(piece))
        for piece in zip(*pieces, strict=True)
    )
    tests_out = {}
    if tests:
        tests_out = _loss_grad(M, counts, inv_c, sigma, p, tau2, tests, False, False, chunk_elements, None, None,
                               False, train=False).tests
    return KernelOut(loss, attn_self, attn, grad, tests_out)


def _block(
    inputs: tuple, rs: slice, qs: slice, need_grad: bool, full_attn: bool, exact: bool, train: bool
) -> dict[str, torch.Tensor]:
    """One block of runs rs and queries qs: its (r, kc[, K]) pieces of the outputs (attn_self,
    attn, test:<name>, quad, grad). ``inputs``: (M, P, counts, inv_c, sigma, p, tau2, tests, diag, weights)."""
    M, P, counts, inv_c, sigma, p, tau2, tests, diag, weights = inputs
    w = None if weights is None else weights[rs]
    K, B = M.shape[1], counts.shape[-1]
    part: dict[str, torch.Tensor] = {}
    c = counts[rs]
    shape = (c.shape[0], K, qs.stop - qs.start, B)  # (r, n, kc, B)
    a, g, tmp = (_WS.get(name, shape, M) for name in ("a", "g", "tmp"))
    if exact:
        _attention_exact(M[rs], c, qs, a)
    else:
        _attention(P[rs], c, qs, a)
    if train:  # Attn_k: the same row-wise mean over b as the full attention, so they agree exactly
        part["attn_self"] = _average(torch.diagonal(a[:, qs], dim1=1, dim2=2).transpose(1, 2).contiguous(), w)
    if full_attn:
        part["attn"] = _average(a, w).transpose(1, 2)  # Attn_{k->n}
    h = noise = None
    if tau2 is not None:
        t2 = tau2[rs].view(-1, 1, 1)
        h = torch.mul(a, inv_c[rs].unsqueeze(2), out=_WS.get("h", shape, M))  # a_n / c_n
        noise = t2 * torch.mul(a, h, out=tmp).sum(1)  # tau^2 sum_n a_n^2 / c_n
    for name, s in tests.items():
        tq = _quad(a, s[rs], qs, None, g, tmp)[1]
        part["test:" + name] = _average(tq if noise is None else tq + noise, w)
    if not train:
        return part
    ag, quad = _quad(a, sigma[rs], qs, None if diag is None else diag[rs], g, tmp)
    part["quad"] = _average(quad if noise is None else quad + noise, w)
    if need_grad:
        if h is not None:
            g.add_(h.mul_(t2.unsqueeze(-1)))  # dL/da up to p_k / B: g + tau^2 a / c
            ag = torch.mul(a, g, out=tmp).sum(1, keepdim=True)
        g.sub_(ag).mul_(a)  # softmax backward: a (g - <a, g>)
        if w is None:
            part["grad"] = g.sum(-1).transpose(1, 2) * (p[rs, qs] / B).unsqueeze(-1)
        else:  # sum_b w_b (...): the weighted expectation's gradient
            part["grad"] = _average(g, w).transpose(1, 2) * p[rs, qs].unsqueeze(-1)
    return part


def _assemble(M: torch.Tensor, blocks: list[tuple[slice, slice]], parts: list[dict]) -> dict[str, torch.Tensor]:
    """Put the blocks' pieces together: (R, K) or (R, K, K) per output."""
    out = {}
    for name, first in parts[0].items():
        buf = M.new_empty(M.shape[:2] + first.shape[2:])
        for (rs, qs), part in zip(blocks, parts, strict=True):
            buf[rs, qs] = part[name]
        out[name] = buf
    return out
