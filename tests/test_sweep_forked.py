"""A local sweep's batches in processes forked from the driver (``sweep.forked_batches``): the same stored results
as in one process, params and run directories included, and a batch whose process dies trained again point by
point, so that only the point that kills its process is recorded failed."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from test_sweep_faults import fated_spec

from lipschitz_icl.forked import fork_available
from lipschitz_icl.sweep import execute, load_metrics, load_runs, load_sweep, run_sweep
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
