"""The red team's probes against an external Dask cluster (issue 20), each a test: a worker SIGKILLed mid-sweep
(S6: the driver notices and fails or retries the point within its deadlines, no hang) and a scheduler that dies
mid-sweep (L2: one line, not a traceback). A scheduler and a worker without a nanny run as processes on
127.0.0.1; the deadlines are shortened. Slow (process start-ups): marked ``slow``, run by .ci/run."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from lipschitz_icl.sweep import load_index

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
LONG_RUNS = {"name": "d", "base": {"train": {"steps": 200_000, "log_every": 10_000, "eps": 1e-30},
                                   "engine": {"draws": 64}, "eval": {"functions": 8}},
             "grid": {"task.L": [1, 2]}}
# the driver, with deadlines short enough for a test (the defaults: 30 s, 60 s, 10 s)
DRIVER = ("from lipschitz_icl.sweep import dask_backend as d; d.LOST_WORKER_S = 2.0; d.NO_WORKER_S = 3.0; "
          "d.SCHEDULER_LOST_S = 3.0; from lipschitz_icl.__main__ import entry; entry()")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def cluster():
    """(scheduler process, worker process, address): a scheduler and one worker without a nanny."""
    address = f"tcp://127.0.0.1:{_free_port()}"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": ENV}
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                  "--port", address.rsplit(":", 1)[1], "--no-dashboard"], **quiet)
    worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--no-nanny",
                               "--nthreads", "1", "--no-dashboard"], **quiet)
    try:
        from distributed import Client

        with Client(address, timeout="60s") as client:
            client.wait_for_workers(1, timeout=60)
        yield scheduler, worker, address
    finally:
        for proc in (worker, scheduler):
            proc.kill()
            proc.wait(timeout=30)


def _start_sweep(tmp_path: Path, address: str) -> tuple[subprocess.Popen, Path]:
    spec = tmp_path / "d.yaml"
    spec.write_text(yaml.safe_dump(LONG_RUNS))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, "sweep", str(spec), "--out", str(out), "--scheduler",
                             address, "--batch", "1"], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 60
    while not (out / "sweep.yaml").exists():  # the driver is connected and has registered its points
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    time.sleep(2.0)  # a point is training on the worker
    return proc, out


def _ended(proc: subprocess.Popen, timeout: float = 45) -> str:
    """The driver's stderr once it ended; killed (and the test failed) if it did not end within ``timeout``."""
    try:
        return proc.communicate(timeout=timeout)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"the sweep did not end within {timeout} s")


def test_a_worker_killed_mid_sweep_fails_its_points_within_the_deadline(cluster, tmp_path):
    _, worker, address = cluster
    proc, out = _start_sweep(tmp_path, address)
    worker.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    stderr = _ended(proc)  # before the fix: waited forever
    assert time.monotonic() - killed < 40, "the driver took too long to notice the lost worker"
    assert proc.returncode == 1 and "Traceback" not in stderr, stderr
    rows = load_index(out)
    assert set(rows["status"]) == {"failed"} and rows["error"].str.contains("Dask worker").all(), rows["error"]


def test_a_scheduler_that_dies_mid_sweep_is_one_line(cluster, tmp_path):
    scheduler, _, address = cluster
    proc, out = _start_sweep(tmp_path, address)
    scheduler.send_signal(signal.SIGKILL)
    stderr = _ended(proc)
    lines = [ln for ln in stderr.splitlines() if ln.strip() and "%" not in ln and "sweep d" not in ln]
    assert proc.returncode == 1, stderr
    assert "Traceback" not in stderr and len(lines) == 1 and "scheduler went away" in lines[0], stderr
    assert set(load_index(out)["status"]) <= {"pending", "failed", "budget", "converged"}
