"""Sizes refused before anything is allocated: transformer parameters and activations, evaluation prompts."""

from __future__ import annotations

import pytest
from cli_support import refused, runner

from lipschitz_icl.cli import app
from lipschitz_icl.transformer import ICLTransformer, parameter_count

TRANSFORMER = ["model.kind=transformer", "engine.kind=sampled"]



@pytest.mark.parametrize(("d", "width", "layers", "heads", "mlp", "layernorm"), [
    (5, 64, 1, 1, False, False), (7, 32, 3, 4, True, True), (3, 16, 2, 2, True, False), (4, 8, 2, 1, False, True),
])
def test_parameter_count_matches_the_model(d, width, layers, heads, mlp, layernorm):
    import torch

    model = ICLTransformer(d, width=width, n_layers=layers, n_heads=heads, mlp=mlp, layernorm=layernorm,
                           gen=torch.Generator(), dtype=torch.float64, device="cpu")
    assert parameter_count(d, width, layers, mlp, layernorm) == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(("args", "field"), [
    (["model.width=16384", "model.n_layers=64"], "model.width"),  # 6.9e10 parameters: allocated until killed
    (["model.width=4096", "model.n_layers=8", "model.mlp=true"], "model.width"),
    (["model.width=1024", "model.n_layers=16", "engine.batch=4096"], "engine.batch"),  # activations
])
def test_oversized_transformers_are_refused_before_allocating(args, field, tmp_path):
    line = refused(["run", *TRANSFORMER, *args, "--out", str(tmp_path / "r")])
    assert line.startswith(f"error: {field}:") and "elements in memory" in line
    assert not (tmp_path / "r").exists()


def test_a_small_transformer_is_accepted():
    result = runner.invoke(app, ["run", *TRANSFORMER, "model.width=256", "model.n_layers=4", "--print-config"])
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("ev") / "r"
    result = runner.invoke(app, ["run", "train.steps=3", "engine.draws=8", "eval.functions=8", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.parametrize(("args", "option"), [
    (["--prompts", "1000000000"], "--prompts"),  # tried to allocate 408 GB
    (["--contexts", "1,100000"], "--contexts"),
    (["--prompts", "10000000", "--contexts", "1,2"], "--prompts"),
])
def test_oversized_evaluations_are_refused_before_allocating(run_dir, args, option):
    line = refused(["evaluate", str(run_dir), *args])
    assert line.startswith(f"error: {option} ") and "elements in memory" in line
    assert not (run_dir / "evaluation.csv").exists()
