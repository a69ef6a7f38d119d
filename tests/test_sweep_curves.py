"""What a sweep stores of each run's curves: ``summary`` by default (every scalar and Attn_k at every record, the
K x K blocks A, B and attn_cross at the first and last record), ``full`` on request (spec ``curves:``,
``--curves``, ``run_configs(curves=...)``), and bad values refused before anything is written."""

import pandas as pd
import pyarrow as pa
import pytest
import yaml
from typer.testing import CliRunner

import lipschitz_icl as li
from lipschitz_icl.cli import app
from lipschitz_icl.errors import UserInputError
from lipschitz_icl.recorder import SCHEMA, metrics_frame
from lipschitz_icl.sweep import load_metrics, load_runs, run_configs, run_sweep
from lipschitz_icl.sweep.results import ENDS_ONLY, summary_curves

TINY = {"train": {"steps": 30, "log_every": 5}, "engine": {"draws": 8}, "eval": {"functions": 8}}


def spec(**extra) -> dict:
    return {"name": "c", "base": TINY, "grid": {"task.L": [1, 3]}, **extra}


def ends_only(frame: pd.DataFrame) -> pd.Series:
    return frame["metric"].isin(ENDS_ONLY) | frame["metric"].str.startswith("attn_cross")


def test_a_summary_keeps_every_scalar_and_attn_k_and_the_blocks_at_the_ends(tmp_path):
    run_sweep(spec(), tmp_path, workers=1)
    for stored in load_runs(tmp_path):
        full = li.run(stored.config, write=False).metrics
        kept = stored.metrics
        steps = sorted(full["step"].unique())
        assert len(steps) > 2  # there is something between the ends to leave out
        # every row kept is the full run's row, bit for bit, in the same order
        merged = kept.merge(full, on=["step", "metric", "k", "n"], suffixes=("", "_full"), how="left")
        assert (merged["value"].to_numpy() == merged["value_full"].to_numpy()).all()
        pd.testing.assert_frame_equal(kept.loc[~ends_only(kept)].reset_index(drop=True),
                                      full.loc[~ends_only(full)].reset_index(drop=True))
        blocks = kept.loc[ends_only(kept)]
        assert sorted(blocks["step"].unique()) == [steps[0], steps[-1]]
        assert set(blocks["metric"]) == {"A", "B", "attn_cross"}
        assert len(blocks) == 2 * len(full.loc[ends_only(full) & (full["step"] == steps[-1])])


def test_full_curves_equal_the_run_bit_for_bit_and_cost_more_bytes(tmp_path):
    run_sweep(spec(curves="full"), tmp_path / "full", workers=1)
    run_sweep(spec(), tmp_path / "summary", workers=1)
    for stored in load_runs(tmp_path / "full"):
        pd.testing.assert_frame_equal(stored.metrics, li.run(stored.config, write=False).metrics)
    size = {name: sum(p.stat().st_size for p in (tmp_path / name / "results").glob("*.parquet"))
            for name in ("full", "summary")}
    assert size["summary"] < 0.7 * size["full"]
    assert len(load_metrics(tmp_path / "summary")) < len(load_metrics(tmp_path / "full"))


def test_the_option_overrides_the_spec_and_run_configs_takes_it(tmp_path):
    run_sweep(spec(curves="summary"), tmp_path / "a", workers=1, curves="full")
    assert yaml.safe_load((tmp_path / "a" / "sweep.yaml").read_text())["curves"] == "full"  # what was stored
    configs = [li.load_config(None, ["train.steps=30", "engine.draws=8", "eval.functions=8"])]
    run_configs(configs, tmp_path / "b", workers=1, curves="full")
    for folder in ("a", "b"):
        for stored in load_runs(tmp_path / folder):
            pd.testing.assert_frame_equal(stored.metrics, li.run(stored.config, write=False).metrics)


@pytest.mark.parametrize("call", [
    lambda out: run_configs([li.load_config(None)], out, workers=1, curves="some"),
    lambda out: run_sweep(spec(), out, workers=1, curves="some"),
])
def test_a_bad_curves_value_is_refused_before_anything_is_written(tmp_path, call):
    with pytest.raises(UserInputError, match="allowed: summary, full"):
        call(tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_cli_refuses_a_bad_curves_value_in_one_line(tmp_path):
    (tmp_path / "s.yaml").write_text("base: {train: {steps: 5}}\ncurves: some\n")
    result = CliRunner().invoke(app, ["sweep", "run", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "curves" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(app, ["sweep", "run", str(tmp_path / "s.yaml"), "--curves", "all"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert not (tmp_path / "o").exists()


def test_summary_of_runs_with_no_rows_and_of_one_record():
    run = li.run(None, ["train.steps=3", "train.log_every=1"], write=False).table()
    one = run.filter(pa.compute.equal(run.column("step"), 0))
    table = pa.concat_tables([run, SCHEMA.empty_table(), one])
    kept, counts = summary_curves(table, [run.num_rows, 0, one.num_rows])
    assert counts[1] == 0 and counts[2] == one.num_rows and sum(counts) == kept.num_rows
    frame = metrics_frame(kept.slice(0, counts[0]))
    assert sorted(frame.loc[ends_only(frame), "step"].unique()) == [0, 3]
