"""The comparisons of ``evaluate``: the run's own trained model, the linear-attention baseline
trained by GD, and context lengths beyond the training N (length generalisation)."""

from __future__ import annotations

import pytest
import torch
from cli_support import runner

import lipschitz_icl as li
from lipschitz_icl.cli import app
from lipschitz_icl.engines import draw_prompts
from lipschitz_icl.evaluate import LINEAR, MODEL, evaluate_run, linear_step_size, train_linear_attention
from lipschitz_icl.features import make_features
from lipschitz_icl.rng import make_generator
from lipschitz_icl.tasks import make_task

TINY = ["features.K=3", "features.d=3", "prompt.N=8", "train.steps=40", "engine.draws=16", "eval.functions=16"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return li.run(li.load_config(None, TINY), out=tmp_path_factory.mktemp("cmp") / "run").dir


@pytest.fixture(scope="module")
def table(trained):
    return evaluate_run(trained, prompts=64, classes=["linear"])


def test_default_contexts_reach_4n_and_are_marked(table):
    ns = sorted(set(table.n_context))
    assert ns == [1, 2, 4, 8, 16, 32]
    assert (table.beyond_N == (table.n_context > 8)).all()


def test_rows_name_the_run_model_and_the_linear_attention_baseline(table):
    methods = set(table.method)
    assert {MODEL, LINEAR} <= methods and "model" not in methods
    at_n = table[table.n_context == 8].set_index("method")["error"]
    assert at_n[LINEAR] < at_n["context mean"]  # linear attention learned something on the linear class


def test_the_run_row_is_the_runs_own_trained_model(trained):
    # the run row moves with the run's parameters: with Q zeroed it is exactly the context mean
    base = evaluate_run(trained, prompts=32, contexts=[8], classes=["linear"]).set_index("method")["error"]
    run = li.load_run(trained)  # a changed params.pt is refused (its digest): the loaded run's, in memory
    run.params = {"Q": torch.zeros_like(run.params["Q"])}
    zero = evaluate_run(run, prompts=32, contexts=[8], classes=["linear"]).set_index("method")["error"]
    assert zero[MODEL] == pytest.approx(zero["context mean"]) and base[MODEL] != pytest.approx(zero[MODEL])


def test_linear_attention_gd_reaches_the_least_squares_optimum():
    cfg = li.load_config(None, TINY)
    fs = make_features(cfg.features, make_generator(cfg.seed, "features"))
    task = make_task("linear", cfg.task.L, 3, {})
    model = train_linear_attention(cfg, fs, task)
    again = train_linear_attention(cfg, fs, task)
    assert torch.equal(model.Gamma, again.Gamma)  # seeded
    assert linear_step_size(cfg, fs, task) > 0
    # y_hat = <Gamma, S>: the optimum over Gamma is a least-squares problem; GD gets close to it
    b = draw_prompts(fs, task, 8, 2048, 0.0, make_generator(7, "check"))
    S = torch.einsum("bn,bni,bj->bij", b.y[:, :-1], b.x[:, :-1], b.x[:, -1]).reshape(2048, -1) / 8  # noqa: N806
    best = torch.linalg.lstsq(S, b.target.unsqueeze(-1)).solution.squeeze(-1)
    err_best = 0.5 * (S @ best - b.target).square().mean()
    err_gd = 0.5 * (S @ model.Gamma.detach().reshape(-1) - b.target).square().mean()
    err_zero = 0.5 * b.target.square().mean()
    assert err_gd < err_best + 0.1 * (err_zero - err_best)


def test_cli_marks_contexts_beyond_n(trained):
    result = runner.invoke(app, ["evaluate", str(trained), "--prompts", "16", "--class", "linear"])
    assert result.exit_code == 0, result.output
    assert "32*" in result.stdout and "16*" in result.stdout and " 8*" not in result.stdout
