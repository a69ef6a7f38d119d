"""The red team's probes against sweeps (issue 20), each a test: hostile index rows (S8), a shrunk spec
(S7), a sweep killed at start (L1), a feature file changed during a sweep (S2), a config's relative
feature path, and corrupt index files (L5). Each fails without its fix."""

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

import lipschitz_icl as li
from lipschitz_icl.cli import app
from lipschitz_icl.errors import UserInputError
from lipschitz_icl.sweep import Index, load_index, load_runs, load_sweep, run_sweep
from lipschitz_icl.sweep import execute as sweep_execute
from lipschitz_icl.sweep.index import check_run_names

runner = CliRunner()
TINY = {"train": {"steps": 4, "log_every": 2}, "engine": {"draws": 8}, "eval": {"functions": 8}}


def spec(**axes) -> dict:
    return {"name": "g", "base": TINY, **axes}


def one_line_exit_2(result, *words: str) -> None:
    assert result.exit_code == 2, result.output
    text = result.output.strip()
    assert "\n" not in text and "Traceback" not in text and "unexpected" not in text, text
    for word in words:
        assert word in text, text


# --------------------------------------------------------------------------- S8: index rows name one folder


@pytest.mark.parametrize("hostile", ["../../escaped", "/tmp/abs", "a/b", "..", ".hidden", "-rf", "a\x00b", ""])
def test_an_index_row_naming_a_path_is_refused_before_any_write(tmp_path, hostile):
    out = tmp_path / "s"
    run_sweep(spec(grid={"task.L": [1, 2]}), out, workers=1)
    db = sqlite3.connect(out / "index.sqlite")
    with db:
        db.execute("UPDATE runs SET name=? WHERE point=0", (hostile,))
    db.close()
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if "index.sqlite" not in p.name)
    with pytest.raises(UserInputError, match="one plain folder name"):
        run_sweep(spec(grid={"task.L": [1, 2]}), out, workers=1, force=True)
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if "index.sqlite" not in p.name)
    assert after == before and not (tmp_path / "escaped").exists()
    one_line_exit_2(runner.invoke(app, ["sweep", "table", str(out)]), "index.sqlite")


# --------------------------------------------------------------------------- S7: the rows of the current spec


def test_names_a_sweep_makes_pass_the_check(tmp_path):
    """Run names as ``point_text.run_name`` makes them (an axis key may start with '_') are plain folder names."""
    check_run_names(["_x1-" + "a" * 16, "L1-lr0.5-" + "b" * 16, "run-" + "c" * 16], tmp_path / "index.sqlite")


def test_table_and_status_show_the_current_spec_unless_all(tmp_path):
    out = tmp_path / "s"
    run_sweep(spec(grid={"task.L": [1, 2, 3]}), out, workers=1)
    run_sweep(spec(grid={"task.L": [2]}), out, workers=1)  # the spec shrank
    assert len(load_index(out)) == 3 and len(load_index(out, current_only=True)) == 1
    shown = runner.invoke(app, ["sweep", "table", str(out), "--format", "csv"])
    assert shown.exit_code == 0 and len(shown.output.strip().splitlines()) == 2, shown.output
    every = runner.invoke(app, ["sweep", "table", str(out), "--format", "csv", "--all"])
    assert len(every.output.strip().splitlines()) == 4, every.output
    status = runner.invoke(app, ["sweep", "status", str(out)])
    assert status.exit_code == 0 and "total" in status.output
    assert [ln for ln in status.output.splitlines() if "total" in ln][0].split("│")[-2].strip() == "1"
    status_all = runner.invoke(app, ["sweep", "status", str(out), "--all"])
    assert [ln for ln in status_all.output.splitlines() if "total" in ln][0].split("│")[-2].strip() == "3"


# --------------------------------------------------------------------------- L1: killed at start


def test_a_sweep_killed_before_its_spec_was_written_resumes(tmp_path):
    out = tmp_path / "s"
    (out / "runs").mkdir(parents=True)
    (out / ".lock").touch()
    with Index(out) as index:  # what a driver killed right after opening its index leaves
        index.add([("f" * 16, "x-" + "f" * 16, 0, {}, 0)])
    rows = run_sweep(spec(grid={"task.L": [1]}), out, workers=1)
    assert list(rows["status"]) == ["budget"] or set(rows["status"]) <= {"converged", "budget", "trivial"}
    assert (out / "sweep.yaml").is_file()


def test_a_folder_with_runs_but_no_spec_is_still_refused(tmp_path):
    out = tmp_path / "s"
    (out / "runs" / "someone-elses").mkdir(parents=True)
    Index(out).close()
    with pytest.raises(UserInputError, match="not a sweep named g"):
        run_sweep(spec(grid={"task.L": [1]}), out, workers=1)


