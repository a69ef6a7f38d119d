"""analysis.py: phase detection on synthetic curves with planted answers, and on a real run."""

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import lipschitz_icl as li
from lipschitz_icl.analysis import (
    analyze,
    count_oscillations,
    first_step,
    phase_rates,
)
from lipschitz_icl.api import analyze_run
from lipschitz_icl.cli import app

runner = CliRunner()


def tidy(steps, scalars: dict, self_attn: np.ndarray, cross: dict) -> pd.DataFrame:
    """A metrics table in the recorder's format. self_attn (T, K); cross {(k, n): (T,)}."""
    rows = []
    for i, s in enumerate(steps):
        for name, vals in scalars.items():
            rows.append((s, name, pd.NA, pd.NA, vals[i]))
        for k in range(self_attn.shape[1]):
            rows.append((s, "attn_self", k, pd.NA, self_attn[i, k]))
        for (k, n), vals in cross.items():
            rows.append((s, "attn_cross", k, n, vals[i]))
    df = pd.DataFrame(rows, columns=["step", "metric", "k", "n", "value"])
    df["k"], df["n"] = df["k"].astype("Int64"), df["n"].astype("Int64")
    return df


# --------------------------------------------------------------------------- primitives


def test_first_step():
    steps, vals = [0, 10, 20, 30], [0.1, 0.4, 0.6, 0.9]
    assert first_step(steps, vals, 0.5) == 20
    assert first_step(steps, vals, 0.95) is None
    assert first_step(steps, vals, 0.4) == 10  # >= level
    assert first_step(steps, vals[::-1], 0.4, above=False) == 20


def test_count_oscillations_planted():
    """cos over three periods from a maximum: 5 turns (min, max, min, max, min), swing 2 A;
    noise below the tolerance adds none."""
    t = np.linspace(0, 3, 601)
    rng = np.random.default_rng(0)
    amp = 0.05
    v = amp * np.cos(2 * np.pi * t) + 1e-5 * rng.standard_normal(t.size)
    turns, swing = count_oscillations(v, 1e-4)
    assert turns == 5
    assert swing == pytest.approx(2 * amp, rel=1e-2)
    # a monotone decay with noise below tol: no turns
    assert count_oscillations(np.exp(-t) + 1e-5 * rng.standard_normal(t.size), 1e-4) == (0, 0.0)
    # a single dip of depth 0.02 in a decline: two turns, amplitude = the rebound
    w = np.concatenate([np.linspace(1, 0.5, 50), np.linspace(0.5, 0.52, 10), np.linspace(0.52, 0.1, 50)])
    turns, swing = count_oscillations(w, 1e-3)
    assert turns == 2 and swing == pytest.approx(0.02, abs=1e-9)
    # a rebound smaller than tol is not a turn
    assert count_oscillations(w, 0.05)[0] == 0


@pytest.mark.parametrize("n_periods", [1, 2, 4])
def test_count_oscillations_counts_periods(n_periods):
    t = np.linspace(0, n_periods, 200 * n_periods + 1)
    v = 0.01 * np.sin(2 * np.pi * t)  # a maximum and a minimum inside every period
    assert count_oscillations(v, 1e-4) == (2 * n_periods, pytest.approx(0.02, rel=1e-3))


def test_phase_rates_single_exponential_is_one_phase():
    """1 - Attn = (1 - a0) e^{-r t}: the rate is r before and after T_1, so one phase."""
    steps = np.arange(0, 1001, 10)
    r, a0 = 0.004, 0.2
    a = 1 - (1 - a0) * np.exp(-r * steps)
    df = tidy(steps, {"attn_min": a}, a[:, None], {})
    T_1 = first_step(steps, a, 0.5)
    out = phase_rates(df, T_1)
    assert out["rate_fast"] == pytest.approx(r) and out["rate_slow"] == pytest.approx(r)
    assert out["n_phases"] == 1


def planted_run(T1=40, osc_pairs=((0, 1), (2, 0)), periods=3, K=3, last=4000, test_final=5e-4):
    """1 - Attn_k falls exponentially at a fast rate until T1 (where it is exactly 1/2), then at
    the slow rate 0.001. The pairs in osc_pairs oscillate after T1: Attn_{k->n} is the decaying
    share times (1 + sin / 2) over ``periods`` full periods, which has 2 turns per period."""
    steps = np.arange(0, last + 1, 10)
    slow = 0.001
    fast = np.log((1 - 1 / K) / 0.5) / T1
    gap = np.where(steps < T1, (1 - 1 / K) * np.exp(-fast * steps), 0.5 * np.exp(-slow * (steps - T1)))
    a = 1 - gap
    cross = {}
    for k in range(K):
        for n in range(K):
            if k != n:
                c = gap / (K - 1)
                if (k, n) in osc_pairs:
                    phase = np.clip(steps - T1, 0, None) / (last - T1) * periods
                    c = c * (1 + 0.5 * np.sin(2 * np.pi * phase))
                cross[(k, n)] = c
    loss = 0.3 * gap**2
    test = np.concatenate([loss[:-1], [test_final]])
    return steps, tidy(steps, {"loss": loss, "test_error": test, "attn_min": a}, np.repeat(a[:, None], K, 1), cross)


