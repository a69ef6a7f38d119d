"""The eps axis (R4), the delta axis and the Delta-axis geometry of P5 (papers/questions/eps_axis.py,
papers/li2025/delta_axis.py and scaling.py)."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

import lipschitz_icl as li
from lipschitz_icl.analysis import creep_decelerates, min_attention
from lipschitz_icl.experiments.runner import Context
from lipschitz_icl.experiments.sizes import TINY
from lipschitz_icl.papers.li2025 import two_phases
from lipschitz_icl.papers.questions import eps_axis
from lipschitz_icl.stopping import rel_key, rel_level


def _run_with(times: dict[float, float]):
    """A stand-in run whose trainer reached each relative level at the given step (eta L^2 = 16)."""
    T_rel = {rel_key(e): int(round(t)) for e, t in times.items()}
    cfg = SimpleNamespace(train=SimpleNamespace(lr=4.0), task=SimpleNamespace(L=2.0))
    return SimpleNamespace(config=cfg, summary={"T_rel": T_rel, "status": "converged", "steps": max(T_rel.values())})


LEVELS = [rel_level(j) for j in range(1, 33)]


def test_a_power_law_in_one_over_eps_reads_as_polynomial():
    stat, interval = eps_axis.eps_axis_statistic(_run_with({e: 50.0 / e for e in LEVELS}))
    assert stat["levels_in_range"] == 9
    assert stat["eps_exponent"] == pytest.approx(1.0, abs=0.01)
    assert stat["rms_power_law"] < stat["rms_log_model"]
    # one deterministic curve: its exact slope and local slopes, no residual interval
    assert interval == {} and stat["is_power_law"]
    assert stat["local_slope_range"][0] == pytest.approx(1.0, abs=0.02) == stat["local_slope_range"][1]


def test_a_curved_eps_relation_is_no_power_law():
    """T growing as 1/eps^(1/2) below 3e-4 and as 1/eps^2 above it: a slope is fitted, the local slopes fail."""
    curved = {e: (50.0 / e**0.5 if e > 3e-4 else 50.0 / 3e-4**0.5 * (3e-4 / e) ** 2) for e in LEVELS}
    stat, _ = eps_axis.eps_axis_statistic(_run_with(curved))
    assert not stat["is_power_law"] and "no power law" in stat["power_law_test"]
    assert stat["local_slope_range"][0] < 0.7 and stat["local_slope_range"][1] > 1.5


def test_a_logarithmic_time_reads_as_logarithmic():
    stat, _ = eps_axis.eps_axis_statistic(_run_with({e: 1000.0 * math.log(10 / e) for e in LEVELS}))
    assert stat["eps_exponent"] < eps_axis.LOG_MAX
    assert stat["rms_log_model"] <= stat["rms_power_law"]
    # T = a + b log(1/eps) has local log-log slope b / (a + b log(1/eps)), here 1 / log(10/eps)
    assert stat["log_model_local_slope"] == pytest.approx(1 / (math.log(10) + math.log(10**3.5)), rel=0.02)


def test_R4_censored_at_tiny_size_names_what_would_decide_it(tmp_path):
    (res,) = eps_axis.exp_eps_axis(Context(out=tmp_path, quick=True, sizes=TINY))
    assert res.id == "R4" and res.verdict == "inconclusive" and res.censored == 1
    assert "budget" in res.undecided_because and res.figures


def test_creep_decelerates_reads_the_slope_after_T1():
    """A run whose -log(1 - min Attn_k) rises ever more slowly after T_1 (the quickstart) decelerates."""
    run = li.run(None, ["engine.draws=16", "train.steps=600", "train.eps=1e-9", "train.log_every=10"], write=False)
    assert run.summary["T_1"] is not None
    assert creep_decelerates(*min_attention(run.metrics), run.summary["T_1"])
    steps = np.arange(0, 400, 10)
    r = np.where(steps < 50, steps / 50, 1 + ((steps - 50) / 100.0) ** 2)  # a creep that speeds up after T_1
    assert not creep_decelerates(steps, 1 - np.exp(-r), 50)


def test_scaling_features_by_s_speeds_gradient_descent_by_s_to_the_sixth():
    """G = V^T V enters the step in M twice and the linear kernel once: features scaled by s move M
    s^6 faster, while delta^2 Delta^2 grows only as s^2."""
    times = []
    for scale in (1.0, 1.5):
        run = li.run(None, ["features.K=5", "features.d=5", "prompt.N=50", "engine.draws=32", f"features.scale={scale}",
                            "task.L=1", "train.lr=0.05", "train.steps=5000", "train.eps=0.5", "train.eps_mode=relative",
                            "train.log_every=1000"], write=False)
        times.append(run.summary["T_rel"][rel_key(rel_level(2))])
    assert times[0] / times[1] == pytest.approx(1.5**6, rel=0.03)


def test_P1_is_flagged_forced_and_its_six_runs_share_one_rescaled_time(tmp_path):
    """Before, P1 split 3 of 6 runs because the slow ones hit a fixed step budget. With budgets in
    rescaled time every run reaches T_1, and eta L^2 T_1 is one number up to step discretisation."""
    ctx = Context(out=tmp_path, quick=True, sizes=TINY)
    (res,) = two_phases.exp_regimes(ctx)
    assert res.forced and "eta L^2" in res.forced_reason
    s_T1 = res.statistic["s_T1_by_L"]
    missing = sum(v is None for v in s_T1.values())
    assert res.censored >= missing and res.statistic["runs_reaching_T1"] == 6 - missing
    # a run the phase reading cannot read counts both ways: the verdict stands only if it holds either way
    lo, hi = res.interval["fraction_two_phases"]
    unread = res.statistic["unread_runs"]
    assert res.censored == len(set(unread) | set(res.statistic["censored_runs"]))
    assert hi - lo == pytest.approx(len(unread) / 6)
    assert res.statistic["fraction_two_phases"] == (None if unread else lo)
    small_steps = [v for L, v in s_T1.items() if v is not None and float(L) < 3]  # eta L^2 < 9
    assert len(small_steps) >= 2 and np.ptp(small_steps) / np.mean(small_steps) < 0.1
