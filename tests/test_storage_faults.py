"""Storage faults: a bad or read-only output path is bad input (exit 2); a disk that fills up during a
run is a runtime I/O failure (exit 1). Either way one line on stderr, no temporary file left behind,
and every file already written intact."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from lipschitz_icl import store
from lipschitz_icl.cli import app

runner = CliRunner()
SMALL = ["train.steps=10", "engine.draws=8", "eval.functions=8"]
FAULTS = {"injected": 0}


def _one_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    return lines[0]


def _tmp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(store.TMP_SUFFIX)]


def test_out_under_a_file_is_bad_input(tmp_path):
    blocker = tmp_path / "somefile"
    blocker.write_text("keep me")
    result = runner.invoke(app, ["run", *SMALL, "--out", str(blocker / "sub")])
    FAULTS["injected"] += 1
    assert result.exit_code == 2
    assert "somefile" in _one_line(result)
    assert blocker.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["somefile"]


def test_out_that_is_a_file_is_bad_input(tmp_path):
    blocker = tmp_path / "somefile"
    blocker.write_text("keep me")
    result = runner.invoke(app, ["run", *SMALL, "--out", str(blocker)])
    assert result.exit_code == 2
    assert "not a directory" in _one_line(result)
    assert blocker.read_text() == "keep me"


def test_read_only_output_directory_is_bad_input(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        probe = ro / "probe"
        try:
            probe.mkdir()
        except PermissionError:
            pass
        else:  # root ignores permission bits: nothing to test here (the path-under-a-file test covers root)
            probe.rmdir()
            pytest.skip("running as root: chmod 555 does not stop writes")
        result = runner.invoke(app, ["run", *SMALL, "--out", str(ro / "run")])
        FAULTS["injected"] += 1
        assert result.exit_code == 2
        assert "ro" in _one_line(result)
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o755)


def _disk_full_on(monkeypatch, names: set[str], after_bytes: int = 7) -> list[str]:
    """From now on, writing any file in ``names`` writes a few bytes and then fails with ENOSPC."""
    hits: list[str] = []
    real = store._write

    def write(fh, data, target):
        if target.name not in names:
            return real(fh, data, target)
        hits.append(target.name)
        fh.write(data[:after_bytes])  # half a file reaches the disk ...
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # ... then the disk is full

    monkeypatch.setattr(store, "_write", write)
    return hits


def test_disk_full_while_writing_metrics(tmp_path, monkeypatch):
    hits = _disk_full_on(monkeypatch, {"metrics.parquet"})
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", *SMALL, "--out", str(out)])
    FAULTS["injected"] += 1
    assert hits == ["metrics.parquet"]
    assert result.exit_code == 1  # a runtime I/O failure
    assert "No space left on device" in _one_line(result)
    assert _tmp_files(tmp_path) == []  # the half-written temporary file was removed
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml", "summary.json"]  # no half metrics file
    assert yaml.safe_load((out / "config.yaml").read_text())["train"]["steps"] == 10  # intact
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "failed" and "metrics.parquet" in summary["error"]


def test_disk_full_on_every_file_after_the_first(tmp_path, monkeypatch):
    hits = _disk_full_on(monkeypatch, {"metrics.parquet", "summary.json"})
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", *SMALL, "--out", str(out)])
    FAULTS["injected"] += 1
    assert result.exit_code == 1
    assert "No space left on device" in _one_line(result)
    assert _tmp_files(tmp_path) == []
    # the run directory was undone: config.yaml had been written, summary.json could not be
    assert not out.exists()
    assert hits == ["summary.json"]


def test_disk_full_on_the_final_summary_keeps_the_earlier_one(tmp_path, monkeypatch):
    out = tmp_path / "run"
    calls = {"summary": 0}
    real = store._write

    def write(fh, data, target):
        if target.name == "summary.json":
            calls["summary"] += 1
            if calls["summary"] > 1:  # the first (status running) succeeds, the final one fails
                fh.write(data[:5])
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fh, data, target)

    monkeypatch.setattr(store, "_write", write)
    result = runner.invoke(app, ["run", *SMALL, "--out", str(out)])
    FAULTS["injected"] += 1
    assert result.exit_code == 1
    assert _tmp_files(tmp_path) == []
    assert json.loads((out / "summary.json").read_text())["status"] == "running"  # the earlier version, whole
    import pandas as pd

    assert len(pd.read_parquet(out / "metrics.parquet")) > 0  # written before the disk filled


@pytest.mark.parametrize("fault", [OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt()])
def test_atomic_write_never_leaves_half_a_file(tmp_path, monkeypatch, fault):
    target = tmp_path / "f.json"
    store.atomic_write_json(target, {"version": 1})

    def write(fh, data, target):
        fh.write(data[:3])
        raise fault

    monkeypatch.setattr(store, "_write", write)
    with pytest.raises(type(fault)):
        store.atomic_write_json(target, {"version": 2, "pad": "x" * 1000})
    FAULTS["injected"] += 1
    assert json.loads(target.read_text()) == {"version": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.json"]


def test_every_writer_goes_through_the_atomic_writer():
    # nothing under src/ writes a file except store.atomic_write_bytes (its callers pass bytes or text)
    src = Path(__file__).resolve().parents[1] / "src" / "lipschitz_icl"
    writers = ("write_text(", "write_bytes(", "open(", "to_parquet(", "write_table(", "np.save(", "savefig(",
               "to_csv(", "json.dump(", "torch.save(", "to_html(")
    offenders = []
    for path in src.rglob("*.py"):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#")[0]
            for w in writers:
                if w in code and "atomic_write" not in code and path.name != "store.py":
                    if w == "open(" and ('"rb"' in code or "os.open(" in code or 'open("/proc/' in code):
                        continue  # reading, or a kernel interface under /proc (the benchmark's memory probes)
                    if w == "write_table(" and "), sink," in code:
                        continue  # into memory (checksums.parquet_bytes), then atomic_write_bytes
                    if w == "savefig(" and "savefig(buf" in code:
                        continue  # into memory, then atomic_write_bytes
                    if w in ("to_parquet(", "to_csv(", "to_html(") and ("(buf" in code or "(index=False)" in code):
                        continue  # into memory (a buffer or a string), then atomic_write_* (or shown, not written)
                    if w == "torch.save(" and code.rstrip().endswith(", buffer)"):
                        continue  # into memory (an io.BytesIO), then atomic_write_bytes (interop's exports)
                    if w == "open(" and "tarfile.open(fileobj=" in code:
                        continue  # reading an archive in memory (bench (f) exports an older build to a temp dir)
                    if w == "open(" and "LOCK_FILE" in code:
                        continue  # the sweep's lock file: flock'ed, holds no data
                    if w == "open(" and code.strip() == "with open(lock) as fh:":
                        continue  # reading the lock holder's pid
                    offenders.append(f"{path.relative_to(src)}:{i}: {line.strip()}")
    assert offenders == []


def test_zz_fault_count():
    print(f"\nstorage faults injected: {FAULTS['injected']}")
