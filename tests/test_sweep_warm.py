"""Where a local sweep cannot fork (the platform, or a process with other threads: the embedded Dask cluster runs it),
a spec of more points than one batch holds starts the cluster's fork server before its points are expanded (its
imports then run meanwhile); one batch, one worker, a scheduler, or forked batches do not."""

import pytest

from lipschitz_icl.sweep import execute
from lipschitz_icl.sweep.spec import load_sweep


@pytest.mark.parametrize(("workers", "scheduler", "points", "forks", "warmed"), [
    (None, None, execute.MAX_BATCH + 1, False, True), (2, None, execute.MAX_BATCH + 1, False, True),
    (1, None, execute.MAX_BATCH + 1, False, False), (None, "tcp://127.0.0.1:1", execute.MAX_BATCH + 1, False, False),
    (None, None, execute.MAX_BATCH, False, False), (None, None, execute.MAX_BATCH + 1, True, False),
    (2, None, execute.MAX_BATCH + 1, True, False)])
def test_the_fork_server_starts_only_for_a_local_dask_cluster(monkeypatch, workers, scheduler, points, forks, warmed):
    calls = []
    monkeypatch.setattr(execute, "warm_fork_server", lambda: calls.append(1))
    monkeypatch.setattr(execute, "fork_safe", lambda: forks)
    execute.warm_workers(workers, scheduler)(points)
    assert bool(calls) == warmed


def test_load_sweep_tells_the_count_before_expanding():
    told = []
    sweep = load_sweep({"base": {"train": {"steps": 5}}, "grid": {"task.L": [1.0, 2.0, 2.0]}, "seeds": 2},
                       on_count=told.append)
    assert told == [6] and len(sweep.points) == 4  # duplicates counted, then kept once
