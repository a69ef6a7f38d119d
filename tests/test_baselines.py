"""Each in-context baseline against a small case computed by hand."""

import math

import pytest
import torch

from lipschitz_icl import baselines as bl
from lipschitz_icl.bench.timing import peak_memory_mb

T = torch.float64


def _t(v):
    return torch.tensor(v, dtype=T)


# one prompt, 1-d inputs: x = 0, 1, 3 with labels 10, 20, 30; the query at 1.2
X = _t([[[0.0], [1.0], [3.0]]])
Y = _t([[10.0, 20.0, 30.0]])
XQ = _t([[1.2]])


def test_nearest_neighbor():
    assert bl.nearest_neighbor(X, Y, XQ).tolist() == [20.0]
    # ties go to the first context token
    assert bl.nearest_neighbor(_t([[[0.0], [2.0]]]), _t([[5.0, 7.0]]), _t([[1.0]])).tolist() == [5.0]


def test_knn():
    assert bl.knn(X, Y, XQ, k=2).tolist() == [15.0]  # the two closest: 1 (20) and 0 (10)
    assert bl.knn(X, Y, XQ, k=10).tolist() == [20.0]  # k capped at N: the mean of all three


def test_context_mean():
    assert bl.context_mean(X, Y, XQ).tolist() == [20.0]


def test_nadaraya_watson_fixed_bandwidth():
    # h = 1: weights proportional to exp(-d^2 / 2), d^2 = 1.44, 0.04, 3.24
    w = [math.exp(-1.44 / 2), math.exp(-0.04 / 2), math.exp(-3.24 / 2)]
    expected = (10 * w[0] + 20 * w[1] + 30 * w[2]) / sum(w)
    assert bl.nadaraya_watson(X, Y, XQ, bandwidth=1.0).item() == pytest.approx(expected, rel=1e-12)


def test_nadaraya_watson_leave_one_out_bandwidth():
    # two tight clusters with different labels: a small bandwidth predicts each left-out point from
    # its twin exactly; a large one averages the clusters. LOO picks 0.1 of (0.1, 10).
    x = _t([[[0.0], [0.01], [5.0], [5.01]]])
    y = _t([[0.0, 0.0, 1.0, 1.0]])
    h = bl.nadaraya_watson_loo_bandwidth(x, y, grid=(0.1, 10.0))
    assert h.tolist() == [0.1]
    assert bl.nadaraya_watson(x, y, _t([[4.9]]), grid=(0.1, 10.0)).item() == pytest.approx(1.0, abs=1e-9)
    # LOO on a single context token is undefined: the first grid value
    assert bl.nadaraya_watson_loo_bandwidth(x[:, :1], y[:, :1], grid=(0.3, 1.0)).tolist() == [0.3]


def test_least_squares_minimum_norm():
    # rank-deficient: x = (1, 0), (2, 0) with y = 2, 4. The minimum-norm solution is w = (2, 0).
    x = _t([[[1.0, 0.0], [2.0, 0.0]]])
    y = _t([[2.0, 4.0]])
    assert bl.least_squares(x, y, _t([[3.0, 5.0]])).item() == pytest.approx(6.0, rel=1e-12)
    # full rank, overdetermined: the least-squares fit of y = 1 + 2x through the origin on x = 1, 2, 3
    # with y = 3, 5, 7: w = sum x y / sum x^2 = 34 / 14
    x = _t([[[1.0], [2.0], [3.0]]])
    y = _t([[3.0, 5.0, 7.0]])
    assert bl.least_squares(x, y, _t([[1.0]])).item() == pytest.approx(34 / 14, rel=1e-12)


def test_gp_regression_by_hand():
    s2 = 0.01
    # one example: k_q = exp(-1/2), K = 1 + s^2
    one = bl.gp_regression(_t([[[0.0]]]), _t([[1.0]]), _t([[1.0]]), length_scale=1.0, noise=s2)
    assert one.item() == pytest.approx(math.exp(-0.5) / (1 + s2), rel=1e-12)
    # two examples at 0 and 1 with labels 1, -1, query at 0.5, length scale 1
    k = math.exp(-0.5)
    a, b = 1 + s2, k  # K = [[a, b], [b, a]]
    det = a * a - b * b
    alpha = [(a * 1 - b * -1) / det, (-b * 1 + a * -1) / det]  # K^{-1} y
    kq = math.exp(-0.125)  # both at distance 0.5
    expected = kq * alpha[0] + kq * alpha[1]
    two = bl.gp_regression(_t([[[0.0], [1.0]]]), _t([[1.0, -1.0]]), _t([[0.5]]), length_scale=1.0, noise=s2)
    assert two.item() == pytest.approx(expected, abs=1e-12)
    assert abs(expected) < 1e-12  # symmetric: the mean is 0 at the midpoint


