"""Interruption: SIGINT or SIGTERM during ``lipschitz-icl run`` leaves a valid run directory with status
``interrupted`` and readable metrics; SIGKILL leaves only whole files, and a rerun completes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from lipschitz_icl import store

ROOT = Path(__file__).resolve().parents[1]
# a run that would take many minutes: label noise keeps the loss above eps, the budget is large
LONG = ["train.steps=1000000", "train.log_every=50", "task.label_noise=0.5", "train.eps=1e-12",
        "engine.draws=64", "eval.functions=32"]
KILLS = {"survived": 0}


def _start(out: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "lipschitz_icl", "run", *LONG, "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 90) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, f"{path} did not appear"
        time.sleep(0.05)


def _cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _let_it_train(proc: subprocess.Popen, cpu_s: float = 2.5, wall_s: float = 30) -> None:
    """Wait until the run has had ``cpu_s`` seconds of CPU since now (robust to a loaded machine:
    the first optimizer step alone imports for a second or two), or ``wall_s`` have passed."""
    start, end = _cpu_seconds(proc.pid), time.monotonic() + wall_s
    if start is None:
        time.sleep(4)
        return
    while time.monotonic() < end and proc.poll() is None:
        now = _cpu_seconds(proc.pid)
        if now is None or now - start >= cpu_s:
            return
        time.sleep(0.05)


def _no_temp_files(out: Path) -> None:
    assert [p.name for p in out.iterdir() if p.name.endswith(store.TMP_SUFFIX)] == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_during_run_leaves_an_interrupted_run(tmp_path, sig):
    out = tmp_path / "run"
    proc = _start(out)
    try:
        _wait_for(out / "config.yaml", proc)
        _let_it_train(proc)
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    assert 0 <= summary["steps"] < 1_000_000
    metrics = pd.read_parquet(out / "metrics.parquet")
    assert len(metrics) > 0 and metrics.step.max() <= summary["steps"]
    assert list(metrics.columns) == ["step", "metric", "k", "n", "value"]
    assert yaml.safe_load((out / "config.yaml").read_text())["train"]["steps"] == 1_000_000
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml", "metrics.parquet", "params.pt", "summary.json"]
    assert "interrupted" in stdout
    KILLS["survived"] += 1


def test_two_quick_interrupts_still_leave_a_valid_run(tmp_path):
    out = tmp_path / "run"
    proc = _start(out)
    try:
        _wait_for(out / "config.yaml", proc)
        _let_it_train(proc)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.02)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # a second Ctrl-C while the run is being written
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert json.loads((out / "summary.json").read_text())["status"] == "interrupted"
    assert len(pd.read_parquet(out / "metrics.parquet")) > 0
    _no_temp_files(out)
    KILLS["survived"] += 1


def test_sigkill_leaves_whole_files_and_a_rerun_completes(tmp_path):
    out = tmp_path / "run"
    proc = _start(out)
    try:
        _wait_for(out / "summary.json", proc)
        _let_it_train(proc, cpu_s=1.0)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        proc.kill()
    # no handler runs on SIGKILL: what is there is what was written before, and it is whole
    _no_temp_files(out)
    assert json.loads((out / "summary.json").read_text())["status"] == "running"
    assert yaml.safe_load((out / "config.yaml").read_text())["train"]["steps"] == 1_000_000
    assert not (out / "metrics.parquet").exists()
    KILLS["survived"] += 1
    # the killed run's folder is kept (not clobbered) unless asked; --force reruns it to the end
    from typer.testing import CliRunner

    from lipschitz_icl.cli import app

    config = str(out / "config.yaml")
    refused = CliRunner().invoke(app, ["run", config, "--out", str(out)])
    assert refused.exit_code == 2
    rerun = CliRunner().invoke(app, ["run", config, "train.steps=30", "--out", str(out), "--force"])
    assert rerun.exit_code == 0, rerun.output
    assert json.loads((out / "summary.json").read_text())["status"] == "budget"
    assert pd.read_parquet(out / "metrics.parquet").step.max() == 30



def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def test_sigterm_while_starting_is_one_line_and_exit_130(tmp_path):
    """A sweep's first seconds are imports: SIGTERM there ended it with 143 and nothing said."""
    proc = subprocess.Popen([sys.executable, "-m", "lipschitz_icl", "sweep", "run",
                             str(ROOT / "configs" / "sweeps" / "l_sweep.yaml"), "--out", str(tmp_path / "s")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    time.sleep(0.3)  # the imports (torch, pandas, pyarrow) take longer than this
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert stderr.strip() == "error: interrupted while starting (SIGTERM)"
    assert not (tmp_path / "s").exists()


def test_sigterm_between_the_imports_and_the_command_is_handled_like_ctrl_c():
    """Once started, SIGTERM raises KeyboardInterrupt (as Ctrl-C does) even before a command installs its own
    handler: one line and exit 130, never a silent 143."""
    proc = _entry_with("import os, signal, time\ndef main():\n    os.kill(os.getpid(), signal.SIGTERM)\n"
                       "    time.sleep(30)\ncli.main = main\n")
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.strip() == "error: interrupted"


def _entry_with(patch: str) -> subprocess.CompletedProcess:
    """``__main__.entry()`` in a fresh process, after ``patch`` (Python source; ``cli`` is lipschitz_icl.cli)."""
    code = f"import lipschitz_icl.cli as cli\nfrom lipschitz_icl.__main__ import entry\n{patch}entry()\n"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=60)


def test_an_interrupt_while_a_command_loads_is_one_line_and_exit_130():
    """Ctrl-C (or SIGTERM, a KeyboardInterrupt by then) while the command's own module is imported: one line, not
    typer's silent exit 130."""
    proc = _entry_with("import sys\ndef load(name):\n    raise KeyboardInterrupt\ncli._load = load\n"
                       "sys.argv = ['lipschitz-icl', 'theory']\n")
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.strip() == "error: interrupted while starting"


def test_a_ctrl_c_the_process_was_started_ignoring_stays_ignored_while_it_starts():
    """A background job of a non-interactive shell starts with SIGINT ignored; it stays ignored during the imports
    too (it was only while the command ran), so the command finishes."""
    proc = subprocess.Popen([sys.executable, "-m", "lipschitz_icl", "--version"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    time.sleep(0.3)  # inside the imports
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and out.startswith("lipschitz-icl "), err


@pytest.mark.parametrize("exit_code", [0, 3])
def test_sigterm_after_the_command_ended_exits_with_the_commands_own_code(exit_code):
    """A SIGTERM that lands while the interpreter shuts down (here: an atexit callback that sleeps) ends the process
    at once with the command's exit code, not as killed (-15): a job that finished reads as finished. (In the
    teardown after the exit callbacks, where Python resets its handlers, both signals are ignored.)"""
    code = ("import atexit, sys, time\nimport lipschitz_icl.cli as cli\nfrom lipschitz_icl.__main__ import entry\n"
            "def main():\n    atexit.register(time.sleep, 30)  # as a library the command imports would\n"
            f"    print('done', flush=True)\n    sys.exit({exit_code})\n"
            "cli.main = main\nentry()\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env())
    assert proc.stdout.readline().strip() == "done"
    time.sleep(0.5)  # inside the sleeping atexit callback
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=20)
    assert proc.returncode == exit_code and time.monotonic() - start < 10


def test_a_signal_while_a_temporary_file_is_made_leaves_none_behind(tmp_path, monkeypatch):
    """SIGINT right after mkstemp made the temporary file (reproduce left figures/.scaling_L.svg.*.tmp):
    the signal waits until the file is whole and renamed, then interrupts; no temporary file is left."""
    real = store.tempfile.mkstemp

    def mkstemp_then_signal(*args, **kwargs):
        made = real(*args, **kwargs)
        signal.raise_signal(signal.SIGINT)
        return made

    monkeypatch.setattr(store.tempfile, "mkstemp", mkstemp_then_signal)
    target = tmp_path / "figures" / "scaling_L.svg"
    target.parent.mkdir()
    with pytest.raises(KeyboardInterrupt):
        store.atomic_write_bytes(target, b"<svg/>")
    assert target.read_bytes() == b"<svg/>" and sorted(p.name for p in target.parent.iterdir()) == ["scaling_L.svg"]


def test_zz_kill_count():
    print(f"\nkills survived: {KILLS['survived']}")
