"""Sweep directories keep every result in its own place: a grown spec, near-equal values, foreign
files in --out, trained parameters, read-only copies, and specs that grow between runs (hypothesis)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import lipschitz_icl as li
from lipschitz_icl.cli import app
from lipschitz_icl.errors import UserInputError
from lipschitz_icl.evaluate import evaluate_run
from lipschitz_icl.store import PARAMS_FILE, SUMMARY_FILE, read_params
from lipschitz_icl.sweep import Index, load_index, load_runs, run_sweep
from lipschitz_icl.sweep.results import PARAMS_SUFFIX, RESULTS_DIR

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
TINY = {"train": {"steps": 8, "log_every": 4}, "engine": {"draws": 8}, "eval": {"functions": 8}}


def spec(**axes) -> dict:
    return {"name": "g", "base": TINY, **axes}


def assert_every_row_has_its_own_run(sweep_dir: Path) -> pd.DataFrame:
    """Every row of the index has exactly one stored run (results file or run directory), its own config's."""
    rows = load_index(sweep_dir)
    assert rows["name"].is_unique
    runs = load_runs(sweep_dir, current_only=False)
    assert len(runs) == len(rows)
    for row, run in zip(rows.itertuples(), runs, strict=True):
        assert run.summary["config_hash"] == row.config_hash == run.config.config_hash()
        assert row.status == run.summary["status"]
        assert run.metrics["step"].max() == row.steps  # its own metrics, not another run's of the batch
    if (sweep_dir / RESULTS_DIR).is_dir():  # no results file besides those the index names
        files = {p.name for p in (sweep_dir / RESULTS_DIR).iterdir() if p.suffix == ".parquet"}
        assert files == set(rows["results"].dropna())
    return rows


def stamps_of(sweep_dir: Path) -> dict[str, tuple]:
    """When each run was recorded, and where: unchanged unless the run is trained again."""
    rows = load_index(sweep_dir)
    return {r.config_hash: (r.finished_at, r.results, r.elapsed_s) for r in rows.itertuples()}


def test_a_grown_spec_keeps_every_run_in_its_directory(tmp_path):
    run_sweep(spec(grid={"task.L": [1, 2]}), tmp_path, workers=1)
    before = stamps_of(tmp_path)
    rows = run_sweep(spec(grid={"task.L": [1, 2]}, seeds=2), tmp_path, workers=1)
    assert len(rows) == 4
    index = assert_every_row_has_its_own_run(tmp_path)
    assert len(index) == 4
    assert {h: stamps_of(tmp_path)[h] for h in before} == before  # the seed-0 runs were not rerun


def test_a_grown_spec_keeps_every_run_directory_with_run_dirs(tmp_path):
    run_sweep(spec(grid={"task.L": [1, 2]}), tmp_path, workers=1, run_dirs=True)
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "runs").rglob(SUMMARY_FILE)}
    run_sweep(spec(grid={"task.L": [1, 2]}, seeds=2), tmp_path, workers=1, run_dirs=True)
    index = assert_every_row_has_its_own_run(tmp_path)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == sorted(index["name"])
    assert {p: p.stat().st_mtime_ns for p in before} == before


def test_near_equal_values_get_their_own_directories(tmp_path):
    # with the default config these two values once shared a name: eps0.001007 and 8 equal hex digits
    near = {"name": "g", "grid": {"train.eps": [0.00100716602389, 0.00100744602482]}}
    rows = run_sweep(near, tmp_path, workers=1)
    assert rows["config_hash"].is_unique
    assert_every_row_has_its_own_run(tmp_path)
    run_sweep(near, tmp_path / "dirs", workers=1, run_dirs=True)
    assert len(list((tmp_path / "dirs" / "runs").iterdir())) == 2


def test_two_configs_are_never_registered_under_one_name(tmp_path):
    with Index(tmp_path) as index:
        index.add([("a" * 16, "x", 0, {}, 0)])
        with pytest.raises(UserInputError, match="runs/x"):
            index.add([("b" * 16, "y", 0, {}, 0), ("c" * 16, "x", 1, {}, 0)])
        assert index.names() == {"a" * 16: "x"}  # nothing of the refused batch registered
        index.add([("a" * 16, "renamed", 3, {"k": 1}, 0)])
        assert index.names() == {"a" * 16: "x"}  # a known run keeps its directory


