"""Errors speak the words of the interface they come from: the Python API names its keywords
(``out=``, ``force=True``, ``prompts=``), the command line its options (``--out``, ``--force``, ``--prompts``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import lipschitz_icl as li
from lipschitz_icl.cli import app
from lipschitz_icl.errors import UserInputError
from lipschitz_icl.evaluate import evaluate_run

QUICKSTART = str(Path(__file__).resolve().parents[1] / "configs" / "quickstart.yaml")
TINY = ["train.steps=5", "engine.draws=8", "eval.functions=8"]
cli = CliRunner()


def test_an_occupied_out_names_force_true_in_python_and_force_on_the_command_line(tmp_path):
    out = tmp_path / "L1"
    li.run(QUICKSTART, TINY, out=out)
    with pytest.raises(UserInputError) as refused:
        li.run(QUICKSTART, TINY, out=out)  # docs/USAGE.md's cell run a second time
    assert "force=True" in str(refused.value) and "--force" not in str(refused.value)
    assert str(refused.value).startswith(f"out={out}: already holds files")
    res = cli.invoke(app, ["run", QUICKSTART, *TINY, "--out", str(out)])
    assert res.exit_code == 2 and f"--out {out}: already holds files" in res.output and "--force" in res.output
    assert "force=True" not in res.output


def test_an_unfinished_run_says_how_to_rerun_it_in_each_interface(tmp_path):
    run = li.run(QUICKSTART, TINY, out=tmp_path / "r")
    summary = json.loads((run.dir / "summary.json").read_text())
    (run.dir / "summary.json").write_text(json.dumps({**summary, "status": "running"}))
    with pytest.raises(UserInputError, match=r"force=True\)\)$") as refused:
        li.load_run(run.dir)
    assert "--force" not in str(refused.value)
    res = cli.invoke(app, ["analyze", str(run.dir)])
    assert res.exit_code == 2 and "rerun it with --force" in res.output and "force=True" not in res.output


def test_evaluate_names_its_arguments_in_python_and_its_options_on_the_command_line(tmp_path):
    run = li.run(QUICKSTART, TINY, out=tmp_path / "r")
    with pytest.raises(UserInputError, match=r"^prompts: must be at least 2 \(got 1\)$"):
        evaluate_run(run, prompts=1)
    with pytest.raises(UserInputError, match=r"^classes: 'nope' is not registered"):
        evaluate_run(run, classes=["nope"])
    res = cli.invoke(app, ["evaluate", str(run.dir), "--class", "nope"])
    assert res.exit_code == 2 and "--class 'nope' is not registered" in res.output and "classes:" not in res.output


def test_print_config_says_what_each_key_means_and_allows_and_loads_back(tmp_path):
    res = cli.invoke(app, ["run", QUICKSTART, "task.L=1", "--print-config"])
    assert res.exit_code == 0, res.output
    keys = [line for line in res.output.splitlines() if line.startswith("  ")]
    assert keys and all(" # " in line and len(line.split(" # ", 1)[1]) > 5 for line in keys)  # every key described
    by_key = {line.split(":")[0].strip(): line for line in keys}
    assert "allowed: gd | sgd | adam" in by_key["optimizer"] and "step size eta" in by_key["lr"]
    assert "allowed: an integer >= 2, <= 100000" in by_key["K"]
    assert any("linear | norm" in line and "registered task classes" in line for line in keys)
    (tmp_path / "printed.yaml").write_text(res.output)
    printed = li.load_config(tmp_path / "printed.yaml")
    assert printed.config_hash() == li.load_config(QUICKSTART, ["task.L=1"]).config_hash()
