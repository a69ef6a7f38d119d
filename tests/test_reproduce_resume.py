"""reproduce under interruption: Ctrl-C or SIGTERM stops it with exit 130 and a report whose
unfinished claims say interrupted; the same command again resumes and ends with the claims of an
uninterrupted run; claims from interrupted or failed runs are never more than inconclusive."""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import fake_experiments
import pytest
from typer.testing import CliRunner

from lipschitz_icl import NUMERICS_REVISION, load_run
from lipschitz_icl.cli import app
from lipschitz_icl.experiments import checkpoint, registry, run_experiments
from lipschitz_icl.experiments import runner as exp_runner
from lipschitz_icl.experiments.checkpoint import ExperimentsInterrupted, load_checkpoint, source_digest
from lipschitz_icl.experiments.claims import INCONCLUSIVE
from lipschitz_icl.experiments.runner import Context
from lipschitz_icl.experiments.sizes import TINY
from lipschitz_icl.reproduce import fused_available

ROOT = Path(__file__).resolve().parents[1]
cli = CliRunner()
VOLATILE = {"wall_s", "date"}
SESSION = {"command", "sessions"}  # which session wrote what, and with which --out: not the claims


@pytest.fixture
def fake_suite(monkeypatch):
    monkeypatch.setattr(registry, "_EXPERIMENTS", dict(fake_experiments.FAKE_REGISTRY))


def _claims_json(out: Path) -> dict:
    """claims.json without wall times and dates."""
    data = json.loads((out / "claims.json").read_text())
    data["meta"] = {k: v for k, v in data["meta"].items() if k not in VOLATILE | SESSION}
    data["claims"] = [{k: v for k, v in c.items() if k not in VOLATILE} for c in data["claims"]]
    return data


def _reproduce(out: Path, *extra: str):
    return cli.invoke(app, ["reproduce", "linear", "--quick", "--out", str(out), *extra])


def _env(**extra: str) -> dict:
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", **extra}


def _start_fake_reproduce(out: Path, log: Path) -> subprocess.Popen:
    code = ("import fake_experiments; fake_experiments.install(); from lipschitz_icl.__main__ import entry; "
            "entry()")
    with log.open("w") as fh:
        return subprocess.Popen([sys.executable, "-c", code, "reproduce", "linear", "--quick", "--jobs", "1", "--out",
                                 str(out)],  # one at a time: which runs had finished is known (chaos: --jobs 2)
                                stdout=subprocess.PIPE, stderr=fh, text=True, env=_env(FAKE_SLOW="1"))


