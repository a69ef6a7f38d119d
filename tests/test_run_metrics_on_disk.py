"""A Run's metrics read by metric without making the whole table a DataFrame (``Run.metric_rows``), and a written
run's metrics let go of and read back from its directory, checked (``Run.keep_metrics_on_disk``), as an
experiment does with its long runs (``runner.HELD_ROWS``)."""

from __future__ import annotations

import pickle

import pandas as pd
import pytest

import lipschitz_icl as li
from lipschitz_icl.api import write_run
from lipschitz_icl.errors import UserInputError
from lipschitz_icl.experiments import runner
from lipschitz_icl.experiments.runner import Context, base_config, run_group

SMALL = ["train.steps=30", "train.log_every=5", "engine.draws=8", "eval.functions=8", "features.K=3",
         "features.d=3"]


def _run() -> li.Run:
    return li.run(li.load_config(None, SMALL), write=False)


def test_metric_rows_equal_the_rows_of_the_whole_frame_and_leave_no_frame_behind():
    held, whole = _run(), _run()
    frame = whole.metrics  # the whole table as a DataFrame, made first
    for metric in ("loss", "attn_self", "attn_cross"):
        rows = held.metric_rows(metric)
        expected = frame[frame.metric == metric]
        pd.testing.assert_frame_equal(rows.reset_index(drop=True), expected.reset_index(drop=True))
        pd.testing.assert_frame_equal(rows.reset_index(drop=True),
                                      whole.metric_rows(metric).reset_index(drop=True))
    pd.testing.assert_frame_equal(held.attention(), whole.attention())
    pd.testing.assert_series_equal(held.series("loss"), whole.series("loss"))
    pd.testing.assert_frame_equal(held.per_feature("attn_cross"), whole.per_feature("attn_cross"))
    assert held._frame is None  # nothing the size of the whole table is kept


def test_metrics_kept_on_disk_are_read_back_equal_and_checked(tmp_path):
    run = _run()
    table, frame = run.table(), run.metrics.copy()
    with pytest.raises(ValueError, match="write_run"):
        run.keep_metrics_on_disk()  # not written yet: nothing to read back
    write_run(run, tmp_path / "r")
    run.keep_metrics_on_disk()
    assert run._table is None and run._frame is None
    assert run.table().equals(table)
    pd.testing.assert_frame_equal(run.attention(), li.load_run(tmp_path / "r").attention())
    pickled = pickle.loads(pickle.dumps(run))  # holds its directory and digests, not a table
    assert pickled._table is None and pickled.table().equals(table)
    pd.testing.assert_frame_equal(run.metrics, frame)
    assert run.table().equals(table)  # read back again, not rebuilt from the frame
    other = _run().table().slice(0, 10)  # another table in the file: its digest no longer matches
    run2 = _run()
    write_run(run2, tmp_path / "r2")
    run2.keep_metrics_on_disk()
    (tmp_path / "r2" / "metrics.parquet").write_bytes(li.store.parquet_bytes(other))
    with pytest.raises(UserInputError, match="metrics.parquet"):
        run2.table()


def test_a_group_lets_go_of_the_tables_of_its_long_runs(tmp_path, monkeypatch):
    configs = [base_config([*SMALL, f"task.L={L}"]).with_overrides([f"name=L{L}"]) for L in (1, 3)]
    held = run_group(Context(out=tmp_path / "a", quick=True), "g", configs)
    monkeypatch.setattr(runner, "HELD_ROWS", 0)  # every run counts as long
    kept = run_group(Context(out=tmp_path / "b", quick=True), "g", configs)
    for a, b in zip(held, kept, strict=True):
        assert a._table is not None and b._table is None and b._on_disk
        assert b.table().equals(a.table())
        pd.testing.assert_frame_equal(b.attention(), a.attention())
    reused = run_group(Context(out=tmp_path / "b", quick=True, resume=True), "g", configs)  # read, not trained
    for a, b in zip(held, reused, strict=True):
        assert b._table is None and b._on_disk
        pd.testing.assert_frame_equal(b.attention(), a.attention())


def test_load_run_makes_the_frame_only_when_asked(tmp_path):
    run = _run()
    write_run(run, tmp_path / "r")
    loaded = li.load_run(tmp_path / "r")
    assert loaded._frame is None
    pd.testing.assert_frame_equal(loaded.attention(), run.attention())
    assert loaded._frame is None
    pd.testing.assert_frame_equal(loaded.metrics, run.metrics)


def test_a_run_without_metrics_has_empty_curves(tmp_path):
    run = _run()
    run.metrics = pd.DataFrame()  # as load_run gives a run directory without metrics.parquet
    assert run.attention().empty and run.series("loss").empty and run.metric_rows("loss").empty
