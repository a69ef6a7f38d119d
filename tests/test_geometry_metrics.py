"""The geometry metrics (geometry.py): their values on cases with a closed form, the kernel engine's
population form against the same metrics on explicit prompts, and when the recorder writes them."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import lipschitz_icl as li
from lipschitz_icl import plots
from lipschitz_icl.engines import make_generator
from lipschitz_icl.engines.kernel_spec import draw_counts
from lipschitz_icl.errors import UserInputError
from lipschitz_icl.features import FeatureSet
from lipschitz_icl.geometry import GEOMETRY_METRICS, kernel_metrics, matrix_metrics, prompt_metrics

D = torch.float64


def _sphere(P: int, N: int, d: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    z = torch.randn(P, N + 1, d, generator=make_generator(seed, "g"), dtype=D)
    z = z / z.norm(dim=-1, keepdim=True)
    return z[:, :N], z[:, N]


def test_matrix_metrics_of_known_matrices():
    m = matrix_metrics(torch.tensor([[3.0, 1.0], [-1.0, 1.0]], dtype=D))  # sym part diag(3, 1)
    assert float(m["Q_eig_max"]) == 3.0 and float(m["Q_eig_min"]) == 1.0 and float(m["Q_eig_ratio"]) == 3.0
    assert float(m["Q_norm_F"]) == pytest.approx(math.sqrt(12), rel=1e-14)
    assert float(m["Q_norm_2"]) == pytest.approx(float(torch.linalg.svdvals(torch.tensor([[3.0, 1], [-1, 1]],
                                                                                       dtype=D))[0]), rel=1e-14)
    indefinite = matrix_metrics(torch.diag(torch.tensor([2.0, -1.0], dtype=D)))
    assert math.isnan(float(indefinite["Q_eig_ratio"])) and float(indefinite["Q_norm_2"]) == 2.0
    assert math.isnan(float(matrix_metrics(torch.zeros(3, 3, dtype=D))["Q_eig_ratio"]))


@pytest.mark.parametrize("q", [0.5, 2.0, 16.0])
def test_window_of_an_isotropic_q_on_the_sphere(q):
    """Q = q I on the sphere: s_i - s_q = -q r_i^2 / 2 exactly, so the softmax window is sqrt(2 ln 2 / q)
    (shrinking as q grows) and linear attention's is 1 whatever q; the eigenvalue ratio is 1."""
    x_ctx, x_q = _sphere(64, 20, 3)
    Q = q * torch.eye(3, dtype=D)
    soft, lin = prompt_metrics(Q, x_ctx, x_q, linear=False), prompt_metrics(Q, x_ctx, x_q, linear=True)
    assert soft["window"] == pytest.approx(math.sqrt(2 * math.log(2) / q), rel=1e-12)
    assert lin["window"] == pytest.approx(1.0, rel=1e-12)
    assert soft["Q_eig_ratio"] == pytest.approx(1.0, rel=1e-14) and soft["Q_norm_2"] == pytest.approx(q, rel=1e-14)
    assert 1.0 <= soft["n_eff"] <= 20.0


def test_sharper_softmax_attends_to_fewer_and_nearer_tokens():
    x_ctx, x_q = _sphere(128, 32, 3)
    blunt, sharp = (prompt_metrics(q * torch.eye(3, dtype=D), x_ctx, x_q, False) for q in (1.0, 30.0))
    assert sharp["n_eff"] < blunt["n_eff"] and sharp["attn_distance"] < blunt["attn_distance"]


def test_uniform_and_empty_attention():
    """Q = 0: softmax attends uniformly (n_eff = N, window infinite, attn_distance the mean distance);
    linear attention with Gamma = 0 has no weights at all, so its window and n_eff are NaN."""
    x_ctx, x_q = _sphere(16, 10, 4)
    Z = torch.zeros(4, 4, dtype=D)
    soft, lin = prompt_metrics(Z, x_ctx, x_q, False), prompt_metrics(Z, x_ctx, x_q, True)
    assert soft["n_eff"] == pytest.approx(10.0, rel=1e-14) and soft["window"] == math.inf
    assert soft["attn_distance"] == pytest.approx(float((x_ctx - x_q[:, None]).norm(dim=-1).mean()), rel=1e-14)
    assert math.isnan(lin["window"]) and math.isnan(lin["n_eff"]) and math.isnan(lin["attn_distance"])


