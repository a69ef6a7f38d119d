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


@pytest.mark.parametrize(("fused", "dtypes"), [(True, {"float64"}), (False, set())])
def test_forked_batches_load_the_compiled_step_once_in_the_driver(monkeypatch, fused, dtypes):
    """A sweep's batches of fused runs get the compiled step (numba) loaded in the driver before they fork, so that no
    batch's process loads it again (about 0.4 CPU-s each); batches without fused runs load nothing."""
    from lipschitz_icl.forked import fork_available
    from lipschitz_icl.sweep import forked_batches
    from lipschitz_icl.sweep.worker import Keep
    if not fork_available():
        pytest.skip("forked batches need fork")
    if fused:
        pytest.importorskip("numba")
    asked = []
    monkeypatch.setattr(forked_batches, "warm_fused_step", lambda d: asked.append(set(d)))
    spec = {"name": "w", "base": {"train": {"steps": 20, "log_every": 10}, "engine": {"draws": 8}},
            "grid": {"task.L": [0.5, 2.0]}, "seeds": 2, "fused": fused}
    points = load_sweep(spec).points
    stored: list = []
    forked_batches.run_forked_batches([points[:2], points[2:]], lambda pairs, encoded=None: stored.extend(pairs),
                                      execute._failed_result, Keep(), workers=2)
    assert asked == [dtypes] and len(stored) == 4
    assert {r["summary"]["status"] for _, r in stored} <= {"converged", "budget"}


def test_warm_fused_step_loads_every_compiled_entry_point_and_keeps_the_generator():
    pytest.importorskip("numba")
    import subprocess
    import sys

    import torch

    from lipschitz_icl.batch import warm_fused_step
    torch.manual_seed(3)
    expected = torch.rand(4)
    torch.manual_seed(3)
    warm_fused_step()
    assert torch.equal(torch.rand(4), expected)
    probe = ("from lipschitz_icl import stopping_compiled as s; from lipschitz_icl.engines import kernel_fused as k; "
             "fs = (k.fused_step, k.fused_update, s.observe, s.quiet_steps, s.wants_record); "
             "before = [len(f.signatures) for f in fs]; from lipschitz_icl.batch import warm_fused_step; "
             "warm_fused_step(); print(before, [len(f.signatures) for f in fs])")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[0, 0, 0, 0, 0] [1, 1, 1, 1, 1]"  # none loaded in a fresh process, each one after
