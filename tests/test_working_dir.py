"""Nothing writes into the working directory unless asked: each command runs in an empty
temporary working directory, and the directory must still be empty afterwards."""

from __future__ import annotations

import os

import pytest
from cli_support import runner

import lipschitz_icl as li
from lipschitz_icl.cli import app

TINY = ["features.K=3", "features.d=3", "prompt.N=8", "train.steps=5", "engine.draws=8", "eval.functions=8"]


@pytest.fixture
def run_dir(tmp_path):
    run = li.run(li.load_config(None, TINY), out=tmp_path / "runs" / "tiny")
    return run.dir


@pytest.fixture
def empty_cwd(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    old = os.getcwd()
    os.chdir(work)
    yield work
    os.chdir(old)


@pytest.mark.parametrize("args", [
    ["theory", *TINY, "--iters", "4"],
    ["analyze", "{run}"],
    ["evaluate", "{run}", "--prompts", "8", "--contexts", "1,2"],
    ["bench", "--tiny", "--only", "batched"],
    ["--version"],
])
def test_command_leaves_the_working_directory_empty(args, run_dir, empty_cwd):
    result = runner.invoke(app, [a.format(run=run_dir) for a in args])
    assert result.exit_code == 0, result.output
    assert sorted(os.listdir(empty_cwd)) == []


def test_python_run_without_write_leaves_the_working_directory_empty(empty_cwd):
    run = li.run(li.load_config(None, TINY), write=False)
    assert run.dir is None and sorted(os.listdir(empty_cwd)) == []


def test_load_run_reads_the_trained_params(run_dir):
    loaded = li.load_run(run_dir)
    assert loaded.params is not None and set(loaded.params) == {"Q"}
