"""Results stored by batch: files the index does not name, damaged files, files that are not those the index
recorded (swapped, copied over, deleted params, a stored summary of another hash, a missing row), a kill between
a batch's file and its index rows, folders of both layouts, and the defaults (batch size by memory, no cluster for
a small sweep)."""

import shutil
import sqlite3
import threading

import pandas as pd
import pytest

import lipschitz_icl as li
from lipschitz_icl.errors import UserInputError
from lipschitz_icl.plots.sweeps import sweep_frame
from lipschitz_icl.recorder import SCHEMA, metrics_frame
from lipschitz_icl.sweep import execute, load_index, load_metrics, load_runs, local, planning, run_sweep
from lipschitz_icl.sweep.results import RESULTS_DIR, ResultReader, encode_batch, summary_curves

TINY = {"train": {"steps": 8, "log_every": 4}, "engine": {"draws": 8}, "eval": {"functions": 8}}


def spec(**axes) -> dict:
    return {"name": "r", "base": TINY, **axes}


def test_files_no_row_names_are_removed_and_other_files_kept(tmp_path):
    run_sweep(spec(grid={"task.L": [1, 2]}), tmp_path, workers=1)
    folder = tmp_path / RESULTS_DIR
    stray = folder / ("b" + "0" * 24 + ".parquet")
    stray.write_bytes(b"left by a killed sweep")
    (folder / ("b" + "0" * 24 + ".params.pt")).write_bytes(b"x")
    (folder / (".b" + "1" * 24 + ".parquet.abc123.tmp")).write_bytes(b"half")
    (folder / "notes.txt").write_text("mine")
    run_sweep(spec(grid={"task.L": [1, 2, 3]}), tmp_path, workers=1)
    names = sorted(p.name for p in folder.iterdir())
    rows = load_index(tmp_path)
    assert "notes.txt" in names and not stray.exists() and not any(n.endswith(".tmp") for n in names)
    assert {n for n in names if n.endswith(".parquet")} == set(rows["results"])


