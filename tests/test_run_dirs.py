"""Run directories: --force clears the previous run, analyze/evaluate refuse unfinished or mixed runs,
default names are claimed atomically, corrupt files are bad input, file modes follow the umask."""

from __future__ import annotations

import errno
import json
import os
import pathlib
import threading

import pytest
import torch
from typer.testing import CliRunner

import lipschitz_icl as li
from lipschitz_icl import api, store
from lipschitz_icl.cli import app
from lipschitz_icl.errors import UserInputError
from lipschitz_icl.threads import cores

runner = CliRunner()
SMALL = ["train.steps=10", "train.log_every=5", "engine.draws=8", "eval.functions=8"]
OLD_FILES = ["analysis.json", "evaluation.csv", "evaluation.parquet", "evaluation.png", "metrics.parquet",
             "params.pt"]


def _stderr_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    return lines[0]


def _finished_run(out: pathlib.Path) -> None:
    assert runner.invoke(app, ["run", *SMALL, "--out", str(out)]).exit_code == 0
    assert runner.invoke(app, ["analyze", str(out)]).exit_code == 0
    ev = runner.invoke(app, ["evaluate", str(out), "--prompts", "4", "--contexts", "1,2"])
    assert ev.exit_code == 0, ev.output


class _Killed(BaseException):
    """Stands for SIGKILL: nothing in the run catches it."""


def test_killed_force_run_leaves_no_old_files_and_analyze_evaluate_refuse(tmp_path, monkeypatch):
    out = tmp_path / "run"
    _finished_run(out)
    assert set(OLD_FILES) <= {p.name for p in out.iterdir()}

    def killed(*args, **kwargs):
        raise _Killed

    monkeypatch.setattr(api, "train", killed)
    with pytest.raises(_Killed):
        li.run(None, [*SMALL, "task.L=0.5"], out=out, force=True)
    monkeypatch.undo()
    # the old run's metrics, params, analysis and evaluation are gone; only the new run's start is left
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml", "summary.json"]
    assert json.loads((out / "summary.json").read_text())["status"] == "running"
    for cmd in (["analyze", str(out)], ["evaluate", str(out), "--prompts", "4"]):
        result = runner.invoke(app, cmd)
        assert result.exit_code == 2, (cmd, result.output)
        assert "did not finish" in _stderr_line(result)


def test_force_keeps_files_that_are_not_run_outputs(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert runner.invoke(app, ["run", *SMALL, "--out", str(out), "--force"]).exit_code == 0
    assert (out / "notes.txt").read_text() == "mine"


def test_files_of_two_different_runs_are_refused(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    li.run(None, SMALL, out=a)
    li.run(None, [*SMALL, "task.L=0.5"], out=b)
    (a / "config.yaml").write_text((b / "config.yaml").read_text())  # a's metrics, b's config
    with pytest.raises(UserInputError, match="config_hash"):
        li.load_run(a)
    result = runner.invoke(app, ["analyze", str(a)])
    assert result.exit_code == 2 and "config_hash" in _stderr_line(result)
    with pytest.raises(UserInputError, match="config.yaml: not the file written"):  # its digest, recorded with it
        li.load_run(a, require_finished=False)


def test_load_run_loads_params(tmp_path):
    run = li.run(None, SMALL, out=tmp_path / "r")
    loaded = li.load_run(tmp_path / "r")
    assert loaded.params is not None and loaded.params.keys() == run.params.keys()


def test_analyze_of_a_read_only_run_prints_the_analysis_and_says_it_was_not_saved(tmp_path, monkeypatch):
    out = tmp_path / "run"
    li.run(None, SMALL, out=out)
    real = store._write

    def read_only(fh, data, target):
        if target.name == store.ANALYSIS_FILE:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        return real(fh, data, target)

    monkeypatch.setattr(store, "_write", read_only)  # root ignores chmod: a read-only filesystem instead
    result = runner.invoke(app, ["analyze", str(out)])
    assert result.exit_code == 1
    assert "final min_k Attn_k" in result.stdout  # the analysis itself is printed
    line = _stderr_line(result)
    assert "analysis.json" in line and "Read-only file system" in line
    assert not (out / "analysis.json").exists()


@pytest.mark.parametrize("name,garbage", [("metrics.parquet", b"PAR1 not really"), ("summary.json", b"{oops"),
                                          ("summary.json", b"[1, 2]")])
def test_corrupt_run_files_are_bad_input_naming_the_file(tmp_path, name, garbage):
    out = tmp_path / "run"
    li.run(None, SMALL, out=out)
    (out / name).write_bytes(garbage)
    result = runner.invoke(app, ["analyze", str(out)])
    assert result.exit_code == 2, result.output
    assert name in _stderr_line(result)
    assert runner.invoke(app, ["evaluate", str(out), "--prompts", "4"]).exit_code == 2


def test_a_rival_taking_the_default_directory_first_gets_its_own(tmp_path, monkeypatch):
    # another process creates runs/x between our look and our mkdir: we must not share it
    base = tmp_path / "runs" / "x"
    real_mkdir = pathlib.Path.mkdir

    def racing_mkdir(self, *args, **kwargs):
        if self == base and not base.exists():
            real_mkdir(base, parents=True)  # the rival wins the race
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "mkdir", racing_mkdir)
    path = store.prepare_run_dir(None, "x", root=tmp_path / "runs")
    assert path == tmp_path / "runs" / "x-1"


def _claim_together(root: pathlib.Path, name: str, n: int = 4) -> list[pathlib.Path]:
    got: list[pathlib.Path] = []
    barrier = threading.Barrier(n)

    def claim() -> None:
        barrier.wait()
        got.append(store.prepare_run_dir(None, name, root=root))

    threads = [threading.Thread(target=claim) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return got


def test_simultaneous_default_directories_are_distinct(tmp_path):
    for trial in range(30):
        got = _claim_together(tmp_path, f"t{trial}")
        assert len(set(got)) == 4, got


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_output_files_honour_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        li.run(None, SMALL, out=tmp_path / "r")
    finally:
        os.umask(old)
    for p in (tmp_path / "r").iterdir():
        assert p.stat().st_mode & 0o777 == mode, p.name


def test_li_run_follows_the_thread_policy_and_threads_overrides(tmp_path, monkeypatch):
    seen: list[int] = []
    real_train = api.train

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real_train(*args, **kwargs)

    monkeypatch.setattr(api, "train", spy)
    torch.set_num_threads(2)
    try:
        monkeypatch.setenv("LIPSCHITZ_ICL_THREADS", str(cores()))  # at most the cores: more is clamped
        li.run(None, SMALL, write=False)
        monkeypatch.delenv("LIPSCHITZ_ICL_THREADS")
        li.run(None, SMALL, write=False)
        li.run(None, SMALL, write=False, threads=2)
        assert torch.get_num_threads() == 2  # restored after each run
    finally:
        torch.set_num_threads(1)
    assert seen == [cores(), 1, 2]


def test_run_repr_is_one_line_and_names_its_directory(tmp_path, caplog):
    with caplog.at_level("INFO", logger="lipschitz_icl"):
        run = li.run(None, SMALL, out=tmp_path / "r")
    text = repr(run)
    assert "\n" not in text and text.startswith("Run(status=budget") and str(tmp_path / "r") in text
    assert f"min_attn={run.summary['min_attn']:.4g}," in text  # numbers to 4 digits, like final_loss
    assert f"wrote run {tmp_path / 'r'}" in caplog.text
    assert repr(li.load_run(run.dir)) == text