def test_a_directory_holding_another_run_is_not_overwritten(tmp_path):
    sweep = li.sweep.load_sweep(spec(grid={"task.L": [1]}))
    foreign = tmp_path / "runs" / sweep.points[0].name
    foreign.mkdir(parents=True)
    (foreign / SUMMARY_FILE).write_text(json.dumps({"config_hash": "0123456789abcdef", "status": "budget"}))
    rows = run_sweep(sweep, tmp_path, workers=1, force=True, run_dirs=True)  # force: the folder holds files
    assert rows.status[0] == "failed" and "not overwritten" in rows.error[0]
    assert json.loads((foreign / SUMMARY_FILE).read_text())["config_hash"] == "0123456789abcdef"


def test_out_with_other_files_is_refused_unless_forced(tmp_path, monkeypatch):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(spec(grid={"task.L": [1]})))
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "sweep.yaml").write_text("# my own notes\nname: g\n")
    result = runner.invoke(app, ["sweep", str(path), "--workers", "1", "--out", str(mine)])
    assert result.exit_code == 2 and "--force" in result.stderr and "holds files" in result.stderr
    assert (mine / "sweep.yaml").read_text() == "# my own notes\nname: g\n"
    assert sorted(p.name for p in mine.iterdir()) == ["sweep.yaml"]
    other = tmp_path / "other"
    run_sweep({**spec(grid={"task.L": [1]}), "name": "other"}, other, workers=1)
    result = runner.invoke(app, ["sweep", str(path), "--workers", "1", "--out", str(other)])
    assert result.exit_code == 2 and "not a sweep named g" in result.stderr  # another sweep's folder
    again = runner.invoke(app, ["sweep", str(path), "--workers", "1", "--out", str(mine), "--force"])
    assert again.exit_code == 0, again.output
    first = runner.invoke(app, ["sweep", str(path), "--workers", "1", "--out", str(tmp_path / "new")])
    resumed = runner.invoke(app, ["sweep", str(path), "--workers", "1", "--out", str(tmp_path / "new")])
    assert first.exit_code == resumed.exit_code == 0 and "skipped 1" in resumed.stdout  # its own sweep: fine


def test_a_spec_named_dot_dot_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "...yaml"
    path.write_text(yaml.safe_dump({"base": TINY}))
    result = runner.invoke(app, ["sweep", str(path), "--workers", "1"])
    assert result.exit_code == 2 and "name:" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["...yaml"]  # nothing written in the working dir


def test_sweep_runs_keep_their_trained_parameters_unless_turned_off(tmp_path):
    run_sweep(spec(grid={"task.L": [1, 2]}), tmp_path / "on", workers=1)
    for run in load_runs(tmp_path / "on"):
        alone = li.run(run.config, write=False)
        assert run.params.keys() == alone.params.keys()
        assert all(torch.equal(run.params[k], alone.params[k].cpu()) for k in run.params)
    rows = run_sweep(spec(grid={"task.L": [1, 2]}), tmp_path / "dirs", workers=1, run_dirs=True)
    saved = read_params(rows.run_dir[0])
    assert all(torch.equal(saved[k], load_runs(tmp_path / "on")[0].params[k]) for k in saved)
    table = evaluate_run(rows.run_dir[0], prompts=16, contexts=[1, 4], classes=["linear"])  # was refused before
    assert set(table["n_context"]) == {1, 4} and table["error"].notna().all()
    run_sweep({**spec(grid={"task.L": [1]}), "params": False}, tmp_path / "off", workers=1)
    assert load_runs(tmp_path / "off")[0].params is None
    assert not list((tmp_path / "off" / RESULTS_DIR).glob(f"*{PARAMS_SUFFIX}"))
    rows = run_sweep({**spec(grid={"task.L": [1]}), "params": False}, tmp_path / "off-dirs", workers=1, run_dirs=True)
    assert not (Path(rows.run_dir[0]) / PARAMS_FILE).exists()



