"""tasks.spectral: the closed-form spectral norm of matrices with at most 3 columns agrees with the SVD's."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lipschitz_icl.tasks.spectral import spectral_norm

TOL = {torch.float32: 2e-7, torch.float64: 1e-13}  # relative: a float32 result is rounded once, from float64


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("cols", [1, 2, 3, 4])
def test_matches_the_svd(cols, dtype):
    w = torch.randn(500, 32, cols, generator=torch.Generator().manual_seed(cols), dtype=dtype)
    ref = torch.linalg.matrix_norm(w.double(), ord=2)
    got = spectral_norm(w)
    assert got.dtype == dtype and got.shape == (500,)
    tol = TOL[dtype] if cols <= 3 else 10 * TOL[dtype]  # wider ones: the SVD in the input's own dtype
    assert float(((got.double() - ref) / ref).abs().max()) < tol


def test_degenerate_spectra():
    w = torch.zeros(3, 4, 3, dtype=torch.float64)
    w[0, :3] = 2 * torch.eye(3)  # three equal singular values: G = 4 I
    w[1, 0, 0], w[1, 1, 1] = 5.0, 5.0  # two equal, the third 0
    torch.testing.assert_close(spectral_norm(w), torch.tensor([2.0, 5.0, 0.0], dtype=torch.float64))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 3), st.floats(1e-3, 1e3))
def test_scale_and_rotation_invariance(seed, cols, scale):
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(4, 6, cols, generator=gen, dtype=torch.float64)
    rot, _ = torch.linalg.qr(torch.randn(6, 6, generator=gen, dtype=torch.float64))
    ref = torch.linalg.matrix_norm(w, ord=2)
    torch.testing.assert_close(spectral_norm(scale * (rot @ w)), scale * ref, rtol=1e-12, atol=0)
