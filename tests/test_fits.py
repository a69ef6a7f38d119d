"""fits.py: log-log slopes recover planted slopes within their 95 % intervals."""

import math

import numpy as np
import pandas as pd
import pytest

from lipschitz_icl.fits import PREDICTED_SLOPES, fit_loglog, scaling_table, t_cdf, t_quantile
from lipschitz_icl.theory import flat_time_scale


@pytest.mark.parametrize("df,q,expected", [(1, 0.975, 12.7062), (2, 0.975, 4.3027), (5, 0.975, 2.5706),
                                           (10, 0.975, 2.2281), (30, 0.975, 2.0423), (10, 0.995, 3.1693),
                                           (1e6, 0.975, 1.95996)])
def test_t_quantile_table_values(df, q, expected):
    assert t_quantile(q, df) == pytest.approx(expected, abs=1e-4)
    assert t_cdf(t_quantile(q, df), df) == pytest.approx(q, abs=1e-10)
    assert t_quantile(1 - q, df) == pytest.approx(-expected, abs=1e-4)


def planted(slope=-2.0, seeds=5, xs=(0.5, 1, 2, 4, 8), noise=0.05, rng=None):
    rng = rng or np.random.default_rng(0)
    x = np.tile(np.asarray(xs, float), seeds)
    s = np.repeat(np.arange(seeds), len(xs))
    y = 3.0 * x**slope * np.exp(noise * rng.standard_normal(x.size))
    return x, y, s


def test_exact_power_law():
    x = np.array([1.0, 2.0, 4.0, 8.0])
    fit = fit_loglog(x, 5 * x**-1.0)
    assert fit.slope == pytest.approx(-1.0) and fit.intercept == pytest.approx(math.log(5))
    assert fit.r2 == pytest.approx(1.0) and fit.lo == pytest.approx(-1.0) and fit.hi == pytest.approx(-1.0)
    assert fit.method == "ols" and fit.n == 4


@pytest.mark.parametrize("use_seeds", [False, True])
def test_planted_slope_within_interval(use_seeds):
    x, y, s = planted(rng=np.random.default_rng(3))
    fit = fit_loglog(x, y, s if use_seeds else None)
    assert fit.contains(-2.0)
    assert fit.lo < fit.slope < fit.hi and fit.hi - fit.lo < 0.2
    assert fit.method == ("seeds" if use_seeds else "ols") and fit.n_seeds == (5 if use_seeds else 0)


@pytest.mark.parametrize("use_seeds", [False, True])
def test_interval_coverage_is_about_95_percent(use_seeds):
    """Over many planted data sets the 95 % interval holds the true slope about 95 % of the time."""
    rng = np.random.default_rng(7)
    hits = 0
    trials = 300
    for _ in range(trials):
        x, y, s = planted(slope=-1.0, seeds=4, xs=(1, 2, 4), noise=0.2, rng=rng)
        hits += fit_loglog(x, y, s if use_seeds else None).contains(-1.0)
    assert 0.91 <= hits / trials <= 0.99


def test_seed_fallbacks_and_dropped_points():
    x, y, s = planted(seeds=1)
    assert fit_loglog(x, y, s).method == "ols"  # one seed: OLS interval
    x2 = np.append(x, [0.0, 2.0, np.nan])
    y2 = np.append(y, [1.0, -1.0, 1.0])
    fit = fit_loglog(x2, y2)
    assert fit.dropped == 3 and fit.n == x.size
    two = fit_loglog([1.0, 2.0], [1.0, 0.25])
    assert two.slope == pytest.approx(-2.0) and math.isnan(two.lo)  # no degrees of freedom left
    assert math.isnan(fit_loglog([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]).slope)


def test_scaling_table_recovers_flat_time_scale_slopes():
    """T_f itself has exactly the predicted slopes in L, eta and Delta."""
    rows = []
    for L in (0.25, 0.5, 1.0):
        for lr in (0.5, 1.0, 2.0):
            rows.append({"L": L, "lr": lr, "Delta": 1.0, "T": flat_time_scale(5, 1e-3, lr, 0.4, L, 1.0)})
    for Delta in (0.5, 1.0, 2.0):
        rows.append({"L": 1.0, "lr": 1.0, "Delta": Delta, "T": flat_time_scale(5, 1e-3, 1.0, 0.4, 1.0, Delta)})
    df = pd.DataFrame(rows)
    assert scaling_table(df[(df.lr == 1.0) & (df.Delta == 1.0)], "L", "T").slope == pytest.approx(PREDICTED_SLOPES["L"])
    assert scaling_table(df[df.L == 0.5], "lr", "T").slope == pytest.approx(PREDICTED_SLOPES["lr"])
    sub = df[(df.L == 1.0) & (df.lr == 1.0)]
    assert scaling_table(sub, "Delta", "T").slope == pytest.approx(PREDICTED_SLOPES["Delta"])
    with pytest.raises(KeyError, match="nope"):
        scaling_table(df, "nope", "T")


def test_scaling_table_with_seed_column_and_missing_values():
    x, y, s = planted(slope=-1.0)
    df = pd.DataFrame({"lr": x, "T_eps": y, "seed": s})
    df.loc[0, "T_eps"] = None  # a run that never converged
    fit = scaling_table(df, "lr", "T_eps", "seed")
    assert fit.method == "seeds" and fit.contains(-1.0) and fit.dropped == 1