def test_a_batch_params_file_is_a_mapping_of_state_dicts_sharing_one_storage(tmp_path):
    """A batch's .params.pt loads as {config_hash: state dict} (docs/SWEEPS.md), each run's tensor equal to its own
    run's, the tensors of one name views of one stacked storage (written once)."""
    rows = run_sweep(spec(grid={"task.L": [1, 2, 4]}, seeds=2), tmp_path, workers=1)
    (path,) = (tmp_path / RESULTS_DIR).glob(f"*{PARAMS_SUFFIX}")
    saved = torch.load(path, weights_only=True)
    assert set(saved) == set(rows.config_hash) and all(list(state) == ["Q"] for state in saved.values())
    for run in load_runs(tmp_path):
        assert torch.equal(saved[run.summary["config_hash"]]["Q"], li.run(run.config, write=False).params["Q"])
    assert len({state["Q"].untyped_storage().data_ptr() for state in saved.values()}) == 1
    for run in load_runs(tmp_path):  # read back, each run's tensors own their storage: 25 numbers, not the batch's
        assert run.params["Q"].untyped_storage().nbytes() == run.params["Q"].numel() * 8

def _no_write_permission_prefix() -> list[str]:
    """A command prefix under which permission bits bind (root drops its override capability)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: permission bits would not apply")
    caps = "-dac_override,-dac_read_search"
    return ["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}"]


def test_table_and_status_read_a_read_only_copy(tmp_path):
    run_sweep(spec(grid={"task.L": [1, 2]}), tmp_path / "s", workers=1)
    copy = Path(tempfile.mkdtemp(prefix="ro-sweep-"))
    try:
        shutil.copy(tmp_path / "s" / "index.sqlite", copy / "index.sqlite")
        (copy / "index.sqlite").chmod(0o444)
        copy.chmod(0o555)
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        for command in (["table"], ["status"]):
            cmd = [*_no_write_permission_prefix(), sys.executable, "-m", "lipschitz_icl", "sweep", *command, str(copy)]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr
            assert "error" not in done.stderr
        assert sorted(p.name for p in copy.iterdir()) == ["index.sqlite"]  # nothing written beside it
    finally:
        copy.chmod(0o755)
        shutil.rmtree(copy)


# ------------------------------------------------------------------ specs that grow (hypothesis)

GROWS = {"count": 0}
L_VALUES = st.lists(st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0]), min_size=1, max_size=3, unique=True)


@st.composite
def growing_specs(draw):
    """(v1, v2): v2 adds L values, seeds or an axis to v1 (and may drop some of v1's points)."""
    v1 = spec(grid={"task.L": draw(L_VALUES)})
    if draw(st.booleans()):
        v1["seeds"] = draw(st.integers(1, 2))
    v2 = json.loads(json.dumps(v1))
    v2["grid"]["task.L"] = draw(L_VALUES)
    change = draw(st.sampled_from(["seeds", "axis", "values"]))
    if change == "seeds":
        v2["seeds"] = draw(st.integers(1, 3))
    elif change == "axis":
        v2["grid"]["train.lr"] = draw(st.sampled_from([[1.0], [1.0, 0.5]]))
    return v1, v2


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(pair=growing_specs())
def test_specs_that_grow_keep_one_directory_per_run(tmp_path_factory, pair):
    GROWS["count"] += 1
    v1, v2 = pair
    out = tmp_path_factory.mktemp("grow")
    first = run_sweep(v1, out, workers=1)
    stamps = stamps_of(out)
    calls = []
    second = run_sweep(v2, out, workers=1, progress=lambda done, failed, total: calls.append(total))
    assert calls[0] == len(set(second["config_hash"]) - set(first["config_hash"]))  # resumed runs not rerun
    assert {h: stamps_of(out)[h] for h in stamps} == stamps
    index = assert_every_row_has_its_own_run(out)
    assert set(index["config_hash"]) == set(first["config_hash"]) | set(second["config_hash"])


def test_zz_grow_count():
    assert GROWS["count"] >= 12
