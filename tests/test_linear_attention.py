"""model.kind=linear_attention: y_hat = sum_i y_i x_i^T Gamma x_q / n, trained by GD on the sampled engine."""

from __future__ import annotations

import pytest
import torch

import lipschitz_icl as li
from lipschitz_icl.errors import ConfigError
from lipschitz_icl.models import LinearAttention

TINY = ["features.K=3", "features.d=3", "prompt.N=8", "engine.batch=64", "eval.functions=16",
        "engine.kind=sampled", "model.kind=linear_attention", "train.log_every=10", "train.eps=1e-9"]


def test_forward_is_the_standard_linear_attention_prediction():
    gen = torch.Generator().manual_seed(0)
    model = LinearAttention(3, init="random", init_scale=1.0, gen=gen)
    x_ctx, y_ctx, x_q = torch.randn(2, 5, 3, dtype=torch.float64), torch.randn(2, 5, dtype=torch.float64), \
        torch.randn(2, 3, dtype=torch.float64)
    y_hat, weights = model(x_ctx, y_ctx, x_q)
    G = model.Gamma.detach()  # noqa: N806
    expected = torch.stack([sum(y_ctx[b, i] * x_ctx[b, i] @ G @ x_q[b] for i in range(5)) / 5 for b in range(2)])
    assert torch.allclose(y_hat, expected) and weights.shape == (2, 5)


def test_zero_init_is_the_default_and_gd_lowers_the_loss():
    run = li.run(li.load_config(None, [*TINY, "train.steps=30", "train.lr=2"]), write=False)
    loss = run.series("loss")
    assert run.config.model.init == "auto" and run.config.engine.dtype == "float64"
    assert loss.iloc[-1] < 0.5 * loss.iloc[0]
    assert set(run.params) == {"Gamma"}


def test_the_kernel_engine_takes_linear_attention_but_not_its_factored_form():
    assert li.load_config(None, ["model.kind=linear_attention"]).engine.kind == "kernel"
    with pytest.raises(ConfigError, match="engine.kind"):
        li.load_config(None, ["model.kind=linear_attention_factored"])
    with pytest.raises(ConfigError, match="engine.fused.*model.kind=reduced"):
        li.load_config(None, ["model.kind=linear_attention", "engine.fused=true"])
