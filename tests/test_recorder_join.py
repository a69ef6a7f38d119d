"""``recorder.joined_table``: a batch's tables made in one pass are the per-run tables concatenated."""

import pickle

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import lipschitz_icl as li
from lipschitz_icl import recorder
from lipschitz_icl.batch import run_many
from lipschitz_icl.recorder import SCHEMA, Recorder, _names_at, _tiled_text, joined_table, thin_rows


def _recorder(K: int, steps: list[int], extras: list[dict], seed: int) -> Recorder:
    rng = np.random.default_rng(seed)
    rec = Recorder(K)
    for step, extra in zip(steps, extras, strict=True):
        rec.record(step, float(rng.random()), rng.random((K, K)), rng.random((K, K)), extra)
    return rec


def _parts() -> list:
    cfgs = [li.load_config("configs/quickstart.yaml", [f"task.L={L}", f"seed={s}", "train.steps=30"])
            for L in (0.5, 4.0) for s in (0, 1)]
    cfgs.append(li.load_config("configs/quickstart.yaml", ["eval.geometry=true", "train.steps=20"]))  # derives
    batch = [r.table_source() for r in run_many(cfgs)]
    assert sum(isinstance(p, Recorder) for p in batch) >= 4
    nan_attn = _recorder(3, [0, 1], [{}, {}], 7)
    nan_attn._blocks[0][3][0] = np.nan  # a record whose attention is all NaN
    return [
        *batch[:2], Recorder(5), *batch[2:],  # an empty recorder between recorders of one shape
        _recorder(3, [0, 1, 2], [{"x": 1.0}, {"x": 2.0}, {"y": 3.0}], 1),  # two segments: extras change
        batch[0].table() if isinstance(batch[0], Recorder) else batch[0],  # a table among recorders
        _recorder(3, [0, 5], [{}, {}], 2), _recorder(3, [1], [{}], 3), nan_attn,  # one shape, other K
        Recorder(3),
    ]


def test_joined_table_is_the_per_run_tables_concatenated():
    parts = _parts()
    table, rows = joined_table(parts)
    singles = [p.table() if isinstance(p, Recorder) else p for p in parts]
    assert rows == [t.num_rows for t in singles]
    expected = pa.concat_tables(singles)
    assert table.schema.equals(SCHEMA)
    for name in ("step", "metric", "k", "n"):
        assert table[name].equals(expected[name]), name
    values, want = (t["value"].to_numpy() for t in (table, expected))
    assert np.array_equal(values.view(np.int64), want.view(np.int64))  # bit for bit, NaN included


def _assert_same(table: pa.Table, expected: pa.Table) -> None:
    assert table.schema.equals(SCHEMA)
    for name in ("step", "metric", "k", "n"):
        assert table[name].equals(expected[name]), name
    values, want = (t["value"].to_numpy() for t in (table, expected))
    assert np.array_equal(values.view(np.int64), want.view(np.int64))  # bit for bit, NaN included


@pytest.mark.parametrize("thin", [lambda m: m in ("A", "B") or m.startswith("attn_cross"),
                                  lambda m: m == "loss", lambda m: m.startswith("test"), lambda m: False])
def test_a_thinned_join_makes_only_the_rows_thin_rows_keeps(thin):
    """joined_table(parts, thin) never makes the rows thin_rows drops: the same table, the same rows per run."""
    parts = _parts()
    full, rows = joined_table(parts)
    expected, kept = thin_rows(full, rows, thin)
    table, counts = joined_table(parts, thin)
    assert counts == kept
    assert (table.num_rows < full.num_rows) == any(thin(m) for m in set(full["metric"].to_pylist()))
    _assert_same(table, expected)


@pytest.mark.parametrize("limit", [1, 5, 9, 1000])
def test_names_gathered_past_a_string_arrays_bytes_are_cut_into_chunks(monkeypatch, limit):
    names, col = ["loss", "attn_cross", "", "ü"], np.array([1, 0, 3, 2, 1, 1, 0])
    monkeypatch.setattr(recorder, "TEXT_BYTES", limit)
    text = _names_at(names, col)
    assert text.to_pylist() == [names[i] for i in col]
    chunks = text.chunks if isinstance(text, pa.ChunkedArray) else [text]
    assert all(len(c) == 1 or sum(len(v.encode()) for v in c.to_pylist()) <= limit for c in chunks)
    assert _names_at(names, col[:0]).to_pylist() == []


def test_joined_table_of_nothing_is_empty():
    table, rows = joined_table([])
    assert rows == [] and table.num_rows == 0 and table.schema.equals(SCHEMA)


@pytest.mark.parametrize("T", [0, 1, 3])
def test_tiled_text_repeats_the_names(T):
    names = ["loss", "attn_cross", "", "B", "ü"]
    assert _tiled_text(names, T).to_pylist() == names * T


@pytest.mark.parametrize("limit", [1, 16, 17, 40])
def test_tiled_text_past_a_string_arrays_bytes_is_cut_into_whole_records(monkeypatch, limit):
    names = ["loss", "attn_cross", "", "ü"]  # 17 bytes a record
    monkeypatch.setattr(recorder, "TEXT_BYTES", limit)
    text = _tiled_text(names, 5)
    assert text.to_pylist() == names * 5
    if limit < 5 * 17:
        assert isinstance(text, pa.ChunkedArray) and all(len(c) % len(names) == 0 for c in text.chunks)


def test_a_run_holding_its_recorder_pickles_with_its_table():
    """run_many's Runs hold their Recorder until a table is asked for; pickled, they carry the table (a recorder
    that derives geometry metrics holds a closure, which does not pickle)."""
    cfgs = [li.load_config("configs/quickstart.yaml", ["train.steps=20", *extra])
            for extra in ([], ["eval.geometry=true"])]
    for run in run_many(cfgs):
        assert isinstance(run.table_source(), Recorder)
        back = pickle.loads(pickle.dumps(run))
        pd.testing.assert_frame_equal(back.metrics, run.metrics)  # NaN where a geometry metric is undefined


def test_a_recorders_table_with_its_metric_column_in_chunks_is_the_same(monkeypatch):
    rec = _recorder(3, [0, 1, 2, 5], [{}, {}, {}, {}], 4)
    whole = rec.table()
    monkeypatch.setattr(recorder, "TEXT_BYTES", 100)
    cut = rec.table()
    assert cut["metric"].num_chunks > 1 and cut.equals(whole)
