"""Running sweeps from Python: the store layout, the index, failures, skipping, --retry-failed, --force."""

import json
import shutil
import sqlite3
import subprocess

import pandas as pd
import pytest
import torch

import lipschitz_icl as li
from lipschitz_icl.store import CONFIG_FILE, METRICS_FILE, PARAMS_FILE, SUMMARY_FILE
from lipschitz_icl.sweep import load_index, load_metrics, load_runs, run_configs, run_sweep

SMALL = {"train": {"steps": 40, "log_every": 10}, "engine": {"draws": 32}, "eval": {"functions": 32}}


def small_spec(**axes) -> dict:
    return {"name": "t", "base": SMALL, **axes}


class Calls:
    def __init__(self):
        self.calls = []

    def __call__(self, done, failed, total):
        self.calls.append((done, failed, total))


def test_sweep_stores_results_by_batch_and_reads_them_back(tmp_path):
    spec = small_spec(grid={"task.L": [1, 3]}, seeds=2)
    rows = run_sweep(spec, tmp_path / "s", workers=1)
    assert sorted(p.name for p in (tmp_path / "s").iterdir() if not p.name.startswith(".")) == [
        "index.sqlite", "numerics.txt", "results", "sweep.yaml"]
    assert rows["run_dir"].isna().all() and rows["results"].nunique() == 1  # one batch, one file
    files = sorted(p.name for p in (tmp_path / "s" / "results").iterdir())
    assert files == sorted([rows.results[0], rows.results[0].replace(".parquet", ".params.pt")])
    dirs = run_sweep(spec, tmp_path / "d", workers=1, run_dirs=True)  # the same runs, one directory each
    runs, by_dir = load_runs(tmp_path / "s"), [li.load_run(d) for d in dirs["run_dir"]]
    assert [r.config.config_hash() for r in runs] == list(rows["config_hash"])
    for run, other in zip(runs, by_dir, strict=True):
        assert {k: v for k, v in run.summary.items() if k != "wall_s"} == {
            k: v for k, v in other.summary.items() if k != "wall_s"}
        pd.testing.assert_frame_equal(run.metrics, other.metrics)
        assert all(torch.equal(run.params[k], other.params[k]) for k in other.params)
    metrics = load_metrics(tmp_path / "s")
    assert list(metrics.columns) == ["name", "step", "metric", "k", "n", "value"]
    assert metrics.groupby("name")["step"].max().to_dict() == dict(zip(rows["name"], rows["steps"], strict=True))
    pd.testing.assert_frame_equal(metrics, load_metrics(tmp_path / "d"))


def test_sweep_writes_run_dirs_and_an_index(tmp_path):
    progress = Calls()
    rows = run_sweep(small_spec(grid={"task.L": [1, 3]}, seeds=2), tmp_path / "s", workers=1, progress=progress,
                     run_dirs=True)
    assert progress.calls[0] == (0, 0, 4) and progress.calls[-1] == (4, 0, 4)
    assert list(rows["task.L"]) == [1, 1, 3, 3] and list(rows["seed"]) == [0, 1, 0, 1]
    assert set(rows["status"]) <= {"budget", "converged"}
    assert sorted(p.name for p in (tmp_path / "s").iterdir() if not p.name.startswith(".")) == [
        "index.sqlite", "numerics.txt", "runs", "sweep.yaml"]
    for row in rows.itertuples():
        run_dir = tmp_path / "s" / "runs" / row.name
        assert sorted(p.name for p in run_dir.iterdir()) == [CONFIG_FILE, METRICS_FILE, PARAMS_FILE, SUMMARY_FILE]
        run = li.load_run(run_dir)  # the same layout as `lipschitz-icl run`
        assert run.summary["config_hash"] == row.config_hash == run.config.config_hash()
        assert run.summary["final_loss"] == pytest.approx(row.final_loss, rel=1e-12)
        assert run.summary["T_1"] == (None if pd.isna(row.T_1) else row.T_1)
        assert run.config.task.L == row._3  # the task.L column
        assert run.metrics.step.max() == row.steps
    # the same run outside a sweep gives the same numbers
    alone = li.run(li.load_run(rows.run_dir[3]).config, write=False)
    assert alone.summary["final_loss"] == rows.final_loss[3]


