"""A local sweep's batches in processes forked from the driver (``sweep.forked_batches``): the same stored results
as in one process, params and run directories included; a batch whose process dies trained again point by
point, so that only the point that kills its process is recorded failed; one forked lane per worker whatever the
number of batches; and no fork from a process with other threads (one of them may hold a lock the fork would
copy)."""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

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


def _lanes_run(batches: list, workers: int, die_at: tuple | None = None, marker: Path | None = None,
               after_answer: Callable[[], None] | None = None) -> tuple[list, list[list]]:
    """``run_forked_batches`` of ``batches``: (the stored (point, result) pairs, each ``run_forked`` call's items as
    they ended: the processes it forked). ``die_at``: a lane ends itself (exit code 137) as it sends this tick
    (``("began", i)``: before the driver hears of it; ``("trained", i)``: as it sends batch i's results, i.e.
    after it began batch i) while ``marker`` does not exist, which it creates: once. ``after_answer()``: in the
    driver, after each process's end is handled."""
    stored: list = []
    calls: list[list] = []

    def forked(items, work, jobs, started, answered, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        def then(*answer):  # noqa: ANN002, ANN202
            answered(*answer)
            if after_answer is not None:
                after_answer()

        def fated(item, tick):  # noqa: ANN001, ANN202 - in the lane
            def tick_or_die(payload):  # noqa: ANN001, ANN202
                if die_at is not None and tuple(payload[:2]) == die_at and not marker.exists():
                    marker.touch()
                    if die_at[0] == "trained":  # it began: the driver knows
                        tick(("began", die_at[1]))
                    os._exit(137)
                tick(payload)
            return work(item, tick_or_die)

        calls.append(items)
        return run_forked(items, fated, jobs, started, then, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(forked_batches, "run_forked", forked)
        run_forked_batches(batches, lambda pairs, encoded=None: stored.extend(pairs), execute._failed_result,
                           Keep(), workers=workers)
    return stored, calls


def _statuses(stored: list, points: list) -> list[str]:
    """The status of each point's stored result, in the points' order; each point stored exactly once."""
    assert sorted(p.config_hash for p, _ in stored) == sorted(p.config_hash for p in points)
    return [r["summary"]["status"] for _, r in sorted(stored, key=lambda pr: points.index(pr[0]))]


def test_a_lane_that_dies_loses_one_batch_and_a_new_lane_takes_the_rest(tmp_path):
    """One lane: it trains the first batch and dies in the second (a point that kills its process); a new lane
    takes the third batch, and the second's points are trained alone, where the killing point fails again."""
    points = load_sweep(fated_spec(tmp_path / "k.yaml", ["ok", "ok", "exit", "ok", "ok", "ok"])).points
    stored, calls = _lanes_run([points[:2], points[2:4], points[4:]], workers=1)
    status = _statuses(stored, points)
    assert status[2] == "failed" and all(s in {"converged", "budget"} for k, s in enumerate(status) if k != 2)
    assert [len(c) for c in calls] == [2, 2]  # two lanes (the second replacing the first), then 2 points alone


def test_a_one_point_batch_whose_lane_was_killed_is_trained_again_alone(tmp_path):
    """A lane killed from outside (standing for an OOM kill of a lane that held much) while it trains a batch of one
    point: the point is trained again alone, not recorded failed."""
    points = load_sweep(SPEC).points[:4]
    stored, calls = _lanes_run([[p] for p in points], workers=1, die_at=("trained", 1), marker=tmp_path / "m")
    assert set(_statuses(stored, points)) <= {"converged", "budget"}
    assert [len(c) for c in calls] == [2, 1]  # the killed lane, its replacement; the one point alone


def test_a_batch_handed_to_a_lane_that_died_before_beginning_it_goes_to_another_lane(tmp_path):
    """A lane that dies between sending a batch's results and beginning the next it was handed: that next batch is
    trained by the new lane, in its batch, never charged with the death (nothing trained alone, nothing failed)."""
    points = load_sweep(SPEC).points
    batches = [points[:3], points[3:6], points[6:]]
    stored, calls = _lanes_run(batches, workers=1, die_at=("began", 1), marker=tmp_path / "m")
    assert set(_statuses(stored, points)) <= {"converged", "budget"}
    assert [len(c) for c in calls] == [2]  # one round: the lane that died, the lane that trained batches 1 and 2


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_a_sweep_forks_one_lane_per_worker_whatever_its_batches(workers):
    batches = [[p] for p in load_sweep(SPEC).points]  # 9 batches of one point
    stored, calls = _lanes_run(batches, workers)
    assert [len(c) for c in calls] == [workers] and set(_statuses(stored, [b[0] for b in batches])) <= {
        "converged", "budget"}


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


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts this process's descriptors in /proc")
def test_lanes_replaced_many_times_hold_no_more_descriptors(tmp_path):
    """Each dead lane's pipe is closed as it ends: 20 lanes killed one after another (one-point batches that kill
    their lane) leave the driver's open descriptors where they were, not 40 higher (a sweep of many such points
    stopped with "Too many open files")."""
    points = load_sweep(fated_spec(tmp_path / "k.yaml", ["exit"] * 20)).points
    counts: list[int] = []
    stored, _ = _lanes_run([[p] for p in points], 2, after_answer=lambda: counts.append(len(os.listdir(
        "/proc/self/fd"))))
    assert {r["summary"]["status"] for _, r in stored} == {"failed"} and len(stored) == 20
    assert len(counts) == 40 and max(counts[:20]) - min(counts[:20]) <= 10  # 20 lanes (2 more each before), then alone


@pytest.mark.timeout(120)
def test_an_error_while_storing_stops_the_sweep_with_that_error(tmp_path):
    """A disk full while the driver stores a batch is raised (it was swallowed as if the lane had ended, and the
    driver then waited forever for a lane that waited for its next batch); no lane is left running."""
    points = load_sweep(SPEC).points
    calls: list[int] = []

    def on_result(pairs, encoded=None):  # noqa: ANN001, ANN202
        calls.append(len(pairs))
        if len(calls) == 2:
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        run_forked_batches([points[i : i + 2] for i in range(0, 8, 2)], on_result, execute._failed_result, Keep(),
                           workers=2)
    assert len(calls) == 2 and multiprocessing.active_children() == []


CTRL_C_AT_A_FORK = """
import contextlib, multiprocessing, os, signal, sys
import lipschitz_icl.forked as forked
from lipschitz_icl.sweep import execute, load_sweep
from lipschitz_icl.sweep.forked_batches import run_forked_batches
from lipschitz_icl.sweep.worker import Keep
held, forks = forked._signals_held, []

@contextlib.contextmanager
def ctrl_c_at_the_second_fork():  # SIGINT comes in as the held signals are let in, right after the fork
    forks.append(1)
    with held():
        yield
        if len(forks) == 2:
            os.kill(os.getpid(), signal.SIGINT)

forked._signals_held = ctrl_c_at_the_second_fork
points = load_sweep(%r).points
try:
    run_forked_batches([[p] for p in points], lambda pairs, encoded=None: None, execute._failed_result, Keep(), 2)
except KeyboardInterrupt:
    print("interrupted; children left:", len(multiprocessing.active_children()))
"""


@pytest.mark.timeout(120)
def test_ctrl_c_right_after_a_lane_is_forked_ends_that_lane_too():
    """The child forked when Ctrl-C came in is among those ended (it was recorded only after the held signals came
    in: it was left running, waiting for its next batch, and the interpreter waited for it at exit)."""
    script = CTRL_C_AT_A_FORK % (SPEC,)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=100)
    assert "interrupted; children left: 0" in out.stdout, out.stdout + out.stderr


def _pipe_reading_ends(tick=None) -> set[str]:  # noqa: ANN001, ARG001 - also run_forked's work signature
    """The pipes ("pipe:[inode]") whose reading end this process holds (/proc/self/fdinfo: read-only descriptors)."""
    ends = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            flags = int(Path(f"/proc/self/fdinfo/{fd}").read_text().split("flags:")[1].split()[0], 8)
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("pipe:") and flags & os.O_ACCMODE == os.O_RDONLY:
                ends.add(target)
    return ends


@pytest.mark.skipif(not Path("/proc/self/fdinfo").is_dir(), reason="reads descriptors' flags in /proc")
def test_a_forked_child_holds_no_reading_end_of_the_result_pipes():
    """Each child closes its copies of the result pipes' reading ends, its own and those of the children forked
    before it: once the parent is gone, a child's write then fails instead of waiting forever on a pipe that only
    its siblings still read (where no parent-death signal ends it)."""
    result_pipes: list[str] = []
    make_pipe = multiprocessing.connection.Pipe

    def recorded_pipe(duplex=True):  # noqa: ANN001, ANN202 - what run_forked's context calls
        reader, writer = make_pipe(duplex)
        result_pipes.append(os.readlink(f"/proc/self/fd/{reader.fileno()}"))
        return reader, writer

    def work(item, tick):  # noqa: ANN001, ANN202
        time.sleep(0.3 * (2 - item))  # the first children still run when the last is forked
        return _pipe_reading_ends()

    answers: dict[int, set[str]] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(multiprocessing.connection, "Pipe", recorded_pipe)
        run_forked([0, 1, 2], work, 3, lambda pos: None, lambda pos, out, s: answers.update({pos: out}))
    assert len(result_pipes) == 3 and len(answers) == 3
    assert all(not (held & set(result_pipes)) for held in answers.values()), (answers, result_pipes)


def test_a_forked_call_answers_raises_or_is_found_dead_and_end_stops_it():
    """``ForkedCall`` (a spec's points made by a helper): its answer, its exception, ChildDied for a child that
    ended without an answer, and ``end()`` stopping one that still runs."""
    from lipschitz_icl.forked import ChildDied, ForkedCall

    assert ForkedCall(lambda xs: [x * x for x in xs], [1, 2, 3]).result() == [1, 4, 9]
    with pytest.raises(ValueError, match="bad point"):
        ForkedCall(lambda _: (_ for _ in ()).throw(ValueError("bad point")), None).result()
    with pytest.raises(ChildDied):
        ForkedCall(lambda _: os._exit(3), None).result()
    sleeper = ForkedCall(lambda _: time.sleep(60), None)
    started = time.monotonic()
    sleeper.end()
    assert not sleeper.process.is_alive() and time.monotonic() - started < 10
