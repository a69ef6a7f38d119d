"""Sweeps under faults: a point that kills its worker, markup in user text, a --scheduler that is
not Dask, a spec too large to expand, non-finite axis values, and a chaos sweep resumed to the end."""

import os
import random
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from lipschitz_icl.cli import app
from lipschitz_icl.errors import UserInputError
from lipschitz_icl.sweep import MAX_POINTS, dask_backend, execute, load_index, load_runs, load_sweep, run_sweep

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])}
FATED = {"train": {"steps": 20, "log_every": 10}, "engine": {"draws": 16, "batch": 64}, "eval": {"functions": 16},
         "plugins": ["sweep_tasks"], "task": {"kind": "test_fated", "kernel_samples": 64}}
# per fate: zip values of (task.params.fate, engine.kind, engine.dtype, task.L, train.lr, features.noise)
FATES = {"ok": ("ok", "kernel", "float64", 1.0, 1.0, 0.0), "exit": ("exit", "kernel", "float64", 1.0, 1.0, 0.0),
         "raise": ("raise", "kernel", "float64", 1.0, 1.0, 0.0),
         "diverge": ("ok", "sampled", "float32", 1e6, 1e30, 0.5)}  # overflows Q in one step
ZIP_KEYS = ["task.params.fate", "engine.kind", "engine.dtype", "task.L", "train.lr", "features.noise"]
ENDED = {"converged", "budget", "diverged", "failed"}


def fated_spec(path: Path, fates: list[str]) -> Path:
    zipped = {key: [FATES[f][i] for f in fates] for i, key in enumerate(ZIP_KEYS)}
    zipped["seed"] = list(range(len(fates)))
    path.write_text(yaml.safe_dump({"name": path.stem, "base": FATED, "zip": zipped}))
    return path


def sweep_cli(spec: Path, out: Path, *extra: str, timeout: float = 240) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "lipschitz_icl", "sweep", str(spec), "--out", str(out), *extra]
    return subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=timeout)


def assert_one_run_per_row(out: Path):
    rows = load_index(out, stored_json=True)
    assert rows["name"].is_unique and rows["summary"].notna().all()  # every run recorded, with its summary
    runs = {r.summary["config_hash"]: r for r in load_runs(out)}
    for row in rows.itertuples():
        assert runs[row.config_hash].config.config_hash() == row.config_hash
        assert runs[row.config_hash].summary["status"] == row.status
    return rows


def test_a_point_that_kills_its_worker_is_failed_and_the_others_finish(tmp_path):
    spec = fated_spec(tmp_path / "k.yaml", ["ok", "exit", "ok"])
    first = sweep_cli(spec, tmp_path / "o", "--workers", "2")
    assert first.returncode == 1, first.stderr  # some failed: recorded, the driver lived
    rows = assert_one_run_per_row(tmp_path / "o").set_index("task.params.fate", append=True)
    statuses = dict(zip(rows.index.get_level_values(1), rows["status"], strict=True))
    assert list(rows["status"]) == [statuses["ok"], "failed", statuses["ok"]] and statuses["ok"] in ENDED - {"failed"}
    assert "the process training it ended without a result (exit code" in rows["error"].iloc[1]
    again = sweep_cli(spec, tmp_path / "o", "--workers", "2")
    assert again.returncode == 1 and "ran 0, skipped 3" in again.stdout  # the failed point is not rerun


def test_on_the_embedded_dask_cluster_too_a_point_that_kills_its_worker_is_failed(tmp_path, monkeypatch):
    """Where a local sweep cannot fork (the platform, or other threads), it runs on an embedded Dask cluster: the
    same outcome."""
    monkeypatch.setattr(execute, "fork_safe", lambda: False)
    spec = fated_spec(tmp_path / "k.yaml", ["ok", "exit", "ok"])
    rows = run_sweep(spec, tmp_path / "o", workers=2, batch=3).set_index("task.params.fate", append=True)
    statuses = dict(zip(rows.index.get_level_values(1), rows["status"], strict=True))
    assert list(rows["status"]) == [statuses["ok"], "failed", statuses["ok"]] and statuses["ok"] in ENDED - {"failed"}
    assert "KilledWorker" in rows["error"].iloc[1]


def test_markup_in_paths_and_errors_is_printed_as_text(tmp_path):
    spec = fated_spec(tmp_path / "m.yaml", ["ok", "raise"])
    out = tmp_path / "res[/x]" / "[bold]"
    result = runner.invoke(app, ["sweep", str(spec), "--workers", "1", "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert "res[/x]/[bold]" in result.stdout.replace("\n", "")
    status = runner.invoke(app, ["sweep", "status", str(out)])
    assert status.exit_code == 0, status.output
    assert "[Errno 28] full [/x] [bold]" in status.stdout
    assert "res[/x]/[bold]" in "".join(status.stdout.split())  # the table title, however wrapped
    missing = runner.invoke(app, ["sweep", "status", str(tmp_path / "no[/x]")])
    assert missing.exit_code == 2 and "no[/x]" in missing.stderr


class _Garbage(socketserver.BaseRequestHandler):
    reply = b"\xff\xfe garbage \x00" * 64

    def handle(self):
        self.server.connected.set()
        try:
            self.request.recv(1024)
            self.request.sendall(self.reply)
            time.sleep(60)  # then keep the connection open and silent
        except OSError:
            pass


class _Http(_Garbage):
    reply = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"


@pytest.fixture(params=[_Http, _Garbage], ids=["http", "garbage"])
def not_dask(request):
    socketserver.ThreadingTCPServer.daemon_threads = True
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), request.param)
    server.connected = threading.Event()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"tcp://127.0.0.1:{server.server_address[1]}", server.connected
    server.shutdown()
    server.server_close()


