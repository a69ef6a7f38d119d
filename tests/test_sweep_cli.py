"""``lipschitz-icl sweep`` from the command line: both forms, table/status, spec errors, and a sweep
killed with SIGKILL then resumed on Dask."""

import io
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from typer.testing import CliRunner

from lipschitz_icl.cli import app
from lipschitz_icl.sweep import load_index, load_metrics, load_runs, run_sweep

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
SMALL = {"train": {"steps": 40, "log_every": 10}, "engine": {"draws": 32}, "eval": {"functions": 32}}
TIMING = ["wall_s", "elapsed_s", "finished_at"]  # the only columns allowed to differ between two sweeps


def write_spec(path: Path, **spec) -> Path:
    path.write_text(yaml.safe_dump({"base": SMALL, **spec}))
    return path


def test_short_form_runs_then_does_no_work_then_prints_the_table(tmp_path):
    spec = write_spec(tmp_path / "s.yaml", grid={"task.L": [1, 2]}, seeds=2)
    out = tmp_path / "out"
    result = runner.invoke(app, ["sweep", str(spec), "--workers", "1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "ran 4, skipped 0" in result.stdout
    again = runner.invoke(app, ["sweep", "run", str(spec), "--workers", "1", "--out", str(out)])
    assert again.exit_code == 0 and "ran 0, skipped 4" in again.stdout
    table = runner.invoke(app, ["sweep", "table", str(out)])
    assert table.exit_code == 0
    lines = table.stdout.splitlines()
    assert lines[0].startswith("| name | task.L | seed | status |") and len(lines) == 2 + 4
    csv = runner.invoke(app, ["sweep", "table", str(out), "--format", "csv"])
    frame = pd.read_csv(io.StringIO(csv.stdout))
    assert len(frame) == 4 and {"config_hash", "final_loss", "T_eps", "delta_nd", "task.L"} <= set(frame.columns)
    pq = tmp_path / "t.parquet"
    assert runner.invoke(app, ["sweep", "table", str(out), "-f", "parquet", "-o", str(pq)]).exit_code == 0
    assert pd.read_parquet(pq)["final_loss"].tolist() == frame["final_loss"].tolist()
    status = runner.invoke(app, ["sweep", "status", str(out)])
    assert status.exit_code == 0 and "total" in status.stdout


BAD = [
    ({"grid": {"task.L": "logspace(1, 2)"}}, "grid.task.L"),
    ({"grid": {"task.L": [1, 0]}}, "grid.task.L"),
    ({"zip": {"task.L": [1, 2], "train.lr": [1]}}, "zip"),
    ({"seeds": -1}, "seeds"),
    ({"colour": 1}, "colour"),
]


@pytest.mark.parametrize("spec,field", BAD)
def test_spec_errors_exit_2_with_one_line(tmp_path, spec, field):
    path = write_spec(tmp_path / "bad.yaml", **spec)
    result = runner.invoke(app, ["sweep", str(path), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and field in lines[0] and "bad.yaml" in lines[0], result.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("args", [["sweep", "missing.yaml"], ["sweep", "status", "nowhere"],
                                  ["sweep", "table", "nowhere"], ["sweep", "s.yaml", "--workers", "0"]])
def test_bad_paths_exit_2(tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    write_spec(tmp_path / "s.yaml")
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert len([line for line in result.stderr.splitlines() if line.strip()]) == 1


def test_failed_runs_exit_1_and_are_listed(tmp_path):
    spec = write_spec(tmp_path / "f.yaml", zip={"task.kind": ["linear", "test_broken"]})
    data = yaml.safe_load(spec.read_text())
    data["base"]["plugins"] = ["plugin_task"]
    spec.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["sweep", str(spec), "--workers", "1", "--out", str(tmp_path / "o")])
    assert result.exit_code == 1
    status = runner.invoke(app, ["sweep", "status", str(tmp_path / "o")])
    assert "failed" in status.stdout and "TaskEvaluationError" in status.stdout


def _finished_rows(index: Path) -> int:
    if not index.exists():
        return 0
    try:
        db = sqlite3.connect(index, timeout=1)
        try:
            return db.execute("SELECT count(*) FROM runs WHERE status != 'pending'").fetchone()[0]
        finally:
            db.close()
    except sqlite3.OperationalError:  # the table is not created yet
        return 0


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_sigkill_halfway_then_rerun_matches_an_uninterrupted_sweep(tmp_path, sig):
    spec = write_spec(tmp_path / "k.yaml", grid={"task.L": [0.5, 1, 2, 4]}, seeds=3)
    data = yaml.safe_load(spec.read_text())
    data["base"]["train"]["steps"] = 100
    data["fused"] = False  # the torch step: the compiled one can end the 12 runs before the kill comes
    spec.write_text(yaml.safe_dump(data))
    total = 12

    reference = run_sweep(spec, tmp_path / "ref", workers=1)

    killed = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])}
    cmd = [sys.executable, "-m", "lipschitz_icl", "sweep", str(spec), "--workers", "2", "--out", str(killed)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while _finished_rows(killed / "index.sqlite") < 3:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the sweep did not record 3 runs in time"
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, sig)  # the driver and its Dask workers, mid-sweep (SIGTERM: as a batch system stops it)
        try:
            rc = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rc = proc.wait()
    if sig == signal.SIGTERM:  # handled as Ctrl-C: one line, exit 130, what finished kept
        lines = proc.stderr.read().decode().strip().splitlines()
        assert rc == 130 and lines and "Traceback" not in "\n".join(lines), lines
    done_at_kill = _finished_rows(killed / "index.sqlite")
    assert 3 <= done_at_kill < total, "the sweep was not killed halfway"

    resumed = run_sweep(spec, killed, workers=1)

    assert len(resumed) == len(reference) == total
    assert set(resumed["status"]) <= {"budget", "converged"}
    pd.testing.assert_frame_equal(resumed.drop(columns=[*TIMING, "run_dir", "results"]),
                                  reference.drop(columns=[*TIMING, "run_dir", "results"]))
    pd.testing.assert_frame_equal(load_metrics(killed), load_metrics(tmp_path / "ref"))
    files = {p.name for p in (killed / "results").iterdir()}  # no temporary files, none no row names
    assert {f for f in files if f.endswith(".parquet")} == set(resumed["results"])
    assert all(f.endswith((".parquet", ".params.pt")) for f in files)
    for run, ref in zip(load_runs(killed), load_runs(tmp_path / "ref"), strict=True):
        assert all(torch.equal(run.params[k], ref.params[k]) for k in ref.params)
    assert len(load_index(killed)) == total


def test_ctrl_c_exits_130_and_the_sweep_resumes(tmp_path):
    # one batch of 4: two runs end at step 20 and are stored within FLUSH_S seconds, the two others
    # are still training when Ctrl-C comes
    spec = write_spec(tmp_path / "c.yaml", grid={"train.steps": [20, 50000]}, seeds=2)
    data = yaml.safe_load(spec.read_text())
    data["base"]["train"].update({"eps": 1e-12, "log_every": 100})
    data["fused"] = False  # the torch step: the long runs are still training when Ctrl-C comes
    spec.write_text(yaml.safe_dump(data))
    out = tmp_path / "o"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = [sys.executable, "-m", "lipschitz_icl", "sweep", str(spec), "--workers", "1", "--out", str(out)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while _finished_rows(out / "index.sqlite") < 1:
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    assert "run the same command to resume" in proc.stderr.read().decode()
    before = load_index(out)
    assert set(before["status"]) & {"pending", "interrupted"}  # stopped before the end
    rows = run_sweep(spec, out, workers=1)
    assert len(rows) == 4 and set(rows["status"]) <= {"budget", "converged"}


def test_sigkill_mid_batch_then_rerun_matches_an_unbatched_sweep(tmp_path):
    """A batched in-process sweep stores the runs that stopped every FLUSH_S seconds: runs that ended early in
    a batch are in the index while the rest of the batch trains; a SIGKILL then loses only those in flight."""
    spec = write_spec(tmp_path / "b.yaml", grid={"train.steps": [40, 4000, 8000]}, seeds=3)
    data = yaml.safe_load(spec.read_text())
    data["base"]["train"].update({"eps": 1e-12, "log_every": 100})  # every run ends at its budget
    data["fused"] = False  # the torch step: the compiled one can end the long runs before the kill comes
    spec.write_text(yaml.safe_dump(data))
    reference = run_sweep(spec, tmp_path / "ref", workers=1, batch=1)

    killed = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])}
    env["LIPSCHITZ_ICL_FLUSH_S"] = "0"  # each run stored the step after it stopped
    cmd = [sys.executable, "-m", "lipschitz_icl", "sweep", str(spec), "--workers", "1", "--batch", "9",
           "--out", str(killed)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while _finished_rows(killed / "index.sqlite") < 3:  # the three 40-step runs of the one batch
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the sweep did not record 3 runs in time"
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # mid-batch: six runs still training
        proc.wait()
    assert 3 <= _finished_rows(killed / "index.sqlite") < 9, "the sweep was not killed mid-batch"

    resumed = run_sweep(spec, killed, workers=1)  # batched again (the default)

    pd.testing.assert_frame_equal(resumed.drop(columns=[*TIMING, "run_dir", "results"]),
                                  reference.drop(columns=[*TIMING, "run_dir", "results"]))
    pd.testing.assert_frame_equal(load_metrics(killed), load_metrics(tmp_path / "ref"))


def test_batch_below_one_is_refused(tmp_path):
    spec = write_spec(tmp_path / "z.yaml", grid={"task.L": [1]})
    result = runner.invoke(app, ["sweep", str(spec), "--batch", "0", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "--batch must be an integer >= 1 (got 0)" in result.output
    assert not (tmp_path / "o").exists()
