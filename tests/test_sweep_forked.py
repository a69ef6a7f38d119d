"""A local sweep's batches in processes forked from the driver (``sweep.forked_batches``): the same stored results
as in one process, params and run directories included; a batch whose process dies trained again point by
point, so that only the point that kills its process is recorded failed; one forked lane per worker whatever the
number of batches; and no fork from a process with other threads (one of them may hold a lock the fork would
copy)."""

from __future__ import annotations

import os
import threading

import pandas as pd
import pytest
import torch
from test_sweep_faults import fated_spec

from lipschitz_icl.forked import fork_available, not_inherited, run_forked, single_threaded
from lipschitz_icl.sweep import execute, forked_batches, load_metrics, load_runs, load_sweep, run_sweep
from lipschitz_icl.sweep.forked_batches import run_forked_batches
from lipschitz_icl.sweep.worker import Keep

pytestmark = pytest.mark.skipif(not fork_available(), reason="forked batches need fork (Linux, macOS)")
SPEC = {"name": "f", "base": {"train": {"steps": 30, "log_every": 10}, "engine": {"draws": 16}},
        "grid": {"task.L": [0.5, 2.0, 4.0]}, "seeds": 3}


@pytest.mark.parametrize("run_dirs", [False, True])
def test_forked_batches_store_what_one_process_stores(tmp_path, run_dirs):
    one = run_sweep(SPEC, tmp_path / "one", workers=1, batch=2, run_dirs=run_dirs)
    forked = run_sweep(SPEC, tmp_path / "forked", workers=2, batch=2, run_dirs=run_dirs)
    assert list(one["name"]) == list(forked["name"]) and set(forked["status"]) <= {"converged", "budget"}
    pd.testing.assert_frame_equal(load_metrics(tmp_path / "one"), load_metrics(tmp_path / "forked"))
    params = {r.summary["config_hash"]: r.params for r in load_runs(tmp_path / "one")}
    for run in load_runs(tmp_path / "forked"):
        mine = params[run.summary["config_hash"]]
        assert run.params.keys() == mine.keys() and all(torch.equal(run.params[k], mine[k]) for k in mine)


def test_a_batch_whose_process_dies_is_trained_again_point_by_point(tmp_path):
    points = load_sweep(fated_spec(tmp_path / "k.yaml", ["ok", "exit", "ok", "raise"])).points
    stored: list = []
    run_forked_batches([points], lambda pairs, encoded=None: stored.extend(pairs), execute._failed_result, Keep(),
                       workers=2)
    outcome = {p.axes["task.params.fate"]: r["summary"] for p, r in stored}
    assert len(stored) == 4 and outcome.keys() == {"ok", "exit", "raise"}  # each point stored once
    assert outcome["exit"]["status"] == "failed" and "ended without a result (exit code" in outcome["exit"]["error"]
    assert outcome["raise"]["status"] == "failed" and "exit code" not in outcome["raise"]["error"]  # its own error
    assert [r["summary"]["status"] for p, r in stored if p.axes["task.params.fate"] == "ok"] == 2 * [
        outcome["ok"]["status"]] and outcome["ok"]["status"] in {"converged", "budget"}


def test_a_lane_that_dies_loses_one_batch_and_the_others_are_trained(tmp_path):
    """One lane: it trains the first batch, dies in the second (whose points are then trained alone), and a new lane
    takes the batches left; each point is stored once, the one that kills its process failed."""
    points = load_sweep(fated_spec(tmp_path / "k.yaml", ["ok", "ok", "exit", "ok", "ok", "ok"])).points
    batches = [points[:2], points[2:4], points[4:]]
    stored: list = []
    rounds: list[int] = []

    def counted(items, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202 - wraps run_forked
        rounds.append(len(items))
        return run_forked(items, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(forked_batches, "run_forked", counted)
        run_forked_batches(batches, lambda pairs, encoded=None: stored.extend(pairs), execute._failed_result,
                           Keep(), workers=1)
    assert sorted(p.config_hash for p, _ in stored) == sorted(p.config_hash for p in points)  # each point once
    status = [r["summary"]["status"] for _, r in sorted(stored, key=lambda pr: points.index(pr[0]))]
    assert status[2] == "failed" and all(s in {"converged", "budget"} for k, s in enumerate(status) if k != 2)
    assert rounds == [1, 1, 2]  # a lane (batches 1, 2: died), a new lane (batch 3), then batch 2's points alone


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_a_sweep_forks_one_lane_per_worker_whatever_its_batches(tmp_path, workers):
    batches = [[p] for p in load_sweep(SPEC).points]  # 9 batches of one point
    forks: list[int] = []

    def counted(items, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202 - wraps run_forked
        forks.append(len(items))
        return run_forked(items, *args, **kwargs)

    stored: list = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(forked_batches, "run_forked", counted)
        run_forked_batches(batches, lambda pairs, encoded=None: stored.extend(pairs), execute._failed_result,
                           Keep(), workers=workers)
    assert forks == [workers] and [p for p, _ in stored] and len(stored) == 9
    assert {p.config_hash for p, _ in stored} == {b[0].config_hash for b in batches}


def test_a_process_with_another_thread_runs_its_sweep_on_dask_not_forked(tmp_path):
    """A thread drawing torch random numbers holds the generator's lock at times: a fork then could wait forever
    in the child. With the thread alive the sweep takes the embedded Dask cluster, and finishes."""
    stop = threading.Event()

    def draw() -> None:
        while not stop.is_set():
            torch.randn(64)

    thread = threading.Thread(target=draw, daemon=True)
    thread.start()
    try:
        assert not single_threaded() and not execute.fork_safe()
        rows = run_sweep(SPEC, tmp_path / "t", workers=2, batch=2)
    finally:
        stop.set()
        thread.join()
    assert len(rows) == 9 and set(rows["status"]) <= {"converged", "budget"}


def _is_open(fd: int, tick) -> bool:  # noqa: ANN001, ARG001 - run_forked's work signature
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_the_sweep_directory_lock_is_not_held_by_the_forked_processes(tmp_path):
    """A forked child would share the driver's flock on the sweep directory and hold it after the driver was killed,
    until it ended: a rerun right away was refused ("another sweep is writing to this directory")."""
    answers = []
    with open(tmp_path / ".lock", "w") as fh:
        with not_inherited(fh.fileno()):
            run_forked([fh.fileno()], _is_open, 1, lambda pos: None, lambda pos, out, s: answers.append(out))
        run_forked([fh.fileno()], _is_open, 1, lambda pos: None, lambda pos, out, s: answers.append(out))
    assert answers == [False, True]  # closed in the child while registered, inherited otherwise