def _wait_for_text(log: Path, text: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while text not in log.read_text():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < end, f"{text!r} never appeared: {log.read_text()}"
        time.sleep(0.05)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_stops_reproduce_with_130_and_a_rerun_resumes_to_the_uninterrupted_claims(tmp_path, fake_suite, sig):
    clean = tmp_path / "clean"
    assert _reproduce(clean).exit_code == 0
    out, log = tmp_path / "out", tmp_path / "stderr.txt"
    proc = _start_fake_reproduce(out, log)
    try:
        _wait_for_text(log, "started exp_slow", proc)  # one line per experiment: stderr is not a terminal
        time.sleep(1.0)  # inside the training loop of the slow run
        proc.send_signal(sig)
        stdout, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    stderr = log.read_text()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and f"interrupted ({sig.name})" in stderr
    assert "4 finished runs kept" in stderr  # exp_first's two and exp_slow's two fast ones, written as they ended
    assert "claims (" not in stdout  # no claims table as if all were well
    interrupted = _claims_json(out)
    assert interrupted["meta"]["status"] == "interrupted"
    verdicts = {c["id"]: (c["verdict"], c["statistic"].get("status")) for c in interrupted["claims"]}
    assert verdicts["P2"] == (INCONCLUSIVE, "interrupted") and verdicts["P3"] == (INCONCLUSIVE, "interrupted")
    assert "interrupted" in (out / "report.md").read_text()
    assert json.loads((out / "runs/slow/L1.5/summary.json").read_text())["status"] == "interrupted"
    # the same command again: exp_first is reused, the rest run; the claims equal the clean run's
    again = _reproduce(out)
    assert again.exit_code == 0, again.output
    assert "resuming" in again.stderr and "reused exp_first" in again.stderr
    assert "finished exp_slow in" in again.stderr and "(1 runs trained, 2 reused)" in again.stderr
    assert _claims_json(out) == _claims_json(clean)
    header = next(line for line in (out / "report.md").read_text().split("\n") if line.startswith("Command:"))
    # the whole job: both sessions, the command as given
    assert "over 2 sessions" in header and "interrupted" in header and f"--out {out}" in header


def test_an_interrupt_a_trainer_turns_into_a_run_status_still_stops_the_experiments(tmp_path, fake_suite):
    # the batched trainer catches Ctrl-C and records the run as interrupted; reproduce must not go on
    def progress(label: str, done: int, total: int) -> None:
        if label == "slow" and 0 < done:  # a run of the group has ended: Ctrl-C in the middle of the batch
            signal.raise_signal(signal.SIGINT)

    ctx = Context(out=tmp_path, quick=True, sizes=TINY, progress=progress)
    with pytest.raises(ExperimentsInterrupted) as stop:
        run_experiments(ctx, fake_experiments.FAKE)
    by_id = {c.id: c for c in stop.value.claims}
    assert by_id["P1"].criterion.startswith("fake")  # finished before the interrupt
    assert by_id["P2"].verdict == INCONCLUSIVE and by_id["P2"].statistic == {"status": "interrupted"}
    assert by_id["P3"].statistic == {"status": "interrupted"}
    assert not (tmp_path / "runs" / "last").exists()  # nothing ran after the interrupt


def test_a_claim_from_a_failed_run_is_inconclusive_with_the_reason(tmp_path, monkeypatch):
    real = exp_runner.run_many

    def one_run_fails(configs, progress=None, on_run=None):
        def fail_first(i, run):  # the first run ends failed, as it is written
            if i == 0:
                run.summary["status"] = "failed"
            on_run(i, run)

        return real(configs, progress, on_run=fail_first)

    monkeypatch.setattr(exp_runner, "run_many", one_run_fails)
    ctx = Context(out=tmp_path, quick=True, sizes=TINY)
    claims = run_experiments(ctx, [fake_experiments.exp_slow])  # supported when its runs are sound
    assert [c.verdict for c in claims] == [INCONCLUSIVE]
    assert "interrupted or failed" in claims[0].notes and "runs/slow/L0.5 (failed)" in claims[0].notes


def test_other_options_never_reuse_saved_results(tmp_path, fake_suite):
    out = tmp_path / "out"
    assert _reproduce(out).exit_code == 0
    step = fused_available()  # the kernel step the command chose
    ctx = Context(out=out, quick=True, seed=1, fused=step)
    assert load_checkpoint(ctx, fake_experiments.exp_first) is None  # another seed: stale
    other_step = Context(out=out, quick=True, fused=not step)
    assert load_checkpoint(other_step, fake_experiments.exp_first) is None  # the other kernel step: stale
    assert load_checkpoint(Context(out=out, quick=True, fused=step), fake_experiments.exp_first) is not None
    refused = _reproduce(out, "--seed", "1")
    assert refused.exit_code == 2 and "already holds files" in refused.stderr
    assert "it holds `reproduce linear --quick" in refused.stderr  # what made it, as a command
    resume = _reproduce(out, "--seed", "1", "--resume")
    assert resume.exit_code == 2 and "--resume" in resume.stderr and "--seed 1" in resume.stderr
    forced = _reproduce(out, "--seed", "1", "--force")
    assert forced.exit_code == 0, forced.output
    assert "reused" not in forced.stderr and forced.stderr.count("finished exp_") == 3
    assert json.loads((out / "reproduce.json").read_text())["seed"] == 1
    # --force removed the earlier job's checkpoints: nothing of seed 0 can be reused by a later resume
    assert load_checkpoint(Context(out=out, quick=True, fused=step), fake_experiments.exp_first) is None


def test_a_result_made_by_other_source_code_is_never_reused(tmp_path, fake_suite):
    out = tmp_path / "out"
    assert _reproduce(out).exit_code == 0
    ctx = Context(out=out, quick=True, fused=fused_available())
    assert load_checkpoint(ctx, fake_experiments.exp_first) is not None
    path = next((out / "experiments").glob("*exp_first.json"))
    saved = json.loads(path.read_text())
    assert saved["fingerprint"]["source"] == source_digest(fake_experiments.exp_first) != ""
    saved["fingerprint"]["source"] = "0" * 16  # as the experiment's code was before an edit
    path.write_text(json.dumps(saved))
    assert load_checkpoint(ctx, fake_experiments.exp_first) is None


def test_a_result_or_run_of_another_numerics_revision_is_never_reused(tmp_path, fake_suite, monkeypatch):
    out = tmp_path / "out"
    assert _reproduce(out).exit_code == 0
    ctx = Context(out=out, quick=True, fused=fused_available())
    assert load_checkpoint(ctx, fake_experiments.exp_first) is not None
    summary = next((out / "runs").rglob("summary.json"))
    cfg = load_run(summary.parent).config
    assert json.loads(summary.read_text())["versions"]["numerics"] == str(NUMERICS_REVISION)
    assert exp_runner._reusable(summary.parent, cfg) is not None
    for module in (checkpoint, exp_runner):  # as if the numbers a config gives had changed since
        monkeypatch.setattr(module, "NUMERICS_REVISION", NUMERICS_REVISION + 1)
    assert load_checkpoint(ctx, fake_experiments.exp_first) is None
    assert exp_runner._reusable(summary.parent, cfg) is None


def test_the_source_digest_follows_the_bytes_of_the_module(tmp_path, monkeypatch):
    module = tmp_path / "my_paper_module.py"
    module.write_text("def exp_mine(ctx):\n    return []\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    mine = importlib.import_module("my_paper_module").exp_mine
    first = source_digest(mine)
    module.write_text("def exp_mine(ctx):\n    return []  # an edit\n")
    checkpoint._files_digest.cache_clear()  # a new process reads the file again
    assert len(first) == 16 and source_digest(mine) != first


def test_a_finished_output_rerun_reuses_everything(tmp_path, fake_suite):
    out = tmp_path / "out"
    assert _reproduce(out).exit_code == 0
    first = _claims_json(out)
    again = _reproduce(out, "--resume")
    assert again.exit_code == 0
    assert again.stderr.count("reused exp_") == 3 and "started" not in again.stderr
    assert _claims_json(out) == first


def test_ctrl_c_while_starting_prints_one_line(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "lipschitz_icl", "reproduce", "linear", "--quick", "--out",
                             str(tmp_path / "o")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env())
    time.sleep(0.4)  # the imports (torch, pandas, pyarrow) take longer than this
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert len([line for line in stderr.splitlines() if line.strip()]) == 1, stderr


def test_default_reproduce_out_is_claimed_atomically(tmp_path, monkeypatch):
    # a rival job creates reproduce-out/linear-quick between our look and our mkdir
    from lipschitz_icl.cli import reproduce as cli_reproduce

    monkeypatch.chdir(tmp_path)
    base = Path("reproduce-out/linear-quick")
    real_mkdir = Path.mkdir

    def racing_mkdir(self, *args, **kwargs):
        if self == base and not base.exists():
            real_mkdir(base, parents=True)
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", racing_mkdir)
    assert cli_reproduce._default_out("linear", True) == Path("reproduce-out/linear-quick-1")
