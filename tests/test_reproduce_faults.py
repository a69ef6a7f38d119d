"""reproduce under hostile inputs and faults, each found by a red team and fixed: a kill inside an
experiment keeps its finished runs; another --workers resumes; a full disk, a huge seed, a hand-edited
or ill-typed checkpoint, a broken numba and a late Ctrl-C are each one line with the right exit code;
every run that stopped at its budget is counted as censored."""

from __future__ import annotations

import errno
import json
import os
import signal
import time
from pathlib import Path

import fake_experiments
import pytest
from test_reproduce_resume import _claims_json, _reproduce, _start_fake_reproduce, _wait_for_text
from typer.testing import CliRunner

from lipschitz_icl import reproduce as reproduce_module
from lipschitz_icl import store
from lipschitz_icl.cli import app
from lipschitz_icl.errors import UserInputError
from lipschitz_icl.experiments import registry, run_experiments
from lipschitz_icl.experiments.checkpoint import _checksum, load_checkpoint
from lipschitz_icl.experiments.runner import Context
from lipschitz_icl.experiments.sizes import TINY
from lipschitz_icl.reproduce import MAX_SEED, fused_available

cli = CliRunner()


@pytest.fixture
def fake_suite(monkeypatch):
    monkeypatch.setattr(registry, "_EXPERIMENTS", dict(fake_experiments.FAKE_REGISTRY))


def _one_line(result) -> str:
    """The one error line (the per-experiment log lines of a non-terminal stderr aside), no traceback."""
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


def test_a_kill_inside_an_experiment_keeps_its_finished_runs(tmp_path, fake_suite):
    clean = tmp_path / "clean"
    assert _reproduce(clean).exit_code == 0
    out, log = tmp_path / "out", tmp_path / "stderr.txt"
    proc = _start_fake_reproduce(out, log)
    try:
        _wait_for_text(log, "started exp_slow", proc)
        time.sleep(1.0)  # exp_slow's two fast runs are written; its slow one is training
        proc.send_signal(signal.SIGKILL)  # no handler, no report: only what was written as it ended
        proc.communicate(timeout=60)
    finally:
        proc.kill()
    statuses = {p.parent.name: json.loads(p.read_text())["status"] for p in (out / "runs/slow").glob("*/summary.json")}
    assert set(statuses) == {"L0.5", "L1"}  # the slow run never ended: nothing of it is there
    again = _reproduce(out)
    assert again.exit_code == 0, again.output
    assert "reused exp_first" in again.stderr and "(1 runs trained, 2 reused)" in again.stderr
    assert _claims_json(out) == _claims_json(clean)


def test_a_resume_with_other_workers_reuses_runs_and_fails_nothing(tmp_path, fake_suite):
    out = tmp_path / "out"
    assert _reproduce(out).exit_code == 0
    before = _claims_json(out)
    for path in sorted((out / "runs" / "slow" / "L1.5").iterdir()):  # one run lost: exp_slow must run again
        path.unlink()
    (out / "runs" / "slow" / "L1.5").rmdir()
    again = _reproduce(out, "--workers", "2")  # the missing run goes through the Dask sweep engine
    assert again.exit_code == 0, again.output
    assert "failed" not in again.output and "(1 runs trained, 2 reused)" in again.stderr
    assert _claims_json(out) == before
    assert (out / "runs" / "slow" / "L1.5" / "summary.json").is_file() and not (out / "runs/slow/.sweep").exists()


def test_a_full_disk_during_reproduce_is_one_line_and_exit_1(tmp_path, fake_suite, monkeypatch):
    real = store._write

    def write(fh, data, target):
        if "slow" in target.parts:  # the disk fills up while exp_slow writes its runs
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fh, data, target)

    monkeypatch.setattr(store, "_write", write)
    result = _reproduce(tmp_path / "out")
    assert result.exit_code == 1
    assert "No space left on device" in _one_line(result)


