"""reproduce extensions: every experiment end to end at a tiny size, and verdict rules that can
give each of the three verdicts."""

import math

import numpy as np
import pandas as pd
import pytest
from claims_snapshot import check as check_snapshot
from figure_layout import checked_figures
from test_reproduce import assert_budget_runs_censored

from lipschitz_icl.experiments import experiments_for, run_experiments
from lipschitz_icl.experiments.claims import VERDICTS
from lipschitz_icl.experiments.measure import loglog_slope, phase_ratio
from lipschitz_icl.experiments.runner import Context
from lipschitz_icl.experiments.sizes import TINY


def test_every_extension_runs_at_tiny_size(tmp_path, monkeypatch):
    ctx = Context(out=tmp_path, quick=True, sizes=TINY)
    ids = []
    with checked_figures(monkeypatch) as layout:  # every figure as saved: no overlapping tick labels, no clipped title
        results = [(exp, run_experiments(ctx, [exp])) for exp in experiments_for(["extensions"])]
    assert not layout, layout
    for exp, claims in results:
        for c in claims:
            ids.append(c.id)
            assert c.id in exp.claims
            assert c.verdict in VERDICTS
            assert c.statement and c.criterion and c.statistic
            assert c.figures and all((tmp_path / f).is_file() for f in c.figures)
            # every figure has its experiment's caption (what is plotted, what to look for), not the generic one
            assert all("look for" in c.captions.get(f, "").lower() for f in c.figures), (c.id, c.captions)
            assert all((tmp_path / r / "summary.json").is_file() for r in c.runs)
            # an experiment that trains outside the run engine leaves its trajectories as tables pandas loads
            assert all(len(pd.read_csv(tmp_path / f)) > 0 for f in c.data), c.data
            assert c.as_dict()["verdict"] == c.verdict  # JSON-ready
    assert sorted(ids) == sorted(["R1", "R2", "R3a", "R3b", "R3c", "R3d", "R4", "R5", "R6", "R7", "R8", "B7"])
    check_snapshot([c for _, claims in results for c in claims])  # the numbers of tests/data/claims_tiny.json
    assert_budget_runs_censored(tmp_path, [c for _, claims in results for c in claims])
    data = {c.id: c.data for _, claims in results for c in claims}
    assert data["B7"] == ["data/B7_trajectories.csv"] and data["R6"] == ["data/R6_per_L.csv"]
    b7 = pd.read_csv(tmp_path / "data" / "B7_trajectories.csv")
    assert set(b7["schedule"]) == {"none", "curriculum"} and {"step", "target_loss", "min_attn"} <= set(b7)


def test_loglog_slope_and_phase_ratio_on_planted_data():
    x = [1.0, 2.0, 4.0, 8.0]
    s, se = loglog_slope(x, [3 * v**-2 for v in x])
    assert s == pytest.approx(-2) and se == pytest.approx(0, abs=1e-9)
    assert math.isnan(loglog_slope([1.0], [1.0])[0])
    steps = np.arange(0, 100)
    # fast rise to 1/2 in 10 steps, then 40 steps to 0.9: rho = 4
    vals = np.where(steps < 10, 0.25 + 0.025 * steps, 0.5 + 0.01 * (steps - 10))
    rho, t_s, t_h, t_9 = phase_ratio(pd.Series(vals, index=steps), K=4)
    assert (t_h, t_9) == (10, 50) and rho == pytest.approx(40 / (10 - t_s))
    assert math.isnan(phase_ratio(pd.Series(np.full(5, 0.3)), K=4)[0])


def test_experiments_take_their_sizes_from_the_context_alone(tmp_path):
    # one size system: the context's Sizes decides, not ctx.quick (TINY gives B7 a budget of 200 steps
    # even in a context that is not quick)
    exp = next(e for e in experiments_for(["extensions"]) if "B7" in e.claims)
    (result,) = exp(Context(out=tmp_path, quick=False, sizes=TINY))
    assert result.statistic["budget"] == TINY.curriculum_steps