def test_rerun_does_no_work_and_force_reruns_all(tmp_path):
    spec = small_spec(grid={"task.L": [1, 2]})
    first = run_sweep(spec, tmp_path, workers=1)
    stamps = {p: p.stat().st_mtime_ns for p in (tmp_path / "results").rglob("*.*")}
    assert stamps
    progress = Calls()
    again = run_sweep(spec, tmp_path, workers=1, progress=progress)
    assert progress.calls == [(0, 0, 0)]
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "results").rglob("*.*")} == stamps
    pd.testing.assert_frame_equal(first, again)
    progress = Calls()
    forced = run_sweep(spec, tmp_path, workers=1, force=True, progress=progress)
    assert progress.calls[-1] == (2, 0, 2)
    assert list(forced.final_loss) == list(first.final_loss)


def test_a_growing_spec_runs_only_the_new_points(tmp_path):
    run_sweep(small_spec(grid={"task.L": [1, 2]}), tmp_path, workers=1)
    progress = Calls()
    rows = run_sweep(small_spec(grid={"task.L": [1, 2, 4]}), tmp_path, workers=1, progress=progress)
    assert progress.calls[-1] == (1, 0, 1)
    assert list(rows["task.L"]) == [1, 2, 4]


def test_a_failing_run_is_recorded_and_the_others_finish(tmp_path):
    spec = small_spec(zip={"task.kind": ["linear", "test_broken", "test_tanh"]})
    spec["base"] = {**SMALL, "plugins": ["plugin_task"], "task": {"kernel_samples": 64}}
    progress = Calls()
    rows = run_sweep(spec, tmp_path, workers=1, progress=progress, run_dirs=True).set_index("task.kind")
    assert progress.calls[-1] == (2, 1, 3)
    assert rows.loc["test_broken", "status"] == "failed"
    assert "TaskEvaluationError" in rows.loc["test_broken", "error"]
    assert "test_broken" in rows.loc["test_broken", "error"]
    assert set(rows.loc[["linear", "test_tanh"], "status"]) <= {"budget", "converged"}
    assert rows.loc[["linear", "test_tanh"], "error"].isna().all()
    failed_dir = tmp_path / "runs" / rows.loc["test_broken", "name"]
    summary = json.loads((failed_dir / SUMMARY_FILE).read_text())
    assert summary["status"] == "failed" and "test_broken" in summary["error"]
    # a failed row is skipped on a plain rerun and rerun with retry_failed
    progress = Calls()
    run_sweep(spec, tmp_path, workers=1, progress=progress)
    assert progress.calls == [(0, 0, 0)]
    progress = Calls()
    run_sweep(spec, tmp_path, workers=1, retry_failed=True, progress=progress)
    assert progress.calls[-1] == (0, 1, 1)


