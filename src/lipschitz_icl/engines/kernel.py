"""The kernel engine: exact population loss for noise-free tokens, in K x K space.

A query of feature k with context counts c gives feature n the attention mass
a_n = c_n e^{M_kn} / sum_m c_m e^{M_km}, with M_kn = v_n^T Q v_k, and after averaging over f
the squared error is (a - e_k)^T Sigma (a - e_k); label noise tau adds tau^2 sum_n a_n^2 / c_n.
The expectation over the query's feature is exact (weights p_k); over counts it uses B fixed
multinomial draws (common random numbers) or the mean-field counts N p.

Gradient descent on Q moves M by -eta G (grad_M) G with G = V^T V, so in ``S`` space the
engine optimises the K x K score matrix directly (cost independent of d and N); in ``Q``
space it keeps Q (d x d) and lets autograd go through M = V^T Q^T V (needed for Adam, whose
update is not equivariant to that change of variables).
"""

from __future__ import annotations

import torch

from ..features import FeatureSet
from ..tasks import TaskClass
from .base import Engine, StepOutput, make_generator

CHUNK_ELEMENTS = 2**22  # queries are processed in chunks of about this many (k, b, n) entries


def draw_counts(fs: FeatureSet, N: int, B: int, gen: torch.Generator) -> torch.Tensor:
    """B multinomial(N, p) count vectors, (B, K) float."""
    out = torch.zeros(B, fs.K, dtype=fs.V.dtype)
    rows_per = max(1, CHUNK_ELEMENTS // max(N, 1))
    for start in range(0, B, rows_per):
        rows = min(rows_per, B - start)
        ids = torch.multinomial(fs.p.cpu(), rows * N, replacement=True, generator=gen).view(rows, N)
        out[start : start + rows].scatter_add_(1, ids, torch.ones(rows, N, dtype=out.dtype))
    return out


def kernel_loss(
    M: torch.Tensor,
    counts: torch.Tensor,
    sigma: torch.Tensor,
    p: torch.Tensor,
    tau: float = 0.0,
    queries: slice | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Population loss of the queries in ``queries`` (their p-weighted share) and their attention.

    M (K, K) scores M[k, n]; counts (B, K); sigma (K, K); p (K,). Returns (loss, attn[k, n]).
    """
    K = M.shape[0]
    q = queries or slice(0, K)
    ks = torch.arange(K, device=M.device)[q]
    log_c = torch.log(counts)  # -inf where c_n = 0: no token of feature n in the prompt
    logits = log_c.unsqueeze(0) + M[q].unsqueeze(1)  # (k, B, n)
    a = torch.softmax(logits, dim=-1)
    e_k = torch.eye(K, dtype=M.dtype, device=M.device)[ks]
    err = a - e_k.unsqueeze(1)  # a - e_k
    quad = torch.einsum("kbn,nm,kbm->kb", err, sigma, err)
    if tau > 0:
        quad = quad + tau**2 * (a.square() / counts.clamp(min=1.0).unsqueeze(0)).sum(-1)
    loss = 0.5 * (p[q] * quad.mean(1)).sum()
    return loss, a.mean(1)


class KernelEngine(Engine):
    def __init__(
        self,
        fs: FeatureSet,
        task: TaskClass,
        sigma: torch.Tensor,
        N: int,
        *,
        draws: int,
        mean_field: bool,
        resample: bool,
        space: str,
        tau: float,
        seed: int,
        test_sigmas: dict[str, torch.Tensor],
        Q0: torch.Tensor,
        device: torch.device,
    ) -> None:
        self.fs, self.task, self.N, self.tau = fs, task, N, tau
        self.device = device
        self.V = fs.V.to(device)
        self.p = fs.p.to(device)
        self.sigma = sigma.to(device)  # Sigma, the task kernel on the features
        self.test_sigmas = {k: v.to(device) for k, v in test_sigmas.items()}
        self.mean_field, self.resample, self.draws = mean_field, resample, draws
        self.count_gen = make_generator(seed, "counts")
        self.counts = self._new_counts()
        self.space = space
        if space == "S":
            # M = V^T Q^T V; GD on Q is GD on M with the gradient preconditioned by G = V^T V
            self.M = (self.V.T @ Q0.to(device).T @ self.V).clone().requires_grad_(True)
            G = fs.gram.to(device)
            if not torch.allclose(G, torch.eye(fs.K, dtype=G.dtype, device=device)):
                self.M.register_hook(lambda g: G @ g @ G)
            self._params = [self.M]
        else:
            self.Q = Q0.to(device).clone().requires_grad_(True)
            self._params = [self.Q]

    def _new_counts(self) -> torch.Tensor:
        if self.mean_field:
            return (self.N * self.fs.p).unsqueeze(0).to(self.device)
        return draw_counts(self.fs, self.N, self.draws, self.count_gen).to(self.device)

    def parameters(self) -> list[torch.Tensor]:
        return self._params

    def _scores(self) -> torch.Tensor:
        if self.space == "S":
            return self.M
        return self.V.T @ self.Q.T @ self.V

    def scores(self) -> torch.Tensor:
        return self._scores().detach()

    def model_state(self) -> dict[str, torch.Tensor]:
        """{"Q": Q}. In S space Q is the minimum-norm matrix with V^T Q^T V = M:
        Q = V^{+T} M^T V^+ (exact whenever M is of that form, which GD from V^T Q0^T V keeps)."""
        if self.space == "Q":
            return {"Q": self.Q.detach().cpu().clone()}
        V_pinv = torch.linalg.pinv(self.V)  # V^+, (K, d)
        return {"Q": (V_pinv.T @ self.M.detach().T @ V_pinv).cpu()}

    def _chunks(self):
        K, B = self.fs.K, self.counts.shape[0]
        size = max(1, CHUNK_ELEMENTS // max(1, B * K))
        for start in range(0, K, size):
            yield slice(start, min(K, start + size))

    def forward_backward(self) -> StepOutput:
        if self.resample and not self.mean_field:
            self.counts = self._new_counts()
        for p in self._params:
            p.grad = None
        total, attn_rows = 0.0, []
        for q in self._chunks():
            loss, attn = kernel_loss(self._scores(), self.counts, self.sigma, self.p, self.tau, q)
            loss.backward()
            total += float(loss.detach())
            attn_rows.append(attn.detach())
        return StepOutput(total, torch.cat(attn_rows))

    @torch.no_grad()
    def evaluate(self, sigma: torch.Tensor) -> float:
        M = self._scores()
        return sum(
            float(kernel_loss(M, self.counts, sigma, self.p, self.tau, q)[0]) for q in self._chunks()
        )

    def test_errors(self) -> dict[str, float]:
        return {name: self.evaluate(s) for name, s in self.test_sigmas.items()}
