"""R kernel-engine runs stacked into one tensor program (S space, plain gradient steps).

Runs may differ in everything that does not change a tensor's shape: L, task class (Sigma),
eta, seed (count draws, test functions), p_k, N, label noise, stopping rules. They must share
K, the number of count draws B, dtype, device, whether counts are redrawn each step, whether
label noise is on, whether G = V^T V is the identity, and the names of their test sets.
Finished runs leave the batch (``keep``), so the remaining ones run at their own cost.

``engine.fused: true`` (``KernelSpec.fused``) takes ``step`` and ``update`` through the compiled
step of ``kernel_fused`` (numba, imported only then: its import costs ~0.4 s); ``step_unfused``
stays callable on any batch, for the benchmark and the equality tests.
"""

from __future__ import annotations

import importlib

import numpy as np
import torch

from .kernel_grad import KernelOut, diagonal_of, kernel_loss_grad, kernel_test_errors
from .kernel_spec import KernelSpec


def batch_key(spec: KernelSpec) -> tuple:
    """Runs with equal keys can share a KernelBatch."""
    return (
        spec.K, spec.counts.shape[0], spec.dtype, str(spec.device), spec.resample, spec.tau > 0,
        spec.gram is None, tuple(spec.tests), spec.space, spec.sigma_diagonal() is not None,
        spec.fused, spec.weights is not None,
    )


