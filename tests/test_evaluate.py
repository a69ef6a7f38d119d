"""``lipschitz-icl evaluate``: the baseline table on a tiny trained run, its files, and bad input."""

import pandas as pd
import pytest
from typer.testing import CliRunner

import lipschitz_icl as li
from lipschitz_icl.baselines import BASELINES
from lipschitz_icl.cli import app
from lipschitz_icl.evaluate import COLUMNS, default_contexts, evaluate_run

runner = CliRunner()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("ev") / "run"
    li.run(None, ["train.steps=60", "engine.draws=32", "eval.functions=32", "prompt.N=12"], out=out)
    return out


def test_evaluate_cli_prints_the_baseline_table(trained):
    result = runner.invoke(app, ["evaluate", str(trained), "--prompts", "64", "--contexts", "1,4,12"])
    assert result.exit_code == 0, result.output
    for name in ("model", "1-NN", "3-NN", "NW", "LS", "GP", "mean", "linear", "relu_net", "held out"):
        assert name in result.stdout, name
    table = pd.read_parquet(trained / "evaluation.parquet")
    assert list(table.columns) == COLUMNS
    assert len(table) == 3 * (1 + len(BASELINES)) * 2  # contexts x methods x classes
    pd.testing.assert_frame_equal(pd.read_csv(trained / "evaluation.csv"), table, check_dtype=False)
    assert (trained / "evaluation.png").stat().st_size > 1000


def test_evaluation_numbers(trained):
    table = evaluate_run(trained, prompts=64, contexts=[1, 12], classes=["linear"])
    one = table[table.n_context == 1].set_index("method")["error"]
    # one context example: softmax over one token, so the model, 1-NN and the mean all predict its label
    assert one["model"] == pytest.approx(one["1-NN"]) and one["model"] == pytest.approx(one["context mean"])
    full = table[table.n_context == 12].set_index("method")["error"]
    assert full["model"] < 0.7 * full["context mean"]  # the trained attention beats averaging
    assert (table.se > 0).all()
    # the same prompts for every method: a second evaluation gives the same numbers
    pd.testing.assert_frame_equal(table, evaluate_run(trained, prompts=64, contexts=[1, 12], classes=["linear"]))


def test_default_contexts():
    assert default_contexts(12) == [1, 2, 4, 8, 12]
    assert default_contexts(1) == [1]


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