def test_gp_leave_one_out_matches_refitting():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(3, 6, 2, generator=g, dtype=T)
    y = torch.sin(3 * x[..., 0]) + 0.1 * torch.randn(3, 6, generator=g, dtype=T)
    grid, noise = (0.05, 0.3, 2.0), 0.01
    chosen = bl.gp_loo_length_scale(x, y, noise, grid)
    for b in range(3):
        errs = []
        for ell in grid:  # brute force: refit without point i, predict it
            e = 0.0
            for i in range(6):
                keep = [j for j in range(6) if j != i]
                pred = bl.gp_regression(x[b:b + 1, keep], y[b:b + 1, keep], x[b:b + 1, i], length_scale=ell,
                                        noise=noise)
                e += float(pred - y[b, i]) ** 2
            errs.append(e)
        assert chosen[b].item() == grid[min(range(3), key=errs.__getitem__)]


def test_baselines_are_batched_and_exact_on_duplicates():
    # with noise-free duplicated tokens the local methods and least squares return the matching label
    x = _t([[[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]], [[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]])
    y = _t([[3.0, -1.0, 3.0], [2.0, 5.0, 2.0]])
    q = _t([[1.0, 0.0], [0.0, 1.0]])
    for name, fn in bl.BASELINES.items():
        out = fn(x, y, q)
        assert out.shape == (2,), name
        if name in ("1-NN", "Nadaraya-Watson", "least squares"):
            assert out.tolist() == pytest.approx([3.0, 2.0], abs=1e-2), name


def _pairwise_sq_by_broadcasting(x):
    """The former formula: a (B, N, N, d) array of differences, squared and summed."""
    return (x.unsqueeze(2) - x.unsqueeze(1)).square().sum(-1)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_pairwise_distances_match_the_broadcast_formula(dtype):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(7, 20, 64, generator=g, dtype=dtype) * 3.0
    x[:, 5] = x[:, 11]  # duplicate tokens, as noise-free prompts have
    x[2, :] = x[2, 0]  # a prompt whose tokens are all equal
    got, want = bl.pairwise_sq_dists(x), _pairwise_sq_by_broadcasting(x)
    assert got.shape == (7, 20, 20)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(got, want, rtol=tol, atol=0.0)
    # exact zeros where the old formula had them: the diagonal, duplicates, the constant prompt
    assert (got == 0).equal(want == 0)
    assert (got.diagonal(dim1=1, dim2=2) == 0).all() and (got[:, 5, 11] == 0).all() and (got[2] == 0).all()


def test_gp_inverse_matches_a_solve_against_the_identity():
    g = torch.Generator().manual_seed(4)
    a = torch.randn(5, 9, 9, generator=g, dtype=T)
    spd = a @ a.mT + 0.1 * torch.eye(9, dtype=T)
    eye = torch.eye(9, dtype=T).expand(5, 9, 9)
    want = torch.cholesky_solve(eye, torch.linalg.cholesky(spd))
    torch.testing.assert_close(bl._spd_inverse(spd), want, rtol=1e-9, atol=1e-9)


def test_pairwise_distances_hold_no_per_coordinate_array():
    # B = 256 prompts of N = 50 tokens in d = 64: a (B, N, N, d) float64 array would be 328 MB
    x = torch.randn(256, 50, 64, generator=torch.Generator().manual_seed(5), dtype=T)
    added = peak_memory_mb(lambda: bl.pairwise_sq_dists(x))
    if added is None:
        pytest.skip("peak memory is only measurable on Linux")
    assert added < 100, added


def test_least_squares_is_the_pseudo_inverse_solution_on_rank_deficient_prompts():
    g = torch.Generator().manual_seed(6)
    V = torch.randn(4, 16, generator=g, dtype=T)  # 4 features in d = 16: X has rank 4 < N < d
    x = V[torch.randint(4, (30, 13), generator=g)]
    y = torch.randn(30, 12, generator=g, dtype=T)
    want = (x[:, -1].unsqueeze(1) @ (torch.linalg.pinv(x[:, :12]) @ y.unsqueeze(-1))).reshape(-1)
    torch.testing.assert_close(bl.least_squares(x[:, :12], y, x[:, -1]), want, rtol=1e-10, atol=1e-12)


def test_kernel_posterior_mean_by_hand_including_repeated_features():
    sigma = _t([[2.0, 1.0], [1.0, 2.0]])
    q = torch.tensor([1])
    # one example of feature 0 with label 3, query feature 1: k K^{-1} y = 1 * 3 / 2
    one = bl.kernel_posterior_mean(sigma, torch.tensor([[0]]), _t([[3.0]]), q, noise=0.0)
    assert one.item() == pytest.approx(1.5, rel=1e-12)
    # the same example twice: K is singular, the minimum-norm solution gives the same answer
    two = bl.kernel_posterior_mean(sigma, torch.tensor([[0, 0]]), _t([[3.0, 3.0]]), q, noise=0.0)
    assert two.item() == pytest.approx(1.5, rel=1e-10)
    # with label noise tau^2 = 1: k (K + I)^{-1} y = 1 * 3 / 3
    noisy = bl.kernel_posterior_mean(sigma, torch.tensor([[0]]), _t([[3.0]]), q, noise=1.0)
    assert noisy.item() == pytest.approx(1.0, rel=1e-12)
    # the query's own feature in the context, no noise: its label exactly
    own = bl.kernel_posterior_mean(sigma, torch.tensor([[0, 1]]), _t([[3.0, -2.0]]), q, noise=0.0)
    assert own.item() == pytest.approx(-2.0, abs=1e-12)