def test_a_damaged_results_file_is_exit_2_naming_it(tmp_path):
    rows = run_sweep(spec(grid={"task.L": [1, 2]}), tmp_path, workers=1)
    path = tmp_path / RESULTS_DIR / rows.results[0]
    data = bytearray(path.read_bytes())
    data[len(data) // 3: len(data) // 3 + 64] = bytes(64)  # a zeroed block inside the pages
    path.write_bytes(bytes(data))
    with pytest.raises(UserInputError, match=rows.results[0]):
        load_metrics(tmp_path)
    path.unlink()
    with pytest.raises(UserInputError, match="missing"):
        load_runs(tmp_path)
    assert len(load_index(tmp_path)) == 2  # the index itself still reads


def test_a_kill_between_a_batch_file_and_its_rows_trains_the_runs_again(tmp_path):
    reference = run_sweep(spec(grid={"task.L": [1, 2]}, seeds=2), tmp_path / "ref", workers=1)
    out = tmp_path / "killed"
    run_sweep(spec(grid={"task.L": [1, 2]}, seeds=2), out, workers=1)
    db = sqlite3.connect(out / "index.sqlite")  # the file was written, the transaction never happened
    with db:
        db.execute("DELETE FROM stored")
        db.execute("UPDATE runs SET status='pending', steps=NULL, final_loss=NULL")
    db.close()
    resumed = run_sweep(spec(grid={"task.L": [1, 2]}, seeds=2), out, workers=1)
    timing = ["wall_s", "elapsed_s", "finished_at"]
    pd.testing.assert_frame_equal(resumed.drop(columns=timing + ["run_dir"]),
                                  reference.drop(columns=timing + ["run_dir"]))
    pd.testing.assert_frame_equal(load_metrics(out), load_metrics(tmp_path / "ref"))


def test_a_folder_of_both_layouts_reads_every_run(tmp_path):
    run_sweep(spec(grid={"task.L": [1]}), tmp_path, workers=1, run_dirs=True)
    rows = run_sweep(spec(grid={"task.L": [1, 2]}), tmp_path, workers=1)
    assert rows["run_dir"].notna().tolist() == [True, False] and rows["results"].notna().tolist() == [False, True]
    runs = load_runs(tmp_path)
    assert [r.config.task.L for r in runs] == [1, 2] and runs[0].dir is not None and runs[1].dir is None
    assert sorted(load_metrics(tmp_path)["name"].unique()) == sorted(rows["name"])
    for stored in runs:  # a sweep keeps the summary of its curves by default, in a run directory too
        alone = li.run(stored.config, write=False).table()
        pd.testing.assert_frame_equal(stored.metrics, metrics_frame(summary_curves(alone, [alone.num_rows])[0]))


def test_the_default_batch_is_sized_by_the_recorded_metrics():
    small = li.load_config(None, ["train.steps=300"])
    heavy = li.load_config(None, ["train.steps=100000", "train.log_every=1"])
    assert planning.auto_batch(small) == planning.MAX_BATCH
    assert 8 <= planning.auto_batch(heavy) < planning.MAX_BATCH
    K = heavy.features.K
    rows = (heavy.train.steps // heavy.train.log_every + 2) * (2 * K * K + 16)
    assert planning.auto_batch(heavy) * rows * 40 <= planning.BATCH_MEMORY or planning.auto_batch(heavy) == 8


def test_a_small_sweep_starts_no_cluster_by_default(tmp_path, monkeypatch):
    def no_cluster(*_a, **_k):
        raise AssertionError("a cluster was started for a sweep of one batch")

    monkeypatch.setattr(execute, "open_local_cluster", no_cluster)
    rows = run_sweep(spec(grid={"task.L": [1, 2]}, seeds=2), tmp_path, workers=None)
    assert set(rows["status"]) <= {"budget", "converged"}


@pytest.mark.parametrize("value", ["soon", "-1", "nan"])
def test_a_bad_flush_interval_is_one_line_before_anything_is_written(tmp_path, monkeypatch, value):
    monkeypatch.setenv("LIPSCHITZ_ICL_FLUSH_S", value)
    for workers in (1, 2):  # refused whatever runs the points
        with pytest.raises(UserInputError, match="LIPSCHITZ_ICL_FLUSH_S") as err:
            run_sweep(spec(grid={"task.L": [1]}), tmp_path / "s", workers=workers)
        assert "\n" not in str(err.value) and not (tmp_path / "s").exists()
    monkeypatch.setenv("LIPSCHITZ_ICL_FLUSH_S", " ")  # empty: the default
    assert len(run_sweep(spec(grid={"task.L": [1]}), tmp_path / "s", workers=1)) == 1


def test_a_damaged_params_file_is_refused_by_its_checksum(tmp_path):
    rows = run_sweep(spec(grid={"task.L": [1, 2]}), tmp_path, workers=1)
    path = tmp_path / RESULTS_DIR / rows.results[0].replace(".parquet", ".params.pt")
    data = bytearray(path.read_bytes())
    data[len(data) // 2: len(data) // 2 + 64] = bytes(64)
    path.write_bytes(bytes(data))
    assert len(load_metrics(tmp_path)) > 0  # the metrics are intact
    with pytest.raises(UserInputError, match="checksum") as err:
        load_runs(tmp_path)
    assert "--force" in str(err.value)


def test_the_sweep_figures_take_a_load_index_table(tmp_path):
    run_sweep(spec(grid={"task.L": [1, 2, 4]}), tmp_path, workers=1)
    from_dir = sweep_frame(tmp_path)
    pd.testing.assert_frame_equal(sweep_frame(load_index(tmp_path)), from_dir)
    pd.testing.assert_frame_equal(sweep_frame(load_index(tmp_path, stored_json=True)), from_dir)
    assert from_dir[["lr", "K", "eps", "delta"]].notna().all().all()


def test_a_batch_with_runs_that_recorded_nothing_reads_back_checked(tmp_path):
    # a failed run has no metrics: the file's dictionary keeps only the runs with rows, and its checksum holds
    run = li.run(None, ["train.steps=5"], write=False)
    tables = {"a" * 16: run.table(), "b" * 16: SCHEMA.empty_table(), "c" * 16: run.table().slice(0, 7)}
    name, data, _ = encode_batch(tables, {}, "full")
    (tmp_path / RESULTS_DIR).mkdir()
    (tmp_path / RESULTS_DIR / name).write_bytes(data)
    reader = ResultReader(tmp_path)
    assert reader.metrics(name, "a" * 16).equals(run.table())
    assert reader.metrics(name, "b" * 16).num_rows == 0
    assert reader.metrics(name, "c" * 16).equals(run.table().slice(0, 7))


@pytest.mark.parametrize("helper_fails", [False, True])
def test_many_runs_stored_at_once_make_two_files_encoded_together(tmp_path, monkeypatch, helper_fails):
    """A flush of SPLIT_RUNS runs or more, on more than one core, encodes two results files at once (a helper
    thread does one): the same runs, metrics and params as one file made by one thread; an error while encoding
    reaches the caller, and nothing of that flush is indexed."""
    sweep = spec(grid={"task.L": [0.5, 1, 2, 4]}, seeds=2)
    monkeypatch.setattr(local, "cores", lambda: 1)
    one = run_sweep(sweep, tmp_path / "one", workers=1)
    monkeypatch.setattr(local, "cores", lambda: 2)
    monkeypatch.setattr(local, "SPLIT_RUNS", 4)
    if helper_fails:
        encode = local.encode_pairs

        def failing(*args):
            if threading.current_thread() is not threading.main_thread():
                raise OSError("no space left on device")
            return encode(*args)

        monkeypatch.setattr(local, "encode_pairs", failing)
        with pytest.raises(OSError, match="no space"):
            run_sweep(sweep, tmp_path / "two", workers=1)
        assert set(load_index(tmp_path / "two")["status"]) == {"pending"}
        return
    two = run_sweep(sweep, tmp_path / "two", workers=1)
    assert one["results"].nunique() == 1 and two["results"].nunique() == 2
    aside = ["wall_s", "elapsed_s", "finished_at", "results"]
    pd.testing.assert_frame_equal(one.drop(columns=aside), two.drop(columns=aside))
    pd.testing.assert_frame_equal(load_metrics(tmp_path / "one"), load_metrics(tmp_path / "two"))
    for a, b in zip(load_runs(tmp_path / "one"), load_runs(tmp_path / "two"), strict=True):
        assert a.params.keys() == b.params.keys() and all(a.params[k].equal(b.params[k]) for k in a.params)


@pytest.fixture(scope="module")
def six_runs(tmp_path_factory):
    """A sweep of 6 runs stored in two batch files of 3 runs each."""
    out = tmp_path_factory.mktemp("six") / "s"
    run_sweep(spec(grid={"task.L": [1, 2, 3]}, seeds=2), out, workers=1, batch=3)
    return out


def _copy_of(six_runs, tmp_path):
    out = tmp_path / "s"
    shutil.copytree(six_runs, out)
    return out, sorted((out / RESULTS_DIR).glob("*.parquet"))


def _refused(out, match):
    for load in (load_runs, load_metrics):
        with pytest.raises(UserInputError, match=match):
            load(out)


@pytest.mark.parametrize("how", ["swapped", "copied over"])
def test_a_batch_file_swapped_or_copied_over_another_is_refused(six_runs, tmp_path, how):
    out, (a, b) = _copy_of(six_runs, tmp_path)
    old_a = a.read_bytes()
    a.write_bytes(b.read_bytes())
    if how == "swapped":
        b.write_bytes(old_a)
    _refused(out, f"({a.name}|{b.name}): not the results file the index recorded")  # swapped: either is met first


def test_deleted_params_or_a_params_path_that_is_a_folder_is_refused(six_runs, tmp_path):
    out, (a, _) = _copy_of(six_runs, tmp_path)
    params = a.with_name(a.name.replace(".parquet", ".params.pt"))
    params.unlink()
    with pytest.raises(UserInputError, match=f"{params.name}: missing"):
        load_runs(out)
    params.mkdir()
    with pytest.raises(UserInputError, match=f"{params.name}: not a file"):
        load_runs(out)


def test_a_stored_summary_or_config_of_another_hash_is_refused(six_runs, tmp_path):
    out, _ = _copy_of(six_runs, tmp_path)
    db = sqlite3.connect(out / "index.sqlite")
    rows = db.execute("SELECT config_hash, summary, config FROM stored ORDER BY config_hash").fetchall()
    (h0, s0, c0), (h1, *_) = rows[:2]
    with db:
        db.execute("UPDATE stored SET summary=? WHERE config_hash=?", (s0, h1))
    with pytest.raises(UserInputError, match="index.sqlite: the stored summary of run .* is of config"):
        load_runs(out)
    with db:
        db.execute("UPDATE stored SET summary=(SELECT summary FROM stored WHERE config_hash=?), config=? "
                   "WHERE config_hash=?", (h0, c0, h1))
    db.close()
    with pytest.raises(UserInputError, match="index.sqlite: the stored (summary|config) of run"):
        load_runs(out)


@pytest.mark.parametrize("table", ["runs", "stored"])
def test_a_missing_index_row_is_refused(six_runs, tmp_path, table):
    out, _ = _copy_of(six_runs, tmp_path)
    db = sqlite3.connect(out / "index.sqlite")
    (h,) = db.execute("SELECT config_hash FROM stored ORDER BY config_hash").fetchone()
    with db:
        db.execute(f"DELETE FROM {table} WHERE config_hash=?", (h,))
        if table == "runs":
            db.execute("DELETE FROM stored WHERE config_hash=?", (h,))
    db.close()
    assert len(load_index(out)) == 6 - (table == "runs")  # the index itself still reads
    _refused(out, "has no row for" if table == "runs" else "the index stores none of its results")


def test_an_index_written_before_the_digests_still_loads(six_runs, tmp_path):
    out, _ = _copy_of(six_runs, tmp_path)
    db = sqlite3.connect(out / "index.sqlite")
    with db:  # the stored table as it was: no results_sha256 column
        db.execute("CREATE TABLE old AS SELECT config_hash, results, config, summary FROM stored")
        db.execute("DROP TABLE stored")
        db.execute("ALTER TABLE old RENAME TO stored")
    db.close()
    assert len(load_runs(out)) == 6 and load_metrics(out)["name"].nunique() == 6
    rows = run_sweep(spec(grid={"task.L": [1, 2, 3, 4]}, seeds=2), out, workers=1, batch=3)  # resumed, migrated
    assert (rows["status"] != "pending").all() and len(load_runs(out)) == 8
