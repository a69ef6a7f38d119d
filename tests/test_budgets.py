"""Budgets in the theory's time scale (runner.budget_steps) and censored runs."""

import pytest

from lipschitz_icl.batch import run_many
from lipschitz_icl.experiments.runner import (
    QUICKSTART_S,
    base_config,
    budget_steps,
    censored_runs,
    flat_scale_of,
    rescaled_time_to,
    with_budget,
    with_overrides,
)


def _base(*extra: str):
    return base_config(["engine.draws=32", "train.log_every=1000", *extra])


def test_quickstart_rescaled_time_is_what_the_trainer_measures():
    """The table behind every budget: the quickstart at eta L^2 = 16 reaches a relative loss of 1e-2
    at s = eta L^2 T_rel within 2% of QUICKSTART_S (the same trajectory as eta L^2 = 4)."""
    run = run_many([_base("train.lr=4", "train.eps_mode=relative", "train.eps=1e-2", "train.steps=400")])[0]
    assert run.summary["status"] == "converged"
    assert 16 * run.summary["T_rel"]["0.01"] == pytest.approx(QUICKSTART_S[1e-2], rel=0.02)
    assert rescaled_time_to(1e-2) == pytest.approx(QUICKSTART_S[1e-2])
    assert QUICKSTART_S[1e-3] < rescaled_time_to(5e-4) < QUICKSTART_S[1e-4]


def test_budget_scales_as_one_over_eta_L_squared_and_every_run_reaches_its_target():
    """Before, every run had one step budget, so the small-L runs of a group were cut off. A budget in
    rescaled time s = eta L^2 t grows as 1/(eta L^2), and every run of the group converges."""
    cfgs = [with_budget(_base(f"task.L={L}", f"name=L{L}"), 1e-2, cap=10**6) for L in (1.0, 2.0, 4.0)]
    steps = [c.train.steps for c in cfgs]
    assert steps[0] == pytest.approx(4 * steps[1], rel=0.01) and steps[1] == pytest.approx(4 * steps[2], rel=0.02)
    runs = run_many(cfgs)
    assert [r.summary["status"] for r in runs] == ["converged"] * 3 and censored_runs(runs) == []


def test_a_capped_budget_is_counted_as_censored():
    cfg = with_budget(_base("task.L=0.5", "name=slow"), 1e-2, cap=50)
    assert cfg.train.steps == 50
    run = run_many([cfg])[0]
    assert run.summary["status"] == "budget" and censored_runs([run]) == ["slow"]


def test_a_slower_geometry_gets_proportionally_more_steps():
    """Tilting the features towards each other shrinks Delta: T_f grows as 1/Delta^2 and so does the budget."""
    near = with_overrides(_base(), ["features.kind=gaussian", "features.d=5", "seed=1"])
    ratio = flat_scale_of(near, 1e-2) / flat_scale_of(_base(), 1e-2)
    assert ratio > 1.2
    assert budget_steps(near, 1e-2, 10**9) / budget_steps(_base(), 1e-2, 10**9) == pytest.approx(ratio, rel=1e-3)
