"""``lipschitz-icl evaluate``: the baseline table on a tiny trained run, its files, and bad input."""

import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import lipschitz_icl as li
from lipschitz_icl.baselines import BASELINES
from lipschitz_icl.cli import app
from lipschitz_icl.evaluate import COLUMNS, MODEL, default_contexts, evaluate_run

runner = CliRunner()
SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("ev") / "run"
    li.run(None, ["train.steps=60", "engine.draws=32", "eval.functions=32", "prompt.N=12"], out=out)
    return out


def test_evaluate_cli_prints_the_baseline_table(trained):
    result = runner.invoke(app, ["evaluate", str(trained), "--prompts", "64", "--contexts", "1,4,12"])
    assert result.exit_code == 0, result.output
    for name in ("trained", "lin-attn", "1-NN", "3-NN", "NW", "LS", "GP", "mean", "Bayes", "linear", "relu_net",
                 "held out"):
        assert name in result.stdout, name
    # not a terminal: markdown tables with every digit, the lowest error of each row in bold
    assert "| n | trained | lin-attn |" in result.stdout and "…" not in result.stdout
    table = pd.read_parquet(trained / "evaluation.parquet")
    for n in (1, 4, 12):
        row = table[(table["class"] == "linear") & (table.n_context == n)]
        lowest = f"**{row.error.min():.3g}**"
        assert any(line.startswith(f"| {n} |") and lowest in line for line in result.stdout.splitlines()), n
    assert list(table.columns) == COLUMNS
    assert len(table) == 3 * (3 + len(BASELINES)) * 2  # contexts x (model, lin. attn, baselines, Bayes) x classes
    pd.testing.assert_frame_equal(pd.read_csv(trained / "evaluation.csv"), table, check_dtype=False)
    assert (trained / "evaluation.png").stat().st_size > 1000


def test_evaluation_numbers(trained):
    table = evaluate_run(trained, prompts=64, contexts=[1, 12], classes=["linear"])
    one = table[table.n_context == 1].set_index("method")["error"]
    # one context example: softmax over one token, so the model, 1-NN and the mean all predict its label
    assert one[MODEL] == pytest.approx(one["1-NN"]) and one[MODEL] == pytest.approx(one["context mean"])
    full = table[table.n_context == 12].set_index("method")["error"]
    assert full[MODEL] < 0.7 * full["context mean"]  # the trained attention beats averaging
    assert (table.se > 0).all()
    # the same prompts for every method: a second evaluation gives the same numbers
    pd.testing.assert_frame_equal(table, evaluate_run(trained, prompts=64, contexts=[1, 12], classes=["linear"]))


def test_default_contexts():
    assert default_contexts(12) == [1, 2, 4, 8, 12, 16, 24, 32, 48]  # up to 4N: length generalisation
    assert default_contexts(1) == [1, 2, 4]


@pytest.mark.parametrize("args,needle", [
    (["--contexts", "a,b"], "--contexts"),
    (["--contexts", "0,2"], "--contexts"),
    (["--class", "nope"], "nope"),
])
def test_evaluate_bad_input_is_one_line(trained, args, needle):
    result = runner.invoke(app, ["evaluate", str(trained), "--prompts", "8", *args])
    assert result.exit_code == 2
    assert needle in result.output and "Traceback" not in result.output


def test_evaluate_needs_a_run_with_params(tmp_path):
    result = runner.invoke(app, ["evaluate", str(tmp_path)])
    assert result.exit_code == 2 and "not a run directory" in result.output


@pytest.mark.parametrize("args,needle,allowed", [
    (["--prompts", "1000000000"], "--prompts 1000000000", "at most"),  # once tried to allocate 408 GB
    (["--contexts", "1,100000"], "--contexts 100000", "at most 8192 context examples"),
])
def test_evaluate_refuses_sizes_that_do_not_fit_before_allocating(trained, args, needle, allowed):
    before = sorted(p.name for p in trained.iterdir())
    result = runner.invoke(app, ["evaluate", str(trained), *args, "--out", str(trained / "big")])
    assert result.exit_code == 2, result.output
    assert needle in result.output and allowed in result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert sorted(p.name for p in trained.iterdir()) == before  # nothing written


@pytest.mark.parametrize("content", [b"not a torch file at all", pickle.dumps({"Q": [1.0, 2.0]}, protocol=4)])
def test_corrupt_or_plain_pickle_params_give_one_line(trained, tmp_path, content):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    (run / "params.pt").write_bytes(content)
    env = {**os.environ, "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-m", "lipschitz_icl", "evaluate", str(run), "--prompts", "8"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 2
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert len(lines) == 1 and "params.pt" in lines[0], lines  # no torch warning before the error


def test_bayes_predictor_and_the_exact_baseline_warning(trained):
    table = evaluate_run(trained, prompts=64, contexts=[1, 4, 40], classes=["linear"])
    err = table.set_index(["n_context", "method"])["error"]
    # orthonormal features, linear class, noise-free: the posterior mean is the label of the query's
    # feature when the context holds it and 0 otherwise, which is what minimum-norm least squares gives
    for n in (1, 4, 40):
        assert err[(n, "Bayes (Sigma)")] == pytest.approx(err[(n, "least squares")], rel=1e-9, abs=1e-12)
    assert err[(40, "Bayes (Sigma)")] < 1e-20 and err[(40, "1-NN")] == 0.0
    (warning,) = table.attrs["warnings"]
    assert "from n = 40" in warning and "1-NN" in warning
    result = runner.invoke(app, ["evaluate", str(trained), "--prompts", "64", "--contexts", "1,40", "--class",
                                 "linear", "--out", str(trained / "w")])
    assert result.exit_code == 0 and "warning:" in result.output and "Bayes" in result.stdout


def test_no_exact_baseline_warning_with_label_noise(tmp_path):
    run = tmp_path / "noisy"
    li.run(None, ["train.steps=5", "engine.draws=8", "eval.functions=8", "prompt.N=6", "task.label_noise=0.1"], out=run)
    table = evaluate_run(run, prompts=16, contexts=[40], classes=["linear"])
    assert table.attrs["warnings"] == []
    assert (table.error > 0).all()  # label noise: nothing is exact
