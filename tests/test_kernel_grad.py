"""The kernel engine's closed-form loss, attention and gradient against autograd."""

import pytest
import torch

from lipschitz_icl.engines import kernel_loss, make_generator
from lipschitz_icl.engines.kernel_grad import (
    diagonal_of,
    kernel_loss_grad,
    kernel_test_errors,
    query_chunks,
    symmetrize,
)
from lipschitz_icl.engines.kernel_spec import draw_counts
from lipschitz_icl.features import FeatureSet


def _counts(K: int, B: int, N: int, gen: torch.Generator) -> torch.Tensor:
    fs = FeatureSet(torch.eye(K, dtype=torch.float64), torch.full((K,), 1.0 / K, dtype=torch.float64), 0.0)
    return draw_counts(fs, N, B, gen)


def _case(K: int, B: int, tau: float, dense: bool, seed: int, N: int = 12):
    gen = make_generator(seed, "grad-test")
    c = _counts(K, B, N, gen)
    if dense:
        F = torch.randn(64, K, generator=gen, dtype=torch.float64)
        sigma = symmetrize(F.T @ F / 64)
    else:
        sigma = torch.diag(torch.rand(K, generator=gen, dtype=torch.float64) + 0.1)
    p = torch.rand(K, generator=gen, dtype=torch.float64) + 0.2
    p /= p.sum()
    M = 2 * torch.randn(K, K, generator=gen, dtype=torch.float64)
    return M, c, sigma, p


def _closed(M, c, sigma, p, tau, chunk=None, diag=True):
    t2 = torch.tensor([tau * tau], dtype=M.dtype) if tau else None
    inv = (1 / c.clamp(min=1)).T.contiguous()[None]
    return kernel_loss_grad(
        M[None], c.T.contiguous()[None], inv, sigma[None], p[None], t2, tests={"t": sigma[None]},
        chunk_elements=chunk, sigma_diag=diagonal_of(sigma[None]) if diag else None,
    )


@pytest.mark.parametrize("dense", [True, False])
@pytest.mark.parametrize("tau", [0.0, 0.3])
@pytest.mark.parametrize("chunk", [None, 40])  # 40: many blocks of two queries
def test_closed_form_matches_autograd(dense, tau, chunk):
    M, c, sigma, p = _case(7, 33, tau, dense, seed=3)
    Mg = M.clone().requires_grad_(True)
    loss, attn = kernel_loss(Mg, c, sigma, p, tau=tau)
    loss.backward()
    out = _closed(M, c, sigma, p, tau, chunk)
    torch.testing.assert_close(out.loss[0], loss.detach(), rtol=1e-13, atol=0)
    torch.testing.assert_close(out.tests["t"][0], loss.detach(), rtol=1e-13, atol=0)
    torch.testing.assert_close(out.grad[0], Mg.grad, rtol=1e-11, atol=1e-15)
    torch.testing.assert_close(out.attn[0], attn, rtol=1e-13, atol=1e-15)
    assert torch.equal(out.attn_self[0], torch.diagonal(out.attn[0]))
    assert Mg.grad.abs().max() > 1e-3  # a non-trivial point


def test_mean_field_counts_below_one_and_missing_features():
    """Non-integer counts (mean field with small p) and c_n = 0 use a^2 / max(c, 1) like autograd."""
    K = 6
    c = torch.tensor([[10.0, 0.5, 3.2, 0.0, 7.0, 0.9]], dtype=torch.float64)
    for dense in (True, False):
        M, _, sigma, p = _case(K, 1, 0.3, dense, seed=4)
        Mg = M.clone().requires_grad_(True)
        loss, _ = kernel_loss(Mg, c, sigma, p, tau=0.3)
        loss.backward()
        out = _closed(M, c, sigma, p, 0.3)
        torch.testing.assert_close(out.loss[0], loss.detach(), rtol=1e-13, atol=0)
        torch.testing.assert_close(out.grad[0], Mg.grad, rtol=1e-11, atol=1e-15)


@pytest.mark.parametrize("dense", [True, False])
def test_underflow_falls_back_to_the_exact_form(dense):
    """Score gaps of 2000 make e^{M} underflow; a prompt without the top feature then needs the
    log-space softmax, which the fallback gives exactly."""
    M, c, sigma, p = _case(5, 16, 0.0, dense, seed=5)
    M = torch.zeros_like(M)
    M[:, 0] = 2000.0
    c[3, 0] = 0.0
    c[3, 1] += 3.0
    Mg = M.clone().requires_grad_(True)
    loss, attn = kernel_loss(Mg, c, sigma, p)
    loss.backward()
    out = _closed(M, c, sigma, p, 0.0)
    assert torch.isfinite(out.loss).all()
    torch.testing.assert_close(out.loss[0], loss.detach(), rtol=1e-13, atol=0)
    torch.testing.assert_close(out.grad[0], Mg.grad, rtol=1e-11, atol=1e-15)
    torch.testing.assert_close(out.attn[0], attn, rtol=1e-13, atol=1e-15)


