"""A reproduce of sampled-engine runs (and kernel ones) killed at random moments with SIGINT, SIGTERM and
SIGKILL, and resumed each time, ends with the claims and the runs of an uninterrupted reproduce, bit for bit.
The delays are drawn from a seeded generator; the kill lands anywhere from an experiment's start on."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import fake_sampled
import pandas as pd
import pytest
from test_reproduce_resume import _claims_json, _env
from typer.testing import CliRunner

from lipschitz_icl.api import load_run
from lipschitz_icl.cli import app
from lipschitz_icl.experiments import registry

CODE = "import fake_sampled; fake_sampled.install(); from lipschitz_icl.__main__ import entry; entry()"
ARGS = ["reproduce", "linear", "--quick"]


@pytest.fixture
def sampled_suite(monkeypatch):
    monkeypatch.setattr(registry, "_EXPERIMENTS", dict(fake_sampled.FAKE_REGISTRY))


def _runs(out: Path) -> dict[str, tuple[pd.DataFrame, dict]]:
    """Every finished run under out/runs: its metrics and its summary without the wall time."""
    found = {}
    for summary in sorted(out.glob("runs/*/*/summary.json")):
        run = load_run(summary.parent)
        found[str(summary.parent.relative_to(out))] = (run.metrics, {k: v for k, v in run.summary.items()
                                                                    if k != "wall_s"})
    return found


def _kill_and_resume(out: Path, log: Path, signals: list[signal.Signals], rng: random.Random,
                     jobs: int, span: float) -> list[int]:
    """Start the same reproduce (``jobs`` experiments at a time) once per signal and send it that signal a random
    moment after its first experiment started, within the first 80 % of ``span`` (the uninterrupted job's seconds,
    one at a time) shared by the ``jobs`` (unless it ended first, which ends the loop). The exit codes, in order."""
    codes = []
    for sig in signals:
        with log.open("w") as fh:
            proc = subprocess.Popen([sys.executable, "-c", CODE, *ARGS, "--jobs", str(jobs), "--out", str(out)],
                                    stdout=subprocess.DEVNULL, stderr=fh, env=_env())
        try:
            deadline = time.monotonic() + 120
            while "started exp_" not in log.read_text() and proc.poll() is None:  # imports done, training
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)
            time.sleep(rng.uniform(0.0, 0.8 * span / jobs))  # side by side, the job takes about 1/jobs as long
            if proc.poll() is None:
                proc.send_signal(sig)
            codes.append(proc.wait(timeout=120))
        finally:
            proc.kill()
        if codes[-1] == 0:  # it ended before the signal: the job is done
            break
    return codes


def _differences(a, b, path: str = "") -> list[str]:
    """Where two JSON values differ: each path with its two values (the first few)."""
    if isinstance(a, dict) and isinstance(b, dict):
        found = [f"{path}.{k}: only in one" for k in sorted(a.keys() ^ b.keys(), key=str)]
        return (found + [d for k in a.keys() & b.keys() for d in _differences(a[k], b[k], f"{path}.{k}")])[:8]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _differences(x, y, f"{path}[{i}]")][:8]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"[:300]]


def _chaos(tmp_path: Path, signals: list[signal.Signals], seed: int, jobs: int) -> None:
    """Killed and resumed with ``jobs`` experiments at a time, against an uninterrupted run one at a time."""
    clean = tmp_path / "clean"
    start = time.monotonic()
    assert CliRunner().invoke(app, [*ARGS, "--jobs", "1", "--out", str(clean)]).exit_code == 0
    out = tmp_path / "out"
    codes = _kill_and_resume(out, tmp_path / "stderr.txt", signals, random.Random(seed), jobs, time.monotonic() - start)
    assert set(codes) <= {0, 130, -signal.SIGKILL}, codes  # SIGINT and SIGTERM: 130; SIGKILL: killed
    final = subprocess.run([sys.executable, "-c", CODE, *ARGS, "--jobs", str(jobs), "--out", str(out)],
                           capture_output=True, text=True, env=_env(), timeout=300)
    assert final.returncode == 0, final.stderr
    resumed, uninterrupted = _claims_json(out), _claims_json(clean)
    assert resumed == uninterrupted, _differences(resumed, uninterrupted)
    runs, reference = _runs(out), _runs(clean)
    assert runs.keys() == reference.keys() and len(runs) == 20
    for name, (metrics, summary) in reference.items():
        pd.testing.assert_frame_equal(runs[name][0], metrics, check_exact=True, obj=name)
        assert runs[name][1] == summary, name
    sessions = json.loads((out / "reproduce.json").read_text())["sessions"]
    assert sessions[-1]["status"] == "finished"
    assert any(s["status"] != "finished" for s in sessions[:-1])  # a session was stopped


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_sampled_suite_killed_by_sigterm_and_sigkill_then_resumed_equals_an_uninterrupted_one(tmp_path,
                                                                                                sampled_suite, jobs):
    _chaos(tmp_path, [signal.SIGTERM, signal.SIGKILL], seed=5, jobs=jobs)


@pytest.mark.slow
def test_a_sampled_suite_killed_at_random_moments_then_resumed_equals_an_uninterrupted_one(tmp_path, sampled_suite):
    rng = random.Random(11)
    signals = [rng.choice([signal.SIGINT, signal.SIGTERM, signal.SIGKILL]) for _ in range(6)]
    _chaos(tmp_path, [signal.SIGINT, signal.SIGTERM, signal.SIGKILL, *signals], seed=11, jobs=2)