@pytest.mark.parametrize("linear", [False, True])
def test_kernel_form_equals_the_metrics_on_the_prompts_it_stands_for(linear):
    """Noise-free tokens: one prompt per (count draw, query feature) with c_n tokens of feature n gives,
    for uniform p, exactly the population form the kernel engine records (rounding aside)."""
    K = d = 4
    gen = make_generator(1, "k")
    V = torch.linalg.qr(torch.randn(d, K, generator=gen, dtype=D))[0]  # orthonormal: Q unique from M
    fs = FeatureSet(V, torch.full((K,), 1 / K, dtype=D), 0.0)
    counts = draw_counts(fs, 12, 5, gen)  # (B, K)
    Q = torch.randn(d, d, generator=gen, dtype=D)
    M = V.T @ Q.T @ V
    x_ctx = torch.stack([torch.cat([V.T[n].repeat(int(c[n]), 1) for n in range(K)]) for c in counts for _ in range(K)])
    x_q = torch.stack([V.T[k] for _ in counts for k in range(K)])
    want = prompt_metrics(Q, x_ctx, x_q, linear)
    got = kernel_metrics(M.unsqueeze(0).numpy(), V, counts, fs.p, linear)
    for name in GEOMETRY_METRICS:
        if not math.isnan(want[name]):
            assert float(got[name][0]) == pytest.approx(want[name], rel=1e-10, abs=1e-12), name


TINY = ["features.K=3", "features.d=3", "prompt.N=8", "train.steps=8", "train.log_every=4", "engine.draws=16",
        "eval.functions=16"]


@pytest.mark.parametrize("extra", [[], ["model.kind=linear_attention"], ["train.optimizer=adam", "train.lr=0.1"],
                                   ["engine.kind=sampled", "engine.batch=32"]])
def test_geometry_rows_only_when_asked_for_on_finite_features(extra):
    """Finite features record no geometry by default (the paper's kernel runs pay nothing for it);
    eval.geometry=true adds one row per metric and recorded step, the same steps as the loss."""
    plain = li.run(None, [*TINY, *extra], write=False)
    assert not set(GEOMETRY_METRICS) & set(plain.metrics.metric)
    run = li.run(None, [*TINY, *extra, "eval.geometry=true"], write=False)
    steps = run.series("loss").index
    for name in GEOMETRY_METRICS:
        assert list(run.series(name).index) == list(steps), name
    assert list(run.geometry().columns) == list(GEOMETRY_METRICS) and plain.geometry().empty
    q_norm = run.series("Q_norm_F")
    Q = run.params.get("Q", run.params.get("Gamma"))
    assert q_norm.iloc[0] == 0.0 and q_norm.iloc[-1] == pytest.approx(float(Q.norm()), rel=1e-10)
    other = plain.metrics.merge(run.metrics, on=["step", "metric", "k", "n"], suffixes=("", "_geo"))
    np.testing.assert_array_equal(other.value.to_numpy(), other.value_geo.to_numpy())  # nothing else changes


def test_geometry_curves_draw_the_recorded_geometry():
    run = li.run(None, ["features.kind=sphere", "features.d=3", "prompt.N=8", "engine.batch=32",
                        "eval.functions=16", "train.steps=10", "train.optimizer=adam", "train.lr=0.1"], write=False)
    fig = plots.geometry_curves(run)
    labels = [[line.get_label() for line in ax.get_lines()] for ax in fig.axes]
    assert labels == [["Q_norm_2", "Q_norm_F"], ["window", "attn_distance"], ["n_eff"]]
    norm_x = fig.axes[0].get_lines()[0].get_xdata()
    assert 0 not in list(norm_x) and len(norm_x) == len(run.series("Q_norm_2")) - 1  # Q = 0 is off the log axis
    with pytest.raises(UserInputError, match="Q_norm_2"):
        plots.geometry_curves(li.run(None, TINY, write=False))