def test_diagonal_and_dense_paths_agree():
    M, c, sigma, p = _case(6, 40, 0.2, dense=False, seed=6)
    a = _closed(M, c, sigma, p, 0.2, diag=True)
    b = _closed(M, c, sigma, p, 0.2, diag=False)
    torch.testing.assert_close(a.loss, b.loss, rtol=1e-13, atol=0)
    torch.testing.assert_close(a.grad, b.grad, rtol=1e-11, atol=1e-16)


def test_query_chunks_cover_every_query_with_at_least_two():
    for K in range(2, 40):
        for B in (1, 7, 300, 5000):
            for elems in (1, 100, 2**16):
                chunks = query_chunks(K, B, elems)
                assert [q for s in chunks for q in range(s.start, s.stop)] == list(range(K))
                assert min(s.stop - s.start for s in chunks) >= 2


@pytest.mark.parametrize("dense", [True, False])
@pytest.mark.parametrize("chunk", [None, 100])  # 100: one run and two queries per block
def test_a_run_gets_the_same_numbers_alone_and_in_a_stack(dense, chunk):
    """The block size must match (it sets the shapes of the matrix products); R must not matter."""
    R, K, B = 6, 5, 64
    cases = [_case(K, B, 0.2, dense, seed=10 + r) for r in range(R)]
    M, c, sigma, p = (torch.stack(x) for x in zip(*cases, strict=True))
    C = c.transpose(1, 2).contiguous()
    inv = 1 / C.clamp(min=1)
    t2 = torch.full((R,), 0.04, dtype=torch.float64)
    diag = diagonal_of(sigma)
    assert (diag is None) == dense
    stack = kernel_loss_grad(M, C, inv, sigma, p, t2, tests={"t": sigma}, chunk_elements=chunk, sigma_diag=diag)
    for r in range(R):
        sl = slice(r, r + 1)
        one = kernel_loss_grad(M[sl], C[sl], inv[sl], sigma[sl], p[sl], t2[sl], tests={"t": sigma[sl]},
                               chunk_elements=chunk, sigma_diag=None if diag is None else diag[sl])
        for name in ("loss", "attn_self", "attn", "grad"):
            assert torch.equal(getattr(one, name)[0], getattr(stack, name)[r]), name
        assert torch.equal(one.tests["t"][0], stack.tests["t"][r])


@pytest.mark.parametrize("dense", [True, False])
def test_test_errors_alone_are_those_of_a_full_step_bit_for_bit(dense):
    """A log step of a diagonal-Sigma batch computes the test errors apart, for the recorded runs only
    (``kernel_test_errors``): the same numbers as ``kernel_loss_grad``'s, also for a run whose attention
    underflowed (recomputed in log space) and for any subset of the runs."""
    R, K, B = 5, 4, 16
    cases = [_case(K, B, 0.2, dense, seed=40 + r, N=3) for r in range(R)]
    M, c, sigma, p = (torch.stack(x) for x in zip(*cases, strict=True))
    M[1, :, 0] = 2000.0  # P_kn underflows for n != 0: prompts without feature 0 need the log-space form
    C = c.transpose(1, 2).contiguous()
    assert (C[1, 0] == 0).any()
    inv, t2 = 1 / C.clamp(min=1), torch.full((R,), 0.04, dtype=torch.float64)
    tests = {"t": sigma, "u": sigma.flip(0)}
    full = kernel_loss_grad(M, C, inv, sigma, p, t2, tests=tests, sigma_diag=diagonal_of(sigma))
    assert full.exact_rows == [1]
    for rows in ([0, 1, 2, 3, 4], [3, 1], [4]):
        idx = torch.tensor(rows)
        alone = kernel_test_errors(M[idx], C[idx], inv[idx], sigma[idx], p[idx], t2[idx],
                                   {k: v[idx] for k, v in tests.items()},
                                   [j for j, r in enumerate(rows) if r in full.exact_rows])
        for name in tests:
            assert torch.equal(alone[name], full.tests[name][idx]), (rows, name)
