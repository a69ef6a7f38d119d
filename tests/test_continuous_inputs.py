"""Continuous inputs (features.kind sphere, gaussian_inputs): the distributions, the config's checks,
every model on the sampled engine, the theory's refusals, and the task classes' certificates on them."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import lipschitz_icl as li
from lipschitz_icl.cli import app
from lipschitz_icl.engines import build_engine, make_generator
from lipschitz_icl.errors import ConfigError
from lipschitz_icl.geometry import GEOMETRY_METRICS
from lipschitz_icl.inputs import NO_FEATURE, records_geometry
from lipschitz_icl.problem import build_inputs, build_problem, sample_prompts
from lipschitz_icl.tasks import make_task, task_names
from lipschitz_icl.theory import theory_report

TINY = ["features.d=3", "prompt.N=8", "engine.batch=32", "eval.functions=16", "train.steps=6",
        "train.log_every=3"]
COV = "features.cov=[[0.5, 0.2, 0.0], [0.2, 0.4, 0.1], [0.0, 0.1, 0.3]]"


def _tokens(overrides: list[str], n: int = 40000) -> torch.Tensor:
    fs = build_inputs(li.load_config(None, overrides))
    return fs.tokens(fs.sample_ids((n,), make_generator(0, "t")), make_generator(1, "t"))


def test_sphere_tokens_are_unit_vectors_with_covariance_i_over_d():
    x = _tokens(["features.kind=sphere", "features.d=4", "features.scale=2"])
    torch.testing.assert_close(x.norm(dim=1), torch.full((x.shape[0],), 2.0, dtype=torch.float64))
    cov = x.T @ x / x.shape[0]  # E[x x^T] = scale^2 I / d; entries have sd about 4/sqrt(n)
    assert float((cov - torch.eye(4, dtype=torch.float64)).abs().max()) < 0.05


def test_gaussian_inputs_have_the_configured_covariance():
    x = _tokens(["features.kind=gaussian_inputs", "features.d=4"])
    assert float((x.T @ x / x.shape[0] - torch.eye(4, dtype=torch.float64) / 4).abs().max()) < 0.01
    x = _tokens(["features.kind=gaussian_inputs", "features.d=3", COV])
    want = torch.tensor([[0.5, 0.2, 0.0], [0.2, 0.4, 0.1], [0.0, 0.1, 0.3]], dtype=torch.float64)
    se = torch.sqrt((want.diagonal()[:, None] * want.diagonal()[None, :] + want**2) / x.shape[0])
    assert torch.all((x.T @ x / x.shape[0] - want).abs() <= 5 * se)


@pytest.mark.parametrize("overrides,field,words", [
    (["features.cov=[[1, 0.5], [0.4, 1]]"], "features.cov", "symmetric"),
    (["features.cov=[[1, 2], [2, 1]]"], "features.cov", "positive definite"),
    (["features.cov=[[1, 0]]"], "features.cov", "d x d"),
    (["features.kind=sphere", "features.cov=[[1, 0], [0, 1]]"], "features.cov", "only features.kind=gaussian_inputs"),
    (["features.kind=sphere", "features.K=3"], "features.K", "no finite feature set"),
    (["features.kind=sphere", "features.noise=0.1"], "features.noise", "no finite feature set"),
    (["features.kind=sphere", "features.probs=imbalanced"], "features.probs", "no finite feature set"),
    (["features.kind=sphere", "engine.kind=kernel"], "engine.kind", "features.kind=sphere"),
])
def test_bad_continuous_configs_are_one_line_naming_the_field(overrides, field, words):
    with pytest.raises(ConfigError) as info:
        li.load_config(None, ["features.kind=gaussian_inputs", "features.d=2", *overrides])
    assert info.value.field == field and words in info.value.message and "\n" not in str(info.value)


def test_continuous_inputs_default_to_the_sampled_engine_and_keep_their_hash():
    cfg = li.load_config(None, ["features.kind=gaussian_inputs", "features.d=3", COV])
    assert cfg.engine.kind == "sampled" and records_geometry(cfg) and not records_geometry(li.load_config(None))
    reread = li.config.validate_config(__import__("yaml").safe_load(cfg.to_yaml()))
    assert reread.config_hash() == cfg.config_hash() and reread.features.cov == cfg.features.cov
    other = cfg.with_overrides(["features.cov=[[0.5, 0.2, 0.0], [0.2, 0.4, 0.1], [0.0, 0.1, 0.4]]"])
    assert other.config_hash() != cfg.config_hash()


@pytest.mark.parametrize("kind", ["sphere", "gaussian_inputs"])
@pytest.mark.parametrize("model", ["reduced", "factored", "linear_attention", "linear_attention_factored",
                                   "transformer"])
def test_every_model_trains_on_continuous_inputs(kind, model):
    extra = ["model.width=8", "train.optimizer=adam", "train.lr=0.01"] if model == "transformer" else []
    run = li.run(None, [f"features.kind={kind}", f"model.kind={model}", *TINY, *extra], write=False)
    metrics = set(run.metrics.metric)
    assert run.summary["status"] == "budget" and math.isfinite(run.summary["final_loss"])
    assert not any(m.startswith(("attn_self", "attn_cross", "attn_min", "A", "B")) for m in metrics)
    merged = model != "transformer"
    assert set(GEOMETRY_METRICS) <= metrics if merged else not set(GEOMETRY_METRICS) & metrics
    assert run.summary["K"] is None and run.summary["min_attn"] is None and run.summary["T_1"] is None
    assert run.summary["Delta"] is None and run.summary["L_star"] is None and run.summary["regime"] is None
    assert "finite feature set" in run.summary["theory_undefined"]


def test_theory_refuses_delta_and_threshold_but_keeps_eta_max(tmp_path):
    rep = theory_report(li.load_config(None, ["features.kind=sphere", *TINY]), iters=20)
    assert rep["Delta"] is None and rep["delta"] is None and rep["L_star"] is None and rep["T_f"] is None
    assert rep["K"] is None and math.isfinite(rep["eta_max"]) and "features.kind=sphere" in rep["theory_undefined"]
    result = CliRunner().invoke(app, ["theory", "features.kind=sphere", "features.d=3", "--json",
                                      str(tmp_path / "t.json")])
    assert result.exit_code == 0 and "need a finite" in result.stdout and "undefined" in result.stdout
    assert '"Delta": null' in (tmp_path / "t.json").read_text()


def test_sample_prompts_are_the_sampled_engines_first_batch():
    cfg = li.load_config(None, ["features.kind=sphere", *TINY])
    engine = build_engine(build_problem(cfg))
    batch = sample_prompts(cfg, cfg.engine.batch)
    torch.testing.assert_close(batch.x, engine.batch.x, rtol=0, atol=0)
    torch.testing.assert_close(batch.y, engine.batch.y, rtol=0, atol=0)
    assert bool((batch.ids == NO_FEATURE).all()) and batch.x_ctx.shape == (32, 8, 3) and batch.x_q.shape == (32, 3)


def test_sample_prompts_give_the_recipe_of_a_hand_written_sphere_loop():
    """Tokens uniform on the sphere, then one function per prompt, then label noise on the context:
    the same numbers from one generator as the loop a continuous-input experiment writes by hand."""
    cfg = li.load_config(None, ["features.kind=sphere", "features.d=3", "task.kind=relu_net", "task.label_noise=0.5",
                                "prompt.N=16"])
    got = sample_prompts(cfg, 64, gen=make_generator(0, "mine"))
    gen = make_generator(0, "mine")
    x = torch.randn(64, 17, 3, generator=gen, dtype=torch.float64)
    x = x / x.norm(dim=-1, keepdim=True)
    task = make_task("relu_net", 2.0, 3)
    y = task.evaluate(task.sample(64, gen, torch.float64), x)
    y_ctx = y[:, :16] + 0.5 * torch.randn(64, 16, generator=gen, dtype=torch.float64)
    for a, b in ((got.x_ctx, x[:, :16]), (got.x_q, x[:, 16]), (got.y_ctx, y_ctx), (got.target, y[:, 16])):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@settings(max_examples=25)
@given(kind=st.sampled_from(sorted(task_names())), inputs=st.sampled_from(["sphere", "gaussian_inputs", "cov"]),
       L=st.floats(0.05, 50), d=st.integers(1, 6), seed=st.integers(0, 2**31))
def test_certified_lipschitz_bounds_hold_on_continuous_inputs(kind, inputs, L, d, seed):
    """Each class's per-function certificate bounds |f(x) - f(y)| / ||x - y|| on pairs drawn from the
    continuous input distributions (near pairs and far pairs), and is at most L."""
    gen = make_generator(seed, "lip")
    overrides = [f"features.kind={'gaussian_inputs' if inputs == 'cov' else inputs}", f"features.d={d}"]
    if inputs == "cov":
        A = torch.randn(d, d, generator=gen, dtype=torch.float64)
        overrides.append(f"features.cov={(A @ A.T + 0.1 * torch.eye(d, dtype=torch.float64)).tolist()}")
    fs = build_inputs(li.load_config(None, overrides))
    task = make_task(kind, L, d)
    funcs = task.sample(8, gen, torch.float64)
    ids = fs.sample_ids((8, 64), gen)
    x, far = fs.tokens(ids, gen), fs.tokens(ids, gen)
    near = x + 1e-3 * torch.randn(x.shape, generator=gen, dtype=torch.float64)
    cert = task.lipschitz(funcs)
    assert torch.all(cert <= L * (1 + 1e-9))
    for y in (near, far):
        diff = (task.evaluate(funcs, x) - task.evaluate(funcs, y)).abs()
        assert torch.all(diff <= cert[:, None] * (x - y).norm(dim=-1) * (1 + 1e-9) + 1e-12)