class KernelBatch:
    def __init__(self, specs: list[KernelSpec], lrs: list[float]) -> None:
        keys = {batch_key(s) for s in specs}
        if len(keys) != 1:
            raise ValueError(f"runs of different shapes cannot be batched: {sorted(map(str, keys))}")
        if specs[0].space != "S":
            raise ValueError("the batched kernel trainer works in S space")
        s0 = specs[0]
        self.specs = list(specs)
        self.device, self.dtype = s0.device, s0.dtype
        self.resample, self.noisy = s0.resample, s0.tau > 0
        self.fused = s0.fused
        if self.fused and self.device.type != "cpu":
            raise ValueError("the fused kernel step runs on the CPU only")
        self._fused = None  # kernel_fused.FusedState: views of this batch's tensors, built at the first step
        self.M = torch.stack([s.M0 for s in specs]).clone()  # (R, K, K) scores M = V^T Q^T V
        self.sigma = torch.stack([s.sigma for s in specs])  # (R, K, K) Sigma
        self.diag = diagonal_of(self.sigma)  # (R, K) when every Sigma is diagonal
        self.tests = {name: torch.stack([s.tests[name] for s in specs]) for name in s0.tests}
        self.p = torch.stack([s.p for s in specs])  # (R, K) p_k
        self.tau2 = (
            torch.tensor([s.tau**2 for s in specs], dtype=self.dtype, device=self.device) if self.noisy else None
        )
        self.G = None if s0.gram is None else torch.stack([s.gram for s in specs])  # G = V^T V
        self.lr = torch.tensor(lrs, dtype=self.dtype, device=self.device).view(-1, 1, 1)  # eta
        self._set_counts([s.counts for s in specs])
        # (R, B) probability of each count vector (engine.counts: exact), else None: the mean over draws
        self.weights = None if s0.weights is None else torch.stack([s.weights for s in specs])
        self.grad: torch.Tensor | None = None

    @property
    def R(self) -> int:
        return self.M.shape[0]

    def _set_counts(self, counts: list[torch.Tensor]) -> None:
        pairs = [s.count_inputs(c) for s, c in zip(self.specs, counts, strict=True)]
        self.counts = torch.stack([c for c, _ in pairs])  # (R, K, B) counts c_n, feature first
        self.inv_c = torch.stack([i for _, i in pairs]) if self.noisy else None  # 1 / max(c_n, 1)
        if self._fused is not None:
            self._fused.set_counts(self.counts, self.inv_c)

    def redraw(self) -> None:
        """Fresh count draws for every run, each from its own generator (SGD)."""
        if self.resample:
            self._set_counts([s.new_counts() for s in self.specs])

    def step(self, full: bool = False, want: np.ndarray | None = None) -> KernelOut:
        """Loss, Attn_k and the preconditioned gradient G (dL/dM) G of every run; with ``full``
        also the whole attention matrix and the test errors (what a log step records; ``want`` (R,): of the runs
        that record, which the fused step alone takes, leaving the others' NaN). Fused or not as the runs'
        ``engine.fused`` says."""
        return self.step_fused(full, want) if self.fused else self.step_unfused(full)

    def step_unfused(self, full: bool = False) -> KernelOut:
        """``step`` by ``kernel_loss_grad``: ~67 torch operator calls at the quickstart's size. With a
        diagonal Sigma the test errors are left to ``test_errors`` (they cost more than the step there and
        share nothing with it, and a log step records about half the runs of the batch)."""
        tests = self.tests if full and not self._tests_apart() else None
        out = kernel_loss_grad(
            self.M, self.counts, self.inv_c, self.sigma, self.p, self.tau2,
            tests, need_grad=True, full_attn=full, sigma_diag=self.diag, weights=self.weights,
        )
        return self._precondition(out)

    def step_fused(self, full: bool = False, want: np.ndarray | None = None) -> KernelOut:
        """``step`` by one compiled call (``kernel_fused``; needs numba). Its output tensors are
        buffers that the next fused step overwrites."""
        if self._fused is None or self._fused.M_t is not self.M:  # first step, or M was replaced
            self._fused = importlib.import_module(".kernel_fused", __package__).FusedState(self)
        return self._precondition(self._fused.step(full, want))

    def quiet_inputs(self) -> tuple[tuple, object] | None:
        """The fused step's arguments and eta (NumPy views of this batch) for steps made in one compiled loop
        (``stopping_compiled.quiet_steps``), or None where a step needs Python: unfused, counts redrawn each
        step, a preconditioner G, or no fused state built yet (or runs have left since)."""
        f = self._fused
        if f is None or f.M_t is not self.M or self.resample or self.G is not None:
            return None
        return (f.M, f.counts, f.inv_c, f.sigma, f.diag, f.p, f.tau2, f.no_T, f.summary, f.attn, f.grad,
                f.tests, f.every_run), f.lr

    def _precondition(self, out: KernelOut) -> KernelOut:
        """G (dL/dM) G when G != I; keeps it for ``update``."""
        if self.G is not None:
            out.grad = torch.bmm(torch.bmm(self.G, out.grad), self.G)
        self.grad = out.grad
        return out

    def _tests_apart(self) -> bool:
        """Whether a full unfused step leaves the test errors to ``test_errors``: diagonal Sigma (kernel_diag),
        where they are a separate computation anyway."""
        return self.diag is not None and self.weights is None

    def test_errors(self, rows: list[int], out: KernelOut) -> dict[str, torch.Tensor]:
        """The test errors of ``rows`` at the current scores: taken from ``out`` (the step just made) where it
        holds them, else computed for these rows only, with the same numbers as in a full step."""
        idx = torch.tensor(rows, dtype=torch.long, device=self.device)
        if out.tests or not self.tests:
            return {name: t.index_select(0, idx) for name, t in out.tests.items()}
        exact = set(out.exact_rows)
        return kernel_test_errors(*self._inputs_of(idx), [j for j, r in enumerate(rows) if r in exact])

    def evaluate(self, rows: list[int]) -> KernelOut:
        """Attention and test errors at the current scores, for some rows (no gradient)."""
        idx = torch.tensor(rows, dtype=torch.long, device=self.device)
        return kernel_loss_grad(
            *self._inputs_of(idx), need_grad=False, full_attn=True,
            sigma_diag=None if self.diag is None else self.diag[idx],
            weights=None if self.weights is None else self.weights[idx],
        )

    def _inputs_of(self, idx: torch.Tensor) -> tuple:
        """(M, counts, inv_c, sigma, p, tau2, tests) of the rows ``idx``: what the loss of those runs reads."""
        return (self.M[idx], self.counts[idx], None if self.inv_c is None else self.inv_c[idx], self.sigma[idx],
                self.p[idx], None if self.tau2 is None else self.tau2[idx], {k: v[idx] for k, v in self.tests.items()})

    def update(self) -> None:
        """One gradient step of size eta on every run: M <- M - eta G (dL/dM) G (fused: in place)."""
        if self._fused is not None and self._fused.M_t is self.M:
            self._fused.update(self.grad)
        else:
            self.M = self.M - self.lr * self.grad

    def keep(self, rows: list[int]) -> None:
        """Keep only these rows (runs that are still training), in this order."""
        if rows == list(range(self.R)):
            return
        idx = torch.tensor(rows, dtype=torch.long, device=self.device)
        self.specs = [self.specs[i] for i in rows]
        for name in ("M", "sigma", "diag", "p", "tau2", "G", "lr", "counts", "inv_c", "grad", "weights"):
            t = getattr(self, name)
            if t is not None:
                setattr(self, name, t.index_select(0, idx))
        self.tests = {k: v.index_select(0, idx) for k, v in self.tests.items()}
        self._fused = None