# --------------------------------------------------------------------------- L5: corrupt index files


@pytest.mark.parametrize("damage", ["garbage", "truncated", "other_schema", "strings", "deep_axes"])
def test_a_corrupt_index_is_exit_2_naming_the_file(tmp_path, damage):
    out = tmp_path / "s"
    run_sweep(spec(grid={"task.L": [1, 2]}), out, workers=1)
    path = out / "index.sqlite"
    if damage == "garbage":
        path.write_bytes(b"not a database at all " * 100)
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:700])
    else:
        db = sqlite3.connect(path)
        with db:
            if damage == "other_schema":
                db.execute("DROP TABLE runs")
                db.execute("CREATE TABLE runs (config_hash TEXT, name TEXT)")
            elif damage == "strings":
                db.execute("UPDATE runs SET steps='many', point='first'")
            else:
                db.execute("UPDATE runs SET axes=?", ("[" * 100_000 + "]" * 100_000,))
        db.close()
    for command in (["sweep", "table", str(out)], ["sweep", "status", str(out)]):
        one_line_exit_2(runner.invoke(app, command), "index.sqlite")
    if damage != "deep_axes":  # the driver never reads the axes back
        (tmp_path / "g.yaml").write_text(yaml.safe_dump(spec(grid={"task.L": [1, 2]})))
        one_line_exit_2(runner.invoke(app, ["sweep", str(tmp_path / "g.yaml"), "--out", str(out), "--workers", "1"]),
                        "index.sqlite")


# --------------------------------------------------------------------------- S2: feature files read once


def _feature_spec(tmp_path: Path) -> Path:
    np.save(tmp_path / "v.npy", np.eye(3))
    spec_file = tmp_path / "f.yaml"
    base = {**TINY, "features": {"kind": "file", "path": str(tmp_path / "v.npy")}}
    spec_file.write_text(yaml.safe_dump({"name": "f", "base": base, "grid": {"task.L": [1, 2]}}))
    return spec_file


def test_a_feature_file_changed_during_a_sweep_is_refused(tmp_path):
    sweep = load_sweep(_feature_spec(tmp_path))
    np.save(tmp_path / "v.npy", 2 * np.eye(3))  # changed after the points were made
    rows = run_sweep(sweep, tmp_path / "out", workers=1)
    assert set(rows["status"]) == {"failed"}
    assert all("changed" in e and "\n" not in e for e in rows["error"])
    stored = load_index(tmp_path / "out", stored_json=True)  # no run trained on the new file under the old hash
    assert all(json.loads(summary)["status"] == "failed" for summary in stored["summary"])
    with pytest.raises(UserInputError, match="changed"):  # reading the runs back names the changed file
        load_runs(tmp_path / "out")


def test_a_sweep_reads_its_feature_file_once_into_every_point(tmp_path, monkeypatch):
    from lipschitz_icl import features

    reads = []
    real = features.read_feature_file
    monkeypatch.setattr(features, "read_feature_file", lambda path: reads.append(path) or real(path))
    sweep = load_sweep(_feature_spec(tmp_path))
    assert len(reads) == 1
    digest = sweep.base["features"]["file_sha256"]
    assert {p.config.features.file_sha256 for p in sweep.points} == {digest}
    assert yaml.safe_load(sweep.resolved_yaml())["base"]["features"]["file_sha256"] == digest


def test_a_relative_feature_path_in_a_config_file_is_read_from_the_files_folder(tmp_path, monkeypatch):
    folder = tmp_path / "cfg"
    folder.mkdir()
    np.save(folder / "v.npy", np.eye(3))
    (folder / "c.yaml").write_text(yaml.safe_dump({"features": {"kind": "file", "path": "v.npy"}}))
    monkeypatch.chdir(tmp_path)  # another working directory, where no v.npy is
    cfg = li.load_config(folder / "c.yaml")
    assert Path(cfg.features.path) == (folder / "v.npy").resolve()
    override = li.load_config(folder / "c.yaml", [f"features.path={folder / 'v.npy'}"])
    assert override.features.file_sha256 == cfg.features.file_sha256


def test_spec_points_name_the_recorded_feature_file(tmp_path):
    sweep = load_sweep(_feature_spec(tmp_path))
    rows = run_sweep(sweep, tmp_path / "out", workers=1)
    runs = load_runs(tmp_path / "out")
    assert len(runs) == len(rows)
    for run in runs:
        assert run.config.features.file_sha256 == sweep.base["features"]["file_sha256"]
        assert run.summary["status"] != "failed"
    assert sweep_execute.SPEC_FILE == "sweep.yaml"
