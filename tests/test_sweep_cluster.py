"""``sweep run --cluster slurm|pbs`` (dask-jobqueue): the job script of ``--dry-run`` holds the options given, the
preload and the worker command, and nothing is submitted, trained or written; bad options and a missing
dask-jobqueue are one line, exit 2; with stand-ins for sbatch and scancel that run each job on this machine, a
cluster sweep stores the runs of a ``--workers 1`` sweep, and its jobs are cancelled at the end."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from cli_support import refused, runner
from test_readme import readme_blocks, shell_commands

from lipschitz_icl.cli import app
from lipschitz_icl.errors import UserInputError
from lipschitz_icl.sweep import load_index, load_metrics, plan_cluster, run_sweep

ROOT = Path(__file__).resolve().parents[1]
SMALL = {"train": {"steps": 40, "log_every": 10}, "engine": {"draws": 32}, "eval": {"functions": 32}}
TIMING = ["wall_s", "elapsed_s", "finished_at"]  # the only columns allowed to differ between two sweeps
# stand-ins for SLURM's commands: sbatch logs its call, copies the script (dask-jobqueue deletes it at once) and
# runs it in a session of its own, the job id being that session's; scancel ends the session
SBATCH = """#!/usr/bin/env bash
set -eu
echo "$@" >> "$FAKE_SLURM/calls"
script="$FAKE_SLURM/job-$$.sh"
cp "$1" "$script"
setsid bash "$script" > "$script.log" 2>&1 < /dev/null &
echo "Submitted batch job $!"
"""
SCANCEL = """#!/usr/bin/env bash
echo "scancel $1" >> "$FAKE_SLURM/calls"
kill -TERM -- "-$1" 2>/dev/null || true
"""


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch) -> Path:
    """sbatch and scancel stand-ins first on PATH; their folder (``calls``: what they were asked)."""
    folder = tmp_path / "slurm"
    folder.mkdir()
    for name, text in (("sbatch", SBATCH), ("scancel", SCANCEL)):
        (folder / name).write_text(text)
        (folder / name).chmod((folder / name).stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM", str(folder))
    return folder


def write_spec(path: Path, **spec) -> Path:
    path.write_text(yaml.safe_dump({"base": SMALL, **spec}))
    return path


SLURM_OPTIONS = ["cores=4", "memory=8GB", "queue=cpu", "account=my-project", "walltime=02:00:00",
                 "job_extra_directives=--gres=gpu:1", "job_extra_directives=--exclusive"]


def test_slurm_dry_run_prints_the_job_script_and_submits_nothing(tmp_path, monkeypatch, fake_slurm):
    spec = write_spec(tmp_path / "s.yaml", grid={"task.L": [1, 2, 3, 4]}, seeds=3)  # 12 runs
    monkeypatch.chdir(tmp_path)
    args = [a for option in SLURM_OPTIONS for a in ("--cluster-option", option)]
    result = runner.invoke(app, ["sweep", str(spec), "--cluster", "slurm", *args, "--jobs", "5", "--dry-run"])
    assert result.exit_code == 0, result.output
    script = result.stdout
    for line in ["#SBATCH -p cpu", "#SBATCH -A my-project", "#SBATCH --cpus-per-task=4", "#SBATCH --mem=8G",
                 "#SBATCH -t 02:00:00", "#SBATCH --gres=gpu:1", "#SBATCH --exclusive"]:
        assert line in script.splitlines(), line
    worker = next(line for line in script.splitlines() if "dask_worker" in line)
    assert "--preload lipschitz_icl.sweep.preload" in worker
    assert "--nworkers 4" in worker and "--nthreads 1" in worker  # cores=4: 4 single-threaded worker processes
    # 12 runs on 4 workers a job: 3 jobs, not the 5 asked for
    assert "would submit 3 slurm jobs of 4 Dask workers each with sbatch for the 12 runs" in script
    assert not (fake_slurm / "calls").exists()  # sbatch never called
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml", "slurm"]  # no sweep directory, nothing trained


def test_pbs_dry_run_holds_its_directives(tmp_path, monkeypatch):
    spec = write_spec(tmp_path / "s.yaml", grid={"task.L": [1, 2]})
    monkeypatch.chdir(tmp_path)
    options = ["cores=2", "queue=workq", "account=proj", "walltime=00:30:00", "job_extra_directives=-m n",
               "job_script_prologue=source ~/venvs/icl/bin/activate"]
    args = [a for option in options for a in ("--cluster-option", option)]
    result = runner.invoke(app, ["sweep", str(spec), "--cluster", "pbs", *args, "--dry-run"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    for line in ["#PBS -q workq", "#PBS -A proj", "#PBS -l walltime=00:30:00", "#PBS -m n",
                 "source ~/venvs/icl/bin/activate"]:
        assert line in lines, line
    assert any(line.startswith("#PBS -l select=1:ncpus=2:mem=") for line in lines)  # memory: 2 GB per worker
    assert "--preload lipschitz_icl.sweep.preload" in result.stdout
    assert "would submit 1 pbs job of 2 Dask workers each with qsub" in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


def test_defaults_are_one_single_threaded_worker_per_job():
    plan = plan_cluster("slurm")
    assert (plan.options["cores"], plan.processes, plan.options["memory"], plan.options["walltime"]) == (
        1, 1, "2GB", "01:00:00")
    assert plan.jobs_for(10) == 1 and plan_cluster("slurm", jobs=8).jobs_for(3) == 3
    script = plan_cluster("slurm", {"cores": 2, "queue": "cpu", "job_extra_directives": ["--gres=gpu:1"]}).job_script()
    assert "#SBATCH -p cpu" in script and "#SBATCH --gres=gpu:1" in script and "--nworkers 2" in script


BAD = [
    (["--cluster-option", "cores=x"], "cores=x: expected a whole number >= 1"),
    (["--cluster-option", "cores=0"], "cores=0: expected a whole number >= 1"),
    (["--cluster-option", "colour=red"], "unknown key 'colour' for --cluster slurm (allowed: account, cores,"),
    (["--cluster-option", "resource_spec=x"], "unknown key 'resource_spec' for --cluster slurm"),
    (["--cluster-option", "memory=lots"], "memory=lots: expected an amount such as 4GB"),
    (["--cluster-option", "walltime=soon"], "walltime=soon: expected a time such as 01:00:00"),
    (["--cluster-option", "death_timeout=nan"], "death_timeout=nan: expected seconds > 0"),
    (["--cluster-option", "queue"], "--cluster-option queue: expected KEY=VALUE"),
    (["--cluster-option", "cores=4", "--cluster-option", "processes=3"], "processes=3: must divide cores=4"),
    (["--jobs", "0"], "--jobs must be a whole number >= 1"),
    (["--cluster-option", "interface=nosuch0"], "cannot start the Dask scheduler (Cluster failed to start: 'nosuch0' "
                                                "is not a valid network interface."),
    (["--workers", "2"], "--workers and --cluster slurm: give one or the other"),
    (["--scheduler", "tcp://127.0.0.1:1"], "--scheduler and --cluster slurm: give one or the other"),
]


@pytest.mark.parametrize(("args", "message"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_a_bad_option_is_one_line_before_anything_runs(tmp_path, monkeypatch, args, message):
    spec = write_spec(tmp_path / "s.yaml", grid={"task.L": [1, 2]})
    monkeypatch.chdir(tmp_path)
    assert message in refused(["sweep", str(spec), "--cluster", "slurm", *args, "--dry-run"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


@pytest.mark.parametrize("args", [["--dry-run"], ["--jobs", "2"], ["--cluster-option", "cores=2"]])
def test_cluster_options_need_a_cluster(tmp_path, args):
    spec = write_spec(tmp_path / "s.yaml", grid={"task.L": [1, 2]})
    assert "only with --cluster slurm or pbs" in refused(["sweep", str(spec), *args])


def test_without_dask_jobqueue_it_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "dask_jobqueue", None)  # import dask_jobqueue now raises ImportError
    spec = write_spec(tmp_path / "s.yaml", grid={"task.L": [1, 2]})
    line = refused(["sweep", str(spec), "--cluster", "pbs", "--dry-run"])
    assert "--cluster pbs needs dask-jobqueue, which is not installed: pip install 'lipschitz-icl[cluster]'" in line
    with pytest.raises(UserInputError, match="needs dask-jobqueue"):
        run_sweep(spec, tmp_path / "out", cluster="slurm")
    assert not (tmp_path / "out").exists()


def test_without_sbatch_a_real_run_is_one_line_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))  # no sbatch there (nor on this machine)
    if shutil.which("sbatch"):
        pytest.skip("sbatch is installed beside this Python")
    spec = write_spec(tmp_path / "s.yaml", grid={"task.L": [1, 2]})
    line = refused(["sweep", str(spec), "--cluster", "slurm", "--out", str(tmp_path / "out")])
    assert "--cluster slurm: sbatch is not on PATH" in line
    assert not (tmp_path / "out").exists()


def test_a_job_that_sbatch_refuses_is_one_line_quoting_it(tmp_path, fake_slurm):
    (fake_slurm / "sbatch").write_text('#!/usr/bin/env bash\necho "sbatch: error: Invalid account: nobody" >&2\n'
                                       'exit 1\n')
    spec = write_spec(tmp_path / "s.yaml", grid={"task.L": [1, 2]})
    line = refused(["sweep", str(spec), "--cluster", "slurm", "--cluster-option", "account=nobody", "--out",
                    str(tmp_path / "out")])
    assert line.endswith("--cluster slurm: sbatch refused the job (sbatch: error: Invalid account: nobody)")
    assert set(load_index(tmp_path / "out")["status"]) == {"pending"}  # registered, to run when a job starts


def test_importing_dask_jobqueue_leaves_ctrl_c_alone(monkeypatch):
    """dask-jobqueue 0.9.0 sets a SIGINT handler calling sys.exit() when imported (dask/dask-jobqueue#696), which
    made Ctrl-C exit 0 without cancelling the jobs' sweep: the handler in place before stays."""
    for name in [n for n in sys.modules if n == "dask_jobqueue" or n.startswith("dask_jobqueue.")]:
        monkeypatch.delitem(sys.modules, name)  # imported afresh below, its module code run again
    before = signal.getsignal(signal.SIGINT)
    plan_cluster("slurm")
    assert signal.getsignal(signal.SIGINT) is before


def test_python_api_refuses_as_the_cli_does(tmp_path):
    with pytest.raises(UserInputError, match=r"cluster_options\['cores'\]: expected a whole number >= 1"):
        plan_cluster("slurm", {"cores": "many"})
    with pytest.raises(UserInputError, match="workers= and cluster='slurm'"):
        run_sweep({"base": SMALL}, tmp_path / "out", workers=2, cluster="slurm")
    with pytest.raises(UserInputError, match="--cluster sge: expected one of local, slurm, pbs"):
        plan_cluster("sge")


def test_the_docs_dry_run_example_runs(tmp_path, monkeypatch):
    """docs/SWEEPS.md's --dry-run block (the doc's one bash block that has it) runs and prints #SBATCH lines."""
    blocks = [b for b in readme_blocks((ROOT / "docs" / "SWEEPS.md").read_text()) if "--dry-run" in b.code]
    assert len(blocks) == 1
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    monkeypatch.chdir(tmp_path)
    for command in shell_commands(blocks[0].code):
        result = runner.invoke(app, shlex.split(command)[1:])
        assert result.exit_code == 0, result.output
        assert "#SBATCH -p cpu" in result.stdout and "--preload lipschitz_icl.sweep.preload" in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["configs"]


@pytest.mark.slow
def test_a_cluster_sweep_stores_the_runs_of_a_local_one_and_cancels_its_jobs(tmp_path, fake_slurm):
    """Two jobs of one worker each, started by the sbatch stand-in on this machine: the sweep's rows and metrics
    equal those of ``--workers 1`` with the torch step, a cluster's default (the workers' set-up is the embedded
    cluster's), and scancel ends both jobs."""
    spec = write_spec(tmp_path / "s.yaml", grid={"task.L": [1, 2]}, seeds=2)
    local = run_sweep(spec, tmp_path / "local", workers=1, fused=False)
    result = runner.invoke(app, ["sweep", str(spec), "--cluster", "slurm", "--jobs", "2", "--cluster-option",
                                 "death_timeout=20", "--out", str(tmp_path / "slurm-sweep")])
    assert result.exit_code == 0, result.output
    cluster = load_index(tmp_path / "slurm-sweep")
    drop = [*TIMING, "run_dir", "results"]
    pd.testing.assert_frame_equal(cluster.drop(columns=drop), local.drop(columns=drop))
    pd.testing.assert_frame_equal(load_metrics(tmp_path / "slurm-sweep"), load_metrics(tmp_path / "local"))
    calls = (fake_slurm / "calls").read_text().splitlines()
    submitted = [c for c in calls if not c.startswith("scancel")]
    assert len(submitted) == 2 and len([c for c in calls if c.startswith("scancel")]) == 2
    deadline = time.monotonic() + 20  # the jobs' sessions end (scancel's SIGTERM reaches their workers)
    while time.monotonic() < deadline and _alive_jobs(fake_slurm):
        time.sleep(0.2)
    assert not _alive_jobs(fake_slurm)


@pytest.mark.slow
@pytest.mark.parametrize("answer_after_s", [0, 2], ids=["queued", "while-sbatch-runs"])
def test_ctrl_c_while_the_jobs_wait_in_the_queue_cancels_them_and_exits_130(tmp_path, fake_slurm, answer_after_s):
    """Jobs queued, never started, are cancelled on Ctrl-C; also where Ctrl-C comes while ``sbatch`` has not yet
    answered with the job's id (``answer_after_s`` 2: it always does), which left both jobs in the queue."""
    (fake_slurm / "sbatch").write_text('#!/usr/bin/env bash\necho "$@" >> "$FAKE_SLURM/calls"\n'
                                       f'sleep {answer_after_s}\necho "Submitted batch job 4242"\n')
    spec = write_spec(tmp_path / "s.yaml", grid={"task.L": [1, 2]}, seeds=2)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = [sys.executable, "-m", "lipschitz_icl", "sweep", str(spec), "--cluster", "slurm", "--jobs", "2", "--out",
           str(out)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    calls = fake_slurm / "calls"
    deadline = time.monotonic() + 120
    while not (calls.exists() and len(calls.read_text().splitlines()) == 2):  # both jobs submitted
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    assert "run the same command to resume" in proc.stderr.read().decode()
    assert calls.read_text().splitlines()[2:] == ["scancel 4242", "scancel 4242"]
    assert set(load_index(out)["status"]) == {"pending"}


def _alive_jobs(folder: Path) -> list[int]:
    """Job ids (session ids) of the stand-in's jobs whose session still has a process."""
    ids = {int(line.split()[1]) for line in (folder / "calls").read_text().splitlines() if line.startswith("scancel")}
    alive = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if os.getsid(int(proc.name)) in ids:
                    alive.append(int(proc.name))
            except OSError:
                continue
    return alive