def test_a_scheduler_that_is_not_dask_is_named_within_the_deadline(tmp_path, monkeypatch, not_dask):
    not_dask, _ = not_dask
    monkeypatch.setattr(dask_backend, "CONNECT_TIMEOUT_S", 3.0)
    start = time.monotonic()
    with pytest.raises(UserInputError, match=f"no Dask scheduler at {not_dask}") as info:
        run_sweep({"base": FATED, "seeds": 2}, tmp_path / "o", scheduler=not_dask)
    assert time.monotonic() - start < 10
    assert "memory" not in str(info.value)
    assert not (tmp_path / "o").exists()  # no sweep directory of pending rows


def test_nothing_listening_is_no_dask_scheduler(tmp_path, monkeypatch):
    monkeypatch.setattr(dask_backend, "CONNECT_TIMEOUT_S", 3.0)  # Dask retries a refused connection until then
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(UserInputError, match="no Dask scheduler at"):
        run_sweep({"base": FATED}, tmp_path / "o", scheduler=f"tcp://127.0.0.1:{port}")
    assert not (tmp_path / "o").exists()


def test_sigterm_ends_a_hanging_scheduler_connect(tmp_path, not_dask):
    not_dask, connected = not_dask
    spec = tmp_path / "t.yaml"
    spec.write_text(yaml.safe_dump({"base": FATED}))
    cmd = [sys.executable, "-m", "lipschitz_icl", "sweep", str(spec), "--scheduler", not_dask, "--out",
           str(tmp_path / "o")]
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert connected.wait(60), "the sweep never tried the address"
    time.sleep(0.5)  # inside the connect attempt (its deadline is 20 s)
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=10)  # the process ends: nothing keeps it alive
    finally:
        proc.kill()
    stderr = proc.stderr.read()
    assert "Traceback" not in stderr
    # 130: interrupted while connecting; -SIGTERM or 2: it had already refused the address and was exiting
    assert code in (130, -signal.SIGTERM) or (code == 2 and "no Dask scheduler at" in stderr), (code, stderr)
    assert not (tmp_path / "o").exists()


def test_a_spec_too_large_is_refused_before_expanding(tmp_path):
    spec = tmp_path / "big.yaml"
    spec.write_text(yaml.safe_dump({"base": FATED, "grid": {"task.L": "linspace(1, 2, 1000)",
                                                             "train.lr": "linspace(0.1, 1, 1000)"}}))
    start = time.monotonic()
    done = sweep_cli(spec, tmp_path / "o", "--workers", "1", timeout=60)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "grid.train.lr" in lines[0] and str(MAX_POINTS) in lines[0]
    assert time.monotonic() - start < 30 and not (tmp_path / "o").exists()


def test_the_point_limit_names_the_axis_that_crosses_it():
    n = int(MAX_POINTS**0.5) + 1
    with pytest.raises(UserInputError, match=r"^seeds: "):
        load_sweep({"grid": {"task.L": f"linspace(1, 2, {n})"}, "seeds": n})


@pytest.mark.parametrize("value", [float("inf"), float("nan"), float("-inf")])
def test_a_non_finite_axis_value_names_its_axis(value):
    with pytest.raises(UserInputError, match=r"^grid\.task\.L: must be a finite number"):
        load_sweep({"grid": {"task.L": [1.0, value]}})


def _wait_for_rows(index: Path, n: int, proc: subprocess.Popen, deadline: float) -> None:
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if (index.exists() and len(load_index(index.parent).query("status != 'pending'")) >= n):
                return
        except Exception:  # noqa: BLE001 - the index is being created
            pass
        time.sleep(0.1)


def test_chaos_sweep_resumed_to_the_end_gives_every_point_one_status_and_one_directory(tmp_path):
    rng = random.Random(11)
    fates = [rng.choice(list(FATES)) for _ in range(8)]
    spec = fated_spec(tmp_path / "chaos.yaml", fates)
    out = tmp_path / "o"
    cmd = [sys.executable, "-m", "lipschitz_icl", "sweep", str(spec), "--out", str(out), "--workers", "2"]
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        _wait_for_rows(out / "index.sqlite", 2, proc, time.monotonic() + 120)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its workers, mid-sweep
        proc.wait()
    resumed = sweep_cli(spec, out, "--workers", "2")
    assert resumed.returncode in (0, 1), resumed.stderr
    retried = sweep_cli(spec, out, "--workers", "2", "--retry-failed")
    assert retried.returncode in (0, 1), retried.stderr
    rows = assert_one_run_per_row(out)
    assert len(rows) == len(fates) and set(rows["status"]) <= ENDED
    expected = {"ok": ENDED - {"failed", "diverged"}, "exit": {"failed"}, "raise": {"failed"}, "diverge": {"diverged"}}
    for fate, status in zip(fates, rows["status"], strict=True):
        assert status in expected[fate], (fate, status)
    files = {p.name for p in (out / "results").iterdir() if p.suffix == ".parquet"}
    assert files == set(rows["results"].dropna())  # no results file that no row names
