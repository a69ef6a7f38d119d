"""The phase reading of H1, P1 and P8 (phases.py): one smooth law does not pass, a fast phase then a creep does, and
where a run is cut does not move it."""

import numpy as np
import pytest

import lipschitz_icl as li
from lipschitz_icl.analysis import analyze_run_object
from lipschitz_icl.experiments.synthetic import curve_steps, logistic, power_law, single_rate, two_rates
from lipschitz_icl.phases import read_phases, read_run_phases

T = curve_steps()


@pytest.mark.parametrize("curve, expected", [
    (power_law(T, scale=16.0), 1),  # decelerates 1.95x before T_1
    (power_law(T, scale=128.0), 1),
    (logistic(T, rate=2e-2), 1),  # faster after T_1
    (single_rate(T), 1),  # one rate
    (two_rates(T), 2),
    (two_rates(T, fast=2e-3), 2),
    (power_law(T), None),  # T_1 = 3 steps: unresolved, never a verdict
])
def test_synthetic_curves(curve, expected):
    assert read_phases(T, curve).n_phases == expected


def test_a_run_stopped_before_ten_T1_is_not_read():
    curve = two_rates(T)  # T_1 = 35
    cut = T <= 300
    reading = read_phases(T[cut], curve[cut])
    assert reading.n_phases is None and "censored" in reading.why
    assert read_phases(T[T <= 350], curve[T <= 350]).n_phases == 2


def test_where_a_curve_is_cut_does_not_move_the_reading():
    curve = two_rates(T, fast=2e-3)  # T_1 = 350: read over [1750, 3500]
    readings = {read_phases(T[T <= end], curve[T <= end]).as_dict()["slow_rate"] for end in (3500, 10_000, 50_000)}
    assert len(readings) == 1


def test_kernel_runs_cut_at_two_eps_read_the_same():
    # the old rate ratio reads 1 phase at relative eps 1e-2 and 2 at 1e-3 on the same trajectory; this reading
    # uses the window [5 T_1, 10 T_1], which both runs reach
    base = ["train.eps_mode=relative", "train.steps=20000", "engine.draws=64", "eval.functions=64", "task.L=4"]
    short, long = (li.run(None, [*base, f"train.eps={eps}"], write=False) for eps in ("1e-2", "1e-3"))
    a, b = (read_run_phases(r.metrics, r.summary["T_1"]) for r in (short, long))
    assert a.n_phases == b.n_phases == 2 and a.T_1 == b.T_1 and np.isclose(a.slow_rate, b.slow_rate, rtol=1e-12)
    assert analyze_run_object(short)["n_phases"] != analyze_run_object(long)["n_phases"]
