"""``lipschitz-icl bench`` at a tiny size, the recorder's vectorised table, and bench helpers."""

import json

import numpy as np
import pandas as pd
import pytest
import torch
from cli_support import refused
from typer.testing import CliRunner

from lipschitz_icl.bench import Size, Target
from lipschitz_icl.bench.sections import step_floor as step_floor_module
from lipschitz_icl.bench.sections.batched import _why_slower
from lipschitz_icl.bench.sections.reproduce import (
    BASELINE_COMMIT,
    BASELINE_WALL_S,
    QUICK_TARGET_S,
    baseline_source,
    experiment_times,
    summarise,
)
from lipschitz_icl.bench.sections.step_floor import HAS_NUMBA, step_floor
from lipschitz_icl.bench.timing import fit_exponent
from lipschitz_icl.cli import app
from lipschitz_icl.recorder import Recorder

runner = CliRunner()


def test_bench_tiny_writes_every_section_and_target(tmp_path):
    out = tmp_path / "bench.json"
    result = runner.invoke(app, ["bench", "--tiny", "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["size"] == "tiny" and report["device"] == "cpu"
    assert all(row["device"] == "cpu" for s in report["sections"].values() for row in s["rows"])
    assert {"cpu", "cores", "torch_threads"} <= set(report["machine"])
    assert {"torch", "lipschitz_icl"} <= set(report["versions"])
    sections = report["sections"]
    assert {"step_time", "scaling", "memory", "batched", "stacked", "evaluate", "reproduce"} <= set(sections)
    assert not any("error" in s for s in sections.values()), {k: s.get("error") for k, s in sections.items()}
    names = " ".join(t["name"] for t in report["targets"])
    for tag in ("(a)", "(b)", "(c)", "(d)", "(e)", "(g)", "(l)"):
        assert tag in names
    batched = sections["batched"]["rows"][0]
    assert batched["identical metrics and summaries"] is True
    assert all(row["identical metrics, summaries and parameters"] for row in sections["stacked"]["rows"])
    exps = {(e["engine"], e["scan"]): e["time exponent"] for e in sections["scaling"]["exponents"]}
    assert exps[("kernel", "d")] is not None and exps[("kernel", "N")] is not None
    assert sections["memory"]["rows"][0]["peak RSS MB"] > 10  # a real child process was measured
    evaluate = {r["formulas"]: r for r in sections["evaluate"]["rows"]}
    assert set(evaluate) == {"previous", "now"} and evaluate["now"]["peak RSS MB"] > 10
    same = next(t for t in report["targets"] if t["name"].startswith("(g) largest relative difference"))
    assert same["met"], same  # the previous formulas, patched back in, give the same errors
    assert "targets" in result.stdout


def test_bench_sections_that_train_run_on_the_device(tmp_path, device):
    out = tmp_path / "b.json"
    result = runner.invoke(app, ["bench", "--tiny", "--only", "batched", "--only", "step_floor", "--device", device,
                                 "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["device"] == device
    rows = [row for s in report["sections"].values() for row in s["rows"]]
    step_rows = 4 if HAS_NUMBA and device == "cpu" else 2  # unfused (and fused, CPU-only) x one run, a batch
    assert len(rows) == 1 + step_rows and all(row["device"] == device for row in rows)
    if device == "cpu":  # bit for bit on the CPU; CUDA may pick its kernels by batch size (equal to rounding)
        assert report["sections"]["batched"]["rows"][0]["identical metrics and summaries"] is True
    assert result.stdout.count(f"| {device} |") == 1 + step_rows  # the device column of the printed tables


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_bench_on_cuda_without_a_gpu_is_one_line():
    line = refused(["bench", "--tiny", "--only", "batched", "--device", "cuda"])
    assert "--device cuda" in line and "no CUDA device" in line and "allowed: auto, cpu" in line
    assert "'tpu'" in refused(["bench", "--tiny", "--device", "tpu"])


def test_bench_rejects_unknown_section(tmp_path):
    result = runner.invoke(app, ["bench", "--tiny", "--only", "nope", "--out", str(tmp_path / "b.json")])
    assert result.exit_code == 2
    assert "nope" in result.output


def test_bench_extra_section_from_a_file(tmp_path):
    extra = tmp_path / "my_bench.py"
    extra.write_text("def bench_me(quick):\n    return {'rows': [{'quick': quick, 'x': 1.5}], 'targets': []}\n")
    out = tmp_path / "b.json"
    result = runner.invoke(app, ["bench", "--tiny", "--only", "my_bench", "--extra", f"{extra}:bench_me",
                                 "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = json.loads(out.read_text())["sections"]["my_bench"]["rows"]
    assert rows == [{"device": "cpu", "quick": True, "x": 1.5}]  # an extra is not told --device


def test_target_verdicts():
    assert Target("a", 1200.0, ">=", 1000).verdict() == "met"
    assert "0.50x" in Target("a", 500.0, ">=", 1000).verdict()
    assert Target("b", 2.5, "<=", 1.5, "x").verdict() == "missed by 1x"
    assert Target("c", None, "<=", 1).met is None
    assert Size("tiny").quick and not Size("full").quick


def test_step_floor_reports_unfused_and_fused_steps_and_both_targets():
    pytest.importorskip("numba")
    res = step_floor(Size("tiny"))
    steps = [r["step"] for r in res["rows"]]
    assert steps == ["one run (R = 1), unfused", "one run (R = 1), fused",
                     "batch of 4 (per batch step), unfused", "batch of 4 (per batch step), fused"]
    assert all(r["step / floor"] > 0 for r in res["rows"])
    targets = {t["name"]: t for t in res["targets"]}
    assert set(targets) == {"(i) quickstart step / floor", "(i) unfused / fused step"}
    fused, unfused = res["rows"][1], res["rows"][0]
    assert targets["(i) quickstart step / floor"]["measured"] == fused["step / floor"]
    assert targets["(i) unfused / fused step"]["measured"] == pytest.approx(unfused["step ms"] / fused["step ms"])
    for t in targets.values():
        assert t["met"] or t["why"]  # a miss says why


def test_step_floor_without_numba_reports_the_unfused_step_and_why(monkeypatch):
    monkeypatch.setattr(step_floor_module, "HAS_NUMBA", False)
    res = step_floor(Size("tiny"))
    assert [r["step"] for r in res["rows"]] == ["one run (R = 1), unfused", "batch of 4 (per batch step), unfused"]
    ratio, speedup = res["targets"]
    assert ratio["measured"] == res["rows"][0]["step / floor"] and "numba" in ratio["why"]
    assert speedup["measured"] is None and "numba" in speedup["why"]


def test_fit_exponent_recovers_a_power_law():
    xs = [4, 16, 64, 256]
    assert fit_exponent(xs, [3.0 * x**1.5 for x in xs]) == pytest.approx(1.5)
    assert fit_exponent([1], [1.0]) is None


def _reference_rows(K, records):
    """The recorder's rows, built one record at a time the plain way."""
    rows = []
    for step, loss, a, s, extra in records:
        diag = np.diagonal(a)
        fin = np.isfinite(diag).any()
        scal = [("loss", loss), *extra.items(), ("attn_min", np.nanmin(diag) if fin else np.nan),
                ("attn_mean", np.nanmean(diag) if fin else np.nan)]
        rows += [(step, m, -1, -1, v) for m, v in scal]
        rows += [(step, "attn_self", k, -1, diag[k]) for k in range(K)]
        off = [(k, n) for k in range(K) for n in range(K) if k != n]
        rows += [(step, "attn_cross", k, n, a[k, n]) for k, n in off]
        rows += [(step, "A", k, -1, s[k, k]) for k in range(K)]
        rows += [(step, "B", k, n, s[k, n]) for k, n in off]
    df = pd.DataFrame(rows, columns=["step", "metric", "k", "n", "value"])
    for c in ("k", "n"):
        df[c] = df[c].astype("Int64").mask(df[c] < 0)
    return df


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_recorder_table_equals_a_record_by_record_reference():
    rng = np.random.default_rng(0)
    K = 9
    rec, records = Recorder(K), []
    for t in range(25):
        a = rng.random((K, K)) * 10.0 ** rng.uniform(-5, 5, (K, K))
        if t % 7 == 3:
            a[0, 0] = np.nan
        if t % 11 == 4:
            a[:] = np.nan
        s = rng.standard_normal((K, K))
        extra = {"test_error": float(rng.random()), "grad_norm": float(rng.random())} if t < 20 else {"grad_norm": 1.0}
        records.append((t, float(rng.random()), a, s, extra))
        rec.record(t, records[-1][1], torch.tensor(a), torch.tensor(s), extra)
    got = rec.frame()
    want = _reference_rows(K, records)
    pd.testing.assert_frame_equal(got[["step", "metric", "k", "n"]].astype(object),
                                  want[["step", "metric", "k", "n"]].astype(object))
    np.testing.assert_array_equal(got["value"].to_numpy(), want["value"].to_numpy())


def test_bench_writes_no_json_unless_asked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["bench", "--tiny", "--only", "batched"])
    assert result.exit_code == 0, result.output
    assert list(tmp_path.iterdir()) == []  # no bench.json in the working directory
    assert "no JSON report written" in result.stdout
    result = runner.invoke(app, ["bench", "--tiny", "--only", "batched", "--json", str(tmp_path / "r" / "b.json")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "r" / "b.json").read_text())["sections"]["batched"]["rows"]


def test_bench_prints_markdown_at_full_width_when_stdout_is_not_a_terminal():
    result = runner.invoke(app, ["bench", "--tiny", "--only", "batched"])  # CliRunner: not a terminal
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "| target | measured | goal | verdict |" in lines
    header = next(line for line in lines if line.startswith("| device | runs |"))
    # every column of the section on one line, none folded into 80 characters
    assert len(header) > 80 and header.count("|") == 9, header
    row = lines[lines.index(header) + 2]
    assert row.startswith("| cpu | ") and row.count("|") == 9 and "yes" in row
    rich = runner.invoke(app, ["bench", "--tiny", "--only", "batched", "--rich"])
    assert "| target |" not in rich.stdout and "targets" in rich.stdout


def test_bench_json_path_that_is_a_directory_is_one_line(tmp_path):
    result = runner.invoke(app, ["bench", "--tiny", "--only", "batched", "--json", str(tmp_path)])
    assert result.exit_code == 2
    assert "--json" in result.output and "is a directory" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_reproduce_section_splits_its_time_between_old_and_new_experiments(tmp_path):
    claims = [{"id": "P4", "experiment": "exp_threshold", "wall_s": 30.0},
              {"id": "P4a", "experiment": "exp_threshold", "wall_s": 30.0},
              {"id": "R4", "experiment": "exp_eps_axis", "wall_s": 50.0}]
    path = tmp_path / "claims.json"
    path.write_text(json.dumps({"meta": {}, "claims": claims}))
    times = experiment_times(path)
    assert times == {"exp_eps_axis": (50.0, ["R4"]), "exp_threshold": (30.0, ["P4", "P4a"])}
    assert experiment_times(tmp_path / "missing.json") == {}
    slow = summarise(2 * QUICK_TARGET_S, 0, times, BASELINE_WALL_S, timed=True, same_then=20.0)
    same, whole = slow["targets"]
    assert not same["met"] and same["measured"] == 1.5
    assert "take 30 s now against 20 s for its experiments" in same["why"]
    assert not whole["met"] and whole["measured"] == 2.0 and "50 s of the 360 s go to the 1 experiments" in whole["why"]
    landed = {r["experiment"]: r["landed since the baseline"] for r in slow["rows"]}
    assert landed == {"exp_eps_axis": True, "exp_threshold": False, "whole command": "",
                      f"whole command at the baseline ({BASELINE_COMMIT})": ""}
    fast = summarise(0.5 * QUICK_TARGET_S, 0, times, BASELINE_WALL_S, timed=False)
    assert all(t["met"] for t in fast["targets"]) and "recorded then" in fast["notes"][0]
    assert "for its whole command" in fast["notes"][1]


def test_reproduce_section_exports_the_baseline_build_from_git(tmp_path):
    src = baseline_source(tmp_path / "baseline")
    if src is None:
        pytest.skip("not a git checkout holding the baseline commit (an installed package or a shallow clone)")
    assert (src / "src" / "lipschitz_icl" / "__init__.py").is_file()


def test_a_missed_batched_speedup_says_what_bounds_it():
    assert _why_slower([100, 100], t_batch=1.0, t_seq=6.0) == ""  # met: nothing to explain
    why = _why_slower([100, 300, 200], t_batch=1.0, t_seq=2.0)
    assert "total steps / longest run = 2.0x" in why and "3.33 ms against 3.33 ms" in why