@pytest.mark.parametrize("seed", [str(2**63), str(MAX_SEED + 1), "-1"])
def test_a_seed_out_of_range_is_one_line_and_exit_2(tmp_path, seed):
    result = cli.invoke(app, ["reproduce", "B4", "--quick", "--seed", seed, "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "--seed" in _one_line(result) and str(MAX_SEED) in result.output
    assert not (tmp_path / "o").exists()
    with pytest.raises(UserInputError, match="seed"):
        reproduce_module.reproduce("B4", tmp_path / "api", quick=True, seed=-1)


def _edit_checkpoint(out: Path, edit) -> Path:
    path = next((out / "experiments").glob("*.exp_first.json"))
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    return path


def test_an_edited_or_ill_typed_checkpoint_is_never_reused(tmp_path, fake_suite):
    out = tmp_path / "out"
    assert _reproduce(out).exit_code == 0
    measured = json.loads((out / "claims.json").read_text())["claims"][0]["verdict"]
    ctx = Context(out=out, quick=True, fused=fused_available())
    assert load_checkpoint(ctx, fake_experiments.exp_first) is not None

    def hand_edit(data):
        data["claims"][0]["verdict"] = "no verdict"  # a verdict typed in by hand: the checksum fails

    _edit_checkpoint(out, hand_edit)
    assert load_checkpoint(ctx, fake_experiments.exp_first) is None
    again = _reproduce(out)
    assert again.exit_code == 0 and "started exp_first" in again.stderr  # run again, not reused
    assert json.loads((out / "claims.json").read_text())["claims"][0]["verdict"] == measured

    def ill_typed(data):
        data["claims"][0]["wall_s"] = "fast"
        data["sha256"] = _checksum(data["claims"])  # a consistent checksum: the types must fail

    _edit_checkpoint(out, ill_typed)
    assert load_checkpoint(ctx, fake_experiments.exp_first) is None


def test_a_signal_after_the_last_experiment_names_it_and_says_the_output_is_complete(tmp_path, fake_suite,
                                                                                       monkeypatch):
    real = reproduce_module.write_report

    def write_then_signal(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # while the report is written: held back until it is whole
        return real(*args, **kwargs)

    monkeypatch.setattr(reproduce_module, "write_report", write_then_signal)
    result = _reproduce(tmp_path / "out")
    assert result.exit_code == 130
    line = _one_line(result)
    assert "(SIGINT)" in line and "complete" in line
    assert json.loads((tmp_path / "out" / "claims.json").read_text())["meta"]["status"] == "finished"


def test_every_run_that_stopped_at_its_budget_is_counted_censored(tmp_path):
    ctx = Context(out=tmp_path, quick=True, sizes=TINY)
    for c in run_experiments(ctx, fake_experiments.FAKE):
        budget = [r for r in c.runs if json.loads((tmp_path / r / "summary.json").read_text())["status"] == "budget"]
        assert c.censored_runs == budget and c.censored >= len(budget)
    assert any(c.censored_runs for c in run_experiments(Context(out=tmp_path / "b", quick=True, sizes=TINY),
                                                        [fake_experiments.exp_first]))  # 20 steps: some do


def test_an_out_on_a_read_only_file_system_is_one_line_and_exit_2(tmp_path, monkeypatch):
    """--out on a read-only file system was exit 1 'I/O error'; it is bad input, refused before anything runs
    (simulated: mkdir under ro/ raises EROFS, and ro/existing is not writable)."""
    ro = tmp_path / "ro"
    (ro / "existing").mkdir(parents=True)
    real_mkdir, real_access = Path.mkdir, os.access

    def mkdir(self, *args, **kwargs):
        if ro in self.parents and not self.exists():
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: real_access(path, mode, **kw) and not (
        mode & os.W_OK and ro in Path(path).parents))
    for out, message in ((ro / "new" / "out", "cannot create the output directory (Read-only file system)"),
                         (ro / "existing", "the output directory is not writable")):
        res = cli.invoke(app, ["reproduce", "linear", "--quick", "--out", str(out)])
        assert res.exit_code == 2, res.output
        assert res.output.strip() == f"error: --out {out}: {message}"
    with pytest.raises(UserInputError, match=r"out=.*ro/new/out: cannot create the output directory"):
        reproduce_module.make_out_dir(ro / "new" / "out")