def test_analyze_planted_run():
    steps, df = planted_run()
    res = analyze(df, eps=1e-3)
    assert res["T_1"] == 40  # planted: Attn = 1/2 exactly at T1 (a recorded step)
    gap_eps = np.sqrt(1e-3 / 0.3)  # loss = 0.3 (1 - Attn)^2 <= eps
    assert res["T_eps"] == 40 + int(np.ceil(np.log(0.5 / gap_eps) / 0.001 / 10)) * 10
    assert res["T_1"] < res["T_eps"]
    assert res["n_phases"] == 2
    assert res["rate_fast"] == pytest.approx(np.log((2 / 3) / 0.5) / 40)
    assert res["rate_slow"] == pytest.approx(0.001)
    assert res["oscillations"] == 2 * 3 * 2  # 2 turns per period, 3 periods, 2 pairs
    assert res["oscillating_pairs"] == 2 and res["osc_per_pair"] == {"0->1": 6, "2->0": 6}
    assert 0.05 < res["osc_amplitude"] < 0.25  # the first swing: about 0.25 (3/2 - 1/2) minus decay
    assert res["loss_monotone"] is True
    assert res["verdict"] == "converged" and res["final_test_error"] == 5e-4
    json.dumps(res)  # JSON-ready


def test_analyze_no_oscillation_and_verdicts():
    _, df = planted_run(osc_pairs=(), test_final=5e-3)
    res = analyze(df, eps=1e-3)
    assert res["oscillations"] == 0 and res["oscillating_pairs"] == 0 and res["osc_amplitude"] == 0.0
    assert res["verdict"] == "not converged"  # unseen-function error above eps
    res = analyze(df, eps=1e-3, eps_attn=1e-9)
    assert res["verdict"] == "not converged"
    # a loss bump breaks monotonicity
    bumped = df.copy()
    idx = bumped.index[(bumped.metric == "loss") & (bumped.step == 1000)]
    bumped.loc[idx, "value"] *= 2
    res = analyze(bumped, eps=1e-3)
    assert res["loss_monotone"] is False and res["loss_rises"] == 1


def test_t1_never_reached_is_one_phase():
    steps = np.arange(0, 101, 10)
    a = np.linspace(0.2, 0.4, steps.size)
    df = tidy(steps, {"loss": 1 - a, "test_error": 1 - a, "attn_min": a}, a[:, None], {})
    res = analyze(df)
    assert res["T_1"] is None and res["T_eps"] is None and res["n_phases"] == 1 and res["rate_slow"] is None
    assert res["verdict"] == "not converged"


def test_exact_T1_from_summary_inside_bracket():
    _, df = planted_run(T1=40)
    assert analyze(df, {"T_1": 37})["T_1"] == 37  # inside the recorded bracket (30, 40]: refined
    assert analyze(df, {"T_1": 20})["T_1"] == 40  # outside: the table wins


# --------------------------------------------------------------------------- a real run


@pytest.fixture(scope="module")
def quickstart_run(tmp_path_factory):
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = tmp_path_factory.mktemp("runs") / "qs"
    return li.run(root / "configs" / "quickstart.yaml", out=out)


def test_quickstart_analysis(quickstart_run):
    run = quickstart_run
    res = analyze(run.metrics, run.summary)
    assert run.summary["status"] == "converged"
    assert res["T_1"] == run.summary["T_1"] and res["T_eps"] == run.summary["T_eps"]
    assert res["T_1"] < res["T_eps"]
    assert res["verdict"] == "converged"
    assert res["final_min_attn"] >= 0.9


def test_cli_analyze_writes_analysis_json(quickstart_run, tmp_path):
    d = quickstart_run.dir
    res = runner.invoke(app, ["analyze", str(d)])
    assert res.exit_code == 0, res.output
    for text in ("T_1", "T_ε", "oscillations", "converged"):
        assert text in res.stdout
    saved = json.loads((d / "analysis.json").read_text())
    assert saved == json.loads(json.dumps(analyze_run(d, write=False)))
    assert saved["verdict"] == "converged" and saved["T_1"] < saved["T_eps"]


@pytest.mark.parametrize("make", ["missing", "empty", "file"])
def test_cli_analyze_bad_paths(tmp_path, make, quickstart_run):
    bad = tmp_path / "bad"
    if make == "empty":
        bad.mkdir()
    elif make == "file":
        bad.write_text("x")
    res = runner.invoke(app, ["analyze", str(quickstart_run.dir), str(bad)])
    assert res.exit_code == 2
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.output
    assert str(bad) in res.stderr


def test_turning_points_are_where_the_extremes_are():
    from lipschitz_icl.analysis import count_oscillations, turning_points

    x = np.linspace(0, 6 * np.pi, 600)
    v = np.sin(x)
    tp = turning_points(v, 0.05)
    assert len(tp) == count_oscillations(v, 0.05)[0] == 6  # sin over three periods
    assert np.allclose(np.abs(v[tp]), 1.0, atol=1e-3)


def test_count_phases_finds_a_planted_rate_change():
    from lipschitz_icl.analysis import count_phases

    steps = np.arange(0, 2001)
    one = 1 - 0.8 * np.exp(-0.01 * steps)  # a single exponential approach: one phase
    r = np.where(steps < 200, 0.02 * steps, 4.0 + 0.0005 * (steps - 200))  # rate drops 40x at 200
    two = 1 - np.exp(-r)
    assert count_phases(steps, one) == 1
    assert count_phases(steps, two) == 2
