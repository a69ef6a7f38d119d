"""compare: two reproduce outputs agree when only wall times, dates, experiment names and the output
directory's path differ."""

import json

import pyarrow as pa
import pyarrow.parquet as pq

from lipschitz_icl.experiments.compare import compare_outputs, main


def _output(root, *, wall=1.0, date="2026-01-01", stat=0.5, verdict="supported", metric=1.0, experiment="exp_a",
            seed=0):
    claims = [{"id": "P1", "statement": "s", "criterion": "c", "statistic": {"x": stat}, "verdict": verdict,
               "figures": ["figures/f.png"], "runs": ["runs/g/r"], "notes": "", "experiment": experiment,
               "wall_s": wall}]
    root.mkdir()
    (root / "claims.json").write_text(json.dumps({"meta": {"date": date, "wall_s": wall}, "claims": claims}))
    run = root / "runs" / "g" / "r"
    run.mkdir(parents=True)
    pq.write_table(pa.table({"step": [0, 1], "value": [2.0, metric]}), run / "metrics.parquet")
    (run / "summary.json").write_text(json.dumps({"status": "converged", "wall_s": wall, "config_hash": str(root)}))
    (run / "config.yaml").write_text(f"features:\n  path: {root.resolve()}/features/tilt0.npy\nseed: {seed}\n")
    return root


def test_wall_times_dates_experiment_names_and_output_paths_are_ignored(tmp_path):
    a = _output(tmp_path / "a")
    b = _output(tmp_path / "b", wall=9.0, date="2027-02-02", experiment="exp_renamed")
    assert compare_outputs(a, b) == []
    assert main([str(a), str(b)]) == 0


def test_a_changed_statistic_verdict_or_metric_is_reported(tmp_path):
    a = _output(tmp_path / "a")
    b = _output(tmp_path / "b", stat=0.5000001, verdict="inconclusive", metric=1.0 + 2**-40, seed=1)
    diffs = compare_outputs(a, b)
    assert any(d.startswith("P1.statistic") for d in diffs)
    assert any(d.startswith("P1.verdict") for d in diffs)
    assert "run g/r: metrics differ" in diffs and "run g/r: config differs" in diffs
    assert main([str(a), str(b)]) == 1
    assert main([str(a)]) == 2
