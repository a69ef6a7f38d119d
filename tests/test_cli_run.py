"""``lipschitz-icl run`` from the command line: outputs, --print-config, and config errors."""

import json
import os
import subprocess
import sys

import pytest
import yaml
from typer.testing import CliRunner

from lipschitz_icl.cli import app

runner = CliRunner()


def test_print_config_is_the_full_default_config():
    result = runner.invoke(app, ["run", "--print-config"])
    assert result.exit_code == 0
    data = yaml.safe_load(result.stdout)
    assert {"features", "prompt", "task", "model", "engine", "train", "eval"} <= set(data)
    assert data["task"]["L"] == 2.0


def test_run_writes_four_files(tmp_path):
    out = tmp_path / "r"
    result = runner.invoke(app, ["run", "train.steps=20", "engine.draws=16", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml", "metrics.parquet", "params.pt", "summary.json"]
    assert json.loads((out / "summary.json").read_text())["status"] in ("budget", "converged")
    assert "min_k Attn_k" in result.stdout


BAD = [
    (["task.Lx=1"], "task.Lx"),  # unknown key
    (["task.L=abc"], "task.L"),  # wrong type
    (["features.K=9"], "features.K"),  # K > d for orthonormal features
    (["task.L=0"], "task.L"),  # L <= 0
    (["task.L=-2"], "task.L"),
    (["train.lr=0"], "train.lr"),  # eta <= 0
    (["train.lr=-1"], "train.lr"),
    (["features.probs=[0.5,0.6,0,0,0]"], "features.probs"),  # do not sum to 1
    (["features.probs=[0.5,0.5]"], "features.probs"),  # wrong length
    (["task.kind=nope"], "task.kind"),
    (["train.eps=.nan"], "train.eps"),
    (["prompt.N=0"], "prompt.N"),
    (["engine.kind=magic"], "engine.kind"),
    (["task.params={width: -3}", "task.kind=relu_net"], "task.params.width"),
    (["task.params={colour: 3}", "task.kind=relu_net"], "task.params.colour"),
    (["features.kind=file", "features.path=missing.npy"], "features.path"),
    (["plugins=[no_such_module_here]"], "plugins"),
    (["name=../../escape"], "name"),
    (["missing-config.yaml"], "missing-config.yaml"),
    (["trainlr"], "trainlr"),
]


@pytest.mark.parametrize("args,field", BAD)
def test_config_errors_exit_2_with_one_line_and_no_run_dir(tmp_path, args, field, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["run", *args])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert field in lines[0]
    assert "Traceback" not in result.output
    assert not (tmp_path / "runs").exists()


def test_existing_out_is_not_overwritten(tmp_path):
    out = tmp_path / "keep"
    out.mkdir()
    (out / "precious.txt").write_text("x")
    result = runner.invoke(app, ["run", "train.steps=5", "--out", str(out)])
    assert result.exit_code == 2
    assert (out / "precious.txt").read_text() == "x"
    assert sorted(p.name for p in out.iterdir()) == ["precious.txt"]


def test_console_script_help_runs():
    env = {**os.environ, "COLUMNS": "100"}
    proc = subprocess.run([sys.executable, "-m", "lipschitz_icl", "run", "--help"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 0
    assert "--print-config" in proc.stdout
