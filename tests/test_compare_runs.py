"""Comparing runs (li.diff, lipschitz-icl diff, plots.compare, analyze of several runs) and one prompt's
attention (li.attention_map, plots.attention_map) for every model, on tiny runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import lipschitz_icl as li
from lipschitz_icl import plots
from lipschitz_icl.cli import app
from lipschitz_icl.compare import differing_keys, run_labels
from lipschitz_icl.errors import UserInputError

QUICKSTART = Path(__file__).resolve().parents[1] / "configs" / "quickstart.yaml"
TINY = ["train.eps=2e-2", "engine.draws=32", "eval.functions=32", "train.log_every=5"]
SAMPLED = ["engine.kind=sampled", "engine.batch=32", "train.steps=8", "model.init=auto"]
cli = CliRunner()


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    a = li.run(QUICKSTART, TINY, out=root / "a")
    b = li.run(QUICKSTART, [*TINY, "task.L=1", "train.lr=0.5"], out=root / "b")
    return a, b


def test_diff_names_the_keys_that_differ_and_puts_the_summaries_side_by_side(two_runs):
    a, b = two_runs
    assert differing_keys([a, b]) == ["task.L", "train.lr"]
    d = li.diff(a, b.dir)
    assert d.config.to_dict("list") == {"key": ["task.L", "train.lr"], "a": [2.0, 1.0], "b": [1.0, 0.5]}
    steps = d.summary.set_index("quantity").loc["steps"]
    assert (steps["a"], steps["b"]) == (a.summary["steps"], b.summary["steps"])
    assert "config keys that differ (2)" in str(d) and "<table" in d._repr_html_()
    assert li.diff(a, a).config.empty


def test_the_diff_command_prints_both_tables_and_refuses_a_missing_run(two_runs):
    a, b = two_runs
    res = cli.invoke(app, ["diff", str(a.dir), str(b.dir)], env={"COLUMNS": "120"})
    assert res.exit_code == 0, res.output
    assert "2 keys differ" in res.output and "train.lr" in res.output and "regime" in res.output
    bad = cli.invoke(app, ["diff", str(a.dir), str(a.dir.parent / "nope")])
    assert bad.exit_code == 2 and "no such run directory" in bad.output and "Traceback" not in bad.output


def test_analyze_of_several_runs_gives_one_table(two_runs):
    a, b = two_runs
    res = cli.invoke(app, ["analyze", str(a.dir), str(b.dir)], env={"COLUMNS": "160"})
    assert res.exit_code == 0, res.output
    assert res.output.count("analysis of 2 runs, differing in task.L, train.lr") == 1
    assert "a: task.L=2, train.lr=1" in res.output and (b.dir / "analysis.json").is_file()


def test_compare_overlays_the_runs_labelled_by_what_differs(two_runs):
    a, b = two_runs
    fig = plots.compare([a, b.dir], metric="loss")
    ax = fig.axes[0]
    lines = {ln.get_label(): ln for ln in ax.get_lines() if not ln.get_label().startswith("_")}
    assert set(lines) == {"task.L=2, train.lr=1", "task.L=1, train.lr=0.5"}
    np.testing.assert_allclose(lines["task.L=1, train.lr=0.5"].get_ydata(), b.series("loss").to_numpy())
    assert "differing in task.L, train.lr" in ax.get_title() and ax.get_yscale() == "log"
    assert run_labels([a, a]) == ["a", "a"]  # nothing differs: named by directory
    with pytest.raises(UserInputError, match="metric 'attn_self' is not a scalar metric.*allowed: .*loss"):
        plots.compare([a, b], metric="attn_self")


def test_attention_map_of_a_given_prompt_is_the_models_softmax(two_runs):
    a, _ = two_runs
    gen = torch.Generator().manual_seed(0)
    x, x_q = torch.randn(7, 5, generator=gen, dtype=torch.float64), torch.randn(5, generator=gen, dtype=torch.float64)
    table = li.attention_map(a, prompt={"x": x.numpy(), "x_q": x_q.numpy(), "y": np.arange(7.0)})
    expected = torch.softmax(x @ a.params["Q"] @ x_q, dim=0)  # softmax_i(x_i^T Q x_q)
    np.testing.assert_allclose(table["attention"], expected.numpy(), rtol=1e-12)
    assert table.attrs["y_hat"] == pytest.approx(float(expected @ torch.arange(7.0, dtype=torch.float64)), rel=1e-12)
    with pytest.raises(UserInputError, match="prompt.x: must be"):
        li.attention_map(a, prompt={"x": np.zeros((3, 4)), "x_q": np.zeros(4)})


def test_a_kernel_runs_drawn_prompts_average_to_its_recorded_attention(two_runs):
    """The kernel engine trains M = V^T Q^T V over count draws; prompts drawn from its setting, read with the
    saved Q, must give back its Attn_k (within Monte-Carlo error): a transposed Q would not."""
    a, _ = two_runs
    first = li.attention_map(a, prompt=199)
    assert first.equals(li.attention_map(a, prompt=199)) and not first.equals(li.attention_map(a, prompt=198))
    own = {}
    for i in range(200):
        t = li.attention_map(a, prompt=i)
        mass = t.loc[t.feature == t.query_feature, "attention"].sum()  # on the query's own feature
        own.setdefault(int(t["query_feature"].iloc[0]), []).append(mass)
    recorded = a.attention().iloc[-1]
    for k, masses in own.items():
        assert np.mean(masses) == pytest.approx(recorded[k], abs=4 * np.std(masses) / np.sqrt(len(masses)) + 0.01)


@pytest.mark.parametrize("model", ["reduced", "factored", "linear_attention", "transformer"])
def test_attention_map_for_every_model(model):
    extra = ["model.n_layers=2", "model.n_heads=2", "model.width=8", "train.optimizer=adam", "train.lr=3e-3"]
    run = li.run(QUICKSTART, [*TINY, *SAMPLED, f"model.kind={model}", *(extra if model == "transformer" else [])],
                 write=False)
    table = li.attention_map(run, prompt=2)
    heads = 4 if model == "transformer" else 1
    assert len(table) == heads * 50 and table.groupby(["layer", "head"]).ngroups == heads
    if model != "linear_attention":  # a softmax per head
        np.testing.assert_allclose(table.groupby(["layer", "head"])["attention"].sum(), 1.0, rtol=1e-5)
    fig = plots.attention_map(run, prompt=2)
    assert len([ax for ax in fig.axes if ax.patches]) == heads
