"""The Collins et al. suite (CL1-CL6): end to end at the TINY size, and its statistics on planted data."""

import numpy as np
import pandas as pd
import pytest
import torch
from claims_snapshot import check as check_snapshot
from figure_layout import checked_figures
from test_reproduce import assert_budget_runs_censored

from lipschitz_icl.experiments import experiments_for, run_experiments
from lipschitz_icl.experiments.claims import INCONCLUSIVE, PAPER_OF, VERDICTS
from lipschitz_icl.experiments.runner import Context
from lipschitz_icl.experiments.sizes import TINY
from lipschitz_icl.papers.collins2024.reading import DOWN, UP, direction
from lipschitz_icl.papers.collins2024.sweep import NW_BANDWIDTHS, best_fixed_bandwidth

IDS = ["CL1", "CL2", "CL3", "CL4", "CL5", "CL6"]


def test_the_collins_suite_runs_at_tiny_size(tmp_path, monkeypatch):
    ctx = Context(out=tmp_path, quick=True, sizes=TINY)
    with checked_figures(monkeypatch) as layout:
        claims = run_experiments(ctx, experiments_for(["collins"]))
    assert not layout, layout
    assert [c.id for c in claims] == IDS and all(PAPER_OF[c.id] == "collins2024" for c in claims)
    for c in claims:
        assert c.verdict in VERDICTS and c.statistic and c.paper == "collins2024"
        assert c.figures and all((tmp_path / f).is_file() for f in c.figures)
        assert all("look for" in c.captions.get(f, "").lower() for f in c.figures), (c.id, c.captions)
        assert c.verdict != INCONCLUSIVE or c.undecided_because
        assert all(len(pd.read_csv(tmp_path / f)) > 0 for f in c.data)
    sweep = pd.read_csv(tmp_path / "data" / "collins_sweep.csv")
    assert set(sweep["model"]) == {"softmax", "linear"} and set(sweep["axis"]) == {"L", "tau", "N"}
    assert sweep[["Q_norm", "window", "error", "nw_error"]].notna().all().all()
    check_snapshot(claims)
    assert_budget_runs_censored(tmp_path, claims)


def _planted(sign: int, spread: float, seeds: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    values = [1.0, 2.0, 4.0, 8.0]
    return pd.DataFrame([{"seed": s, "value": v, "q": v ** (0.5 * sign) * np.exp(spread * rng.standard_normal())}
                         for s in range(seeds) for v in values])


@pytest.mark.parametrize("sign,claimed,spread,expected", [
    (UP, UP, 0.01, (True, False)),  # rises, claimed rising: supported
    (UP, DOWN, 0.01, (False, True)),  # rises, claimed falling: not supported
    (0, UP, 0.3, (False, False)),  # flat within the noise: neither
])
def test_direction_reads_a_planted_trend(sign, claimed, spread, expected):
    reading = direction(_planted(sign, spread), "q", claimed)
    assert (reading["supported"], reading["refuted"]) == expected
    if sign:
        assert reading["is_power_law"] and abs(reading["slope_read"] - 0.5 * sign) < 0.05


def test_direction_decides_nothing_with_fewer_than_five_seeds():
    reading = direction(_planted(UP, 0.01, seeds=4), "q", UP)
    assert not reading["enough"] and not reading["supported"] and not reading["refuted"]


def test_best_fixed_bandwidth_is_wide_for_a_flat_function_and_narrow_for_a_steep_one():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(256, 33, 3, generator=gen, dtype=torch.float64)
    x = x / x.norm(dim=-1, keepdim=True)
    noise = torch.randn(256, 32, generator=gen, dtype=torch.float64)
    flat = best_fixed_bandwidth(x[:, :-1], noise, x[:, -1], torch.zeros(256, dtype=torch.float64))
    steep_f = 20 * x[..., 0]  # a steep linear function, no label noise
    steep = best_fixed_bandwidth(x[:, :-1], steep_f[:, :-1], x[:, -1], steep_f[:, -1])
    assert flat == NW_BANDWIDTHS[-1] and steep < 0.3 < flat