def test_index_is_plain_sqlite(tmp_path):
    run_sweep(small_spec(grid={"task.L": [1, 2]}, seeds=2), tmp_path, workers=1)
    db = sqlite3.connect(tmp_path / "index.sqlite")
    rows = db.execute("SELECT name, status, json_extract(axes, '$.\"task.L\"'), seed, final_loss, T_eps, "
                      "L, L_star, regime, Delta, delta_nd, steps, wall_s, error FROM runs ORDER BY point").fetchall()
    db.close()
    assert len(rows) == 4
    assert [r[2] for r in rows] == [1, 1, 2, 2] and [r[3] for r in rows] == [0, 1, 0, 1]
    assert all(r[1] in ("budget", "converged") and r[4] > 0 and r[6] == r[2] for r in rows)
    assert rows[0][9] == pytest.approx(2**0.5) and rows[0][10] == pytest.approx(5**-0.5)  # worked case
    if shutil.which("sqlite3"):
        out = subprocess.run(["sqlite3", str(tmp_path / "index.sqlite"), "select count(*) from runs where "
                              "status in ('budget','converged')"], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == "4"


def test_run_configs_keeps_the_given_order_and_labels(tmp_path):
    configs = [li.load_config(None, ["train.steps=30", f"task.L={L}", "engine.draws=16"]) for L in (3, 1, 3, 2)]
    rows = run_configs(configs, tmp_path, workers=1, labels=[{"case": c} for c in "abcd"])
    assert list(rows["L"]) == [3.0, 1.0, 2.0]  # the duplicate config ran once, under its first label
    assert list(rows["case"]) == ["a", "b", "d"]
    assert list(rows["axes"].map(json.loads)) == [{"case": "a"}, {"case": "b"}, {"case": "d"}]
    assert len(load_index(tmp_path)) == 3


def test_scheduler_address_runs_on_an_existing_cluster_and_records_failures(tmp_path):
    from distributed import LocalCluster

    spec = small_spec(zip={"task.kind": ["linear", "test_broken"]}, seeds=2)
    spec["base"] = {**SMALL, "plugins": ["plugin_task"], "task": {"kernel_samples": 64}}
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        progress = Calls()
        rows = run_sweep(spec, tmp_path, scheduler=cluster.scheduler_address, progress=progress)
    assert progress.calls[-1] == (2, 2, 4)
    broken = rows[rows["task.kind"] == "test_broken"]
    assert list(broken["status"]) == ["failed", "failed"]
    assert broken["error"].str.contains("TaskEvaluationError").all()
    reference = run_sweep(spec, tmp_path / "in-process", workers=1)  # the same numbers without Dask
    pd.testing.assert_series_equal(rows["final_loss"], reference["final_loss"])


def test_plan_batches_groups_compatible_points_in_bounded_batches():
    from lipschitz_icl.sweep.execute import plan_batches
    from lipschitz_icl.sweep.spec import Point

    overrides = [[f"task.L={L}"] for L in (0.5, 1, 2, 4, 8)] + [["train.optimizer=adam"], ["features.K=3"]]
    points = [Point.of(i, {}, li.load_config(None, ov)) for i, ov in enumerate(overrides)]
    names = lambda batches: [[p.index for p in b] for b in batches]  # noqa: E731
    assert names(plan_batches(points, 32)) == [[0, 1, 2, 3, 4], [5], [6]]  # Adam alone; K = 3 its own group
    assert names(plan_batches(points, 2)) == [[0, 1], [2, 3], [4], [5], [6]]
    assert names(plan_batches(points, 1)) == [[i] for i in range(7)]
    assert names(plan_batches(points, 32, workers=2)) == [[0], [1], [2], [3], [4], [5], [6]]  # >= 4 per worker
    sampled = [Point.of(i, {}, li.load_config(None, ["engine.kind=sampled", "engine.batch=32", f"seed={i}"]))
               for i in range(5)]  # runs that take their steps together: one batch per worker, not four
    assert names(plan_batches(sampled, None, workers=2)) == [[0, 1, 2], [3, 4]]
    assert names(plan_batches(sampled, None)) == [[0, 1, 2, 3, 4]]



def test_plan_batches_keeps_the_points_of_one_kernel_spec_together():
    """A grid of step sizes over seeds, step size outermost: each batch holds whole seeds (the points that share a
    kernel spec, which differ only in what the training loop reads), in spec order within a seed."""
    from lipschitz_icl.sweep.execute import plan_batches
    from lipschitz_icl.sweep.spec import Point

    axes = [{"train.lr": lr, "seed": seed} for lr in (0.5, 1.0, 2.0) for seed in range(4)]
    points = [Point.of(i, a, li.load_config(None, [f"train.lr={a['train.lr']}", f"seed={a['seed']}"]))
              for i, a in enumerate(axes)]
    batches = plan_batches(points, 6)
    assert [[(p.axes["seed"], p.axes["train.lr"]) for p in b] for b in batches] == [
        [(0, 0.5), (0, 1.0), (0, 2.0), (1, 0.5), (1, 1.0), (1, 2.0)],
        [(2, 0.5), (2, 1.0), (2, 2.0), (3, 0.5), (3, 1.0), (3, 2.0)]]
    lrs_of = {seed: [p.axes["train.lr"] for b in plan_batches(points, 1) for p in b if p.axes["seed"] == seed]
              for seed in range(4)}
    assert lrs_of == {seed: [0.5, 1.0, 2.0] for seed in range(4)}  # batches of one keep spec order

def test_batched_and_unbatched_sweeps_give_the_same_rows(tmp_path):
    spec = small_spec(grid={"task.L": [0.5, 2, 8]}, seeds=2)
    a = run_sweep(spec, tmp_path / "a", workers=1)
    b = run_sweep(spec, tmp_path / "b", workers=1, batch=1)
    timing = ["wall_s", "elapsed_s", "finished_at", "run_dir", "results"]
    pd.testing.assert_frame_equal(a.drop(columns=timing), b.drop(columns=timing))
    pd.testing.assert_frame_equal(load_metrics(tmp_path / "a"), load_metrics(tmp_path / "b"))
