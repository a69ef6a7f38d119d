"""prompt.draw_dtype: the sampled engine's training prompts made in float32 (normals, functions and labels) and
computed on in the engine's dtype. Other numbers than float64 draws (a config of its own: its hash differs), the
same law."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

import lipschitz_icl as li
from lipschitz_icl.cli import app
from lipschitz_icl.engines import draw_prompts, make_generator
from lipschitz_icl.errors import ConfigError
from lipschitz_icl.problem import build_inputs
from lipschitz_icl.rng import normals
from lipschitz_icl.tasks import make_task

SPHERE = ["features.kind=sphere", "features.d=3", "prompt.N=16", "task.kind=relu_net", "task.L=4",
          "task.label_noise=0.5", "engine.batch=64", "train.optimizer=adam", "train.lr=0.1", "train.steps=60",
          "train.log_every=20", "eval.functions=128"]


def test_normals_are_float32_draws_cast_and_the_default_is_torchs_own():
    a = normals((1000,), make_generator(3, "s"), torch.float64, torch.float32)
    b = torch.randn(1000, generator=make_generator(3, "s"), dtype=torch.float32)
    assert a.dtype == torch.float64 and torch.equal(a, b.double())
    c = normals((1000,), make_generator(3, "s"), torch.float64)
    assert torch.equal(c, torch.randn(1000, generator=make_generator(3, "s"), dtype=torch.float64))


@pytest.mark.parametrize("features", [["features.kind=sphere"], ["features.kind=gaussian", "features.K=4",
                                                                  "features.noise=0.3"]])
def test_float32_draws_give_float64_prompts_of_the_same_law(features):
    cfg = li.load_config(None, [*SPHERE, *features, "features.d=3"])
    fs, task = build_inputs(cfg), make_task("relu_net", 4.0, 3, {})
    p64 = draw_prompts(fs, task, 16, 4000, 0.5, make_generator(0, "p"))
    p32 = draw_prompts(fs, task, 16, 4000, 0.5, make_generator(0, "p"), draw_dtype=torch.float32)
    assert p32.x.dtype == p32.y.dtype == torch.float64
    assert not torch.equal(p32.x, p64.x)  # other draws
    if cfg.features.kind == "sphere":  # normalised in float64: unit vectors to float64 rounding
        assert torch.allclose(p32.x.norm(dim=-1), torch.ones((), dtype=torch.float64), rtol=0, atol=1e-14)
    # the same law: moments of tokens and labels agree within a few standard errors of 4000 x 17 draws
    for a, b in ((p32.x, p64.x), (p32.y, p64.y)):
        assert abs(float(a.mean() - b.mean())) < 0.05 and abs(float(a.std() / b.std()) - 1) < 0.05


def test_float32_draws_evaluate_the_labels_in_float32_on_the_rounded_tokens():
    cfg = li.load_config(None, SPHERE)
    fs, task = build_inputs(cfg), make_task("relu_net", 4.0, 3, {})
    got = draw_prompts(fs, task, 16, 256, 0.0, make_generator(5, "p"), draw_dtype=torch.float32)
    gen = make_generator(5, "p")  # the same stream, step by step: ids, tokens, functions
    ids = fs.sample_ids((256, 17), gen)
    x = fs.tokens(ids, gen, torch.float32)
    labels = task.evaluate(task.sample(256, gen, torch.float32), x.float())
    assert labels.dtype == torch.float32 and torch.equal(got.y, labels.double()) and torch.equal(got.x, x)


def test_float32_functions_keep_their_lipschitz_bound_to_float32_resolution():
    task = make_task("relu_net", 4.0, 3, {})
    funcs = task.sample(512, make_generator(1, "f"), torch.float32)
    bound = task.lipschitz({k: v.double() for k, v in funcs.items()})
    assert torch.allclose(bound, torch.full_like(bound, 4.0), rtol=1e-5, atol=0)


def test_a_float32_draw_run_is_its_own_config_reproducible_and_trains():
    base = li.load_config(None, SPHERE)
    f32 = base.with_overrides(["prompt.draw_dtype=float32"])
    assert f32.config_hash() != base.config_hash()
    assert li.load_config(None, [*SPHERE, "prompt.draw_dtype=engine"]).config_hash() == base.config_hash()
    a, b, c = li.run(f32, write=False), li.run(f32, write=False), li.run(base, write=False)
    assert a.metrics.equals(b.metrics)  # deterministic
    first, last = (a.metrics[(a.metrics.metric == "test_error") & (a.metrics.step == s)].value.item() for s in (0, 60))
    other = c.metrics[(c.metrics.metric == "test_error") & (c.metrics.step == 60)].value.item()
    assert last < 0.8 * first and abs(last / other - 1) < 0.25  # it learns, to about where float64 draws do


def test_the_kernel_engine_refuses_draw_dtype_in_one_line(tmp_path):
    with pytest.raises(ConfigError, match="prompt.draw_dtype"):
        li.load_config(None, ["prompt.draw_dtype=float32"])
    out = CliRunner().invoke(app, ["run", "configs/quickstart.yaml", "prompt.draw_dtype=float32", "--out",
                                   str(tmp_path)])
    assert out.exit_code == 2 and "prompt.draw_dtype" in out.output and "Traceback" not in out.output
    bad = CliRunner().invoke(app, ["run", "configs/quickstart.yaml", "prompt.draw_dtype=float16", "--out",
                                   str(tmp_path)])
    assert bad.exit_code == 2 and "float32" in bad.output
