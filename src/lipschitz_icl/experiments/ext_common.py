"""Shared pieces of the ``reproduce extensions`` experiments: sizes, base configs, measurements."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .. import analysis
from ..threads import single_threaded_torch
from .runner import Context, base_config
from .sizes import TINY


@dataclass(frozen=True)
class ExtSizes:
    kernel_steps: int  # step budget of kernel-engine runs
    draws: int  # kernel engine count draws B
    sampled_steps: int  # step budget of sampled-engine runs
    batch: int  # prompts per step (sampled engine)
    test: int  # unseen test prompts per run
    n_grid: int  # values per sweep (L, sigma, tau, M)
    log_every: int
    kernel_samples: int  # Monte-Carlo functions for Sigma
    continuous_steps: int  # Adam steps per L (R6)
    transformer_steps: int  # Adam steps of the 2-layer 4-head transformer (R7)
    curriculum_steps: int  # step budget of each curriculum run (B7)


X_TINY = ExtSizes(kernel_steps=120, draws=8, sampled_steps=40, batch=32, test=32, n_grid=2, log_every=5,
                  kernel_samples=256, continuous_steps=30, transformer_steps=30, curriculum_steps=200)
X_QUICK = ExtSizes(kernel_steps=1000, draws=32, sampled_steps=300, batch=128, test=256, n_grid=3, log_every=10,
                   kernel_samples=1024, continuous_steps=300, transformer_steps=300, curriculum_steps=4000)
X_FULL = ExtSizes(kernel_steps=20000, draws=128, sampled_steps=3000, batch=512, test=2048, n_grid=5, log_every=20,
                  kernel_samples=4096, continuous_steps=3000, transformer_steps=4000, curriculum_steps=80000)


def ext_sizes(ctx: Context) -> ExtSizes:
    if ctx.sizes is TINY or ctx.sizes == TINY:
        return X_TINY
    return X_QUICK if ctx.quick else X_FULL


def grid(values: list[float], n: int) -> list[float]:
    """n values spread over ``values`` (its ends always included)."""
    if n >= len(values):
        return list(values)
    idx = np.unique(np.round(np.linspace(0, len(values) - 1, max(n, 2))).astype(int))
    return [values[i] for i in idx]


def single_threaded(fn):
    """Run an experiment with one torch thread (its problems are tiny)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with single_threaded_torch():
            return fn(*args, **kwargs)

    return wrapper


def kernel_base(ctx: Context, S: ExtSizes, *extra: str):
    """The quickstart setting on the kernel engine (K = 5 orthonormal, d = 5, N = 50, GD)."""
    return base_config([f"engine.draws={S.draws}", f"train.steps={S.kernel_steps}", f"train.log_every={S.log_every}",
                        f"task.kernel_samples={S.kernel_samples}", f"eval.functions={S.test}", f"seed={ctx.seed}",
                        *extra])


def sampled_base(ctx: Context, S: ExtSizes, *extra: str):
    """A small sampled-engine setting: K = 4 orthonormal features in d = 4, N = 16, linear L = 2."""
    return base_config([
        "features.K=4", "features.d=4", "prompt.N=16", "engine.kind=sampled", f"engine.batch={S.batch}",
        f"train.steps={S.sampled_steps}", f"train.log_every={S.log_every}", f"eval.functions={S.test}",
        f"task.kernel_samples={S.kernel_samples}", f"seed={ctx.seed}", *extra,
    ])


def first_step(series, level: float, above: bool = True) -> int | None:
    """First recorded step at which a step-indexed series reaches level (>= when above, else <=)."""
    return analysis.first_step(series.index.to_numpy(), series.to_numpy(), level, above)


def tail_mean(series, frac: float = 0.2) -> float:
    """Mean of the last ``frac`` of the recorded values (smooths minibatch noise)."""
    vals = series.dropna().to_numpy()
    if vals.size == 0:
        return math.nan
    return float(vals[-max(1, int(round(frac * vals.size))):].mean())


def loglog_slope(x: list[float], y: list[float]) -> tuple[float, float]:
    """Least-squares slope of log y on log x and its standard error (nan when undetermined)."""
    pts = [(a, b) for a, b in zip(x, y, strict=True) if a and b and a > 0 and b > 0 and math.isfinite(b)]
    if len(pts) < 2:
        return math.nan, math.nan
    lx, ly = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    A = np.column_stack([np.ones_like(lx), lx])
    coef, *_ = np.linalg.lstsq(A, ly, rcond=None)
    if len(pts) == 2:
        return float(coef[1]), math.nan
    resid = ly - A @ coef
    s2 = float(resid @ resid) / (len(pts) - 2)
    se = math.sqrt(s2 / float(((lx - lx.mean()) ** 2).sum()))
    return float(coef[1]), se


def phase_ratio(attn_min, K: int, hi: float = 0.9) -> tuple[float, int | None, int | None, int | None]:
    """(rho, T_start, T_half, T_hi): rho = (T_hi - T_half) / (T_half - T_start), the slow creep from
    1/2 to ``hi`` over the fast rise to 1/2; T_start is the first step 10% of the way from 1/K to 1/2
    (so a plateau before the rise is not counted as the fast phase). rho is nan when a level is
    not reached."""
    start_level = 1 / K + 0.1 * (0.5 - 1 / K)
    t_s, t_h, t_9 = first_step(attn_min, start_level), first_step(attn_min, 0.5), first_step(attn_min, hi)
    if t_s is None or t_h is None or t_9 is None:
        return math.nan, t_s, t_h, t_9
    return (t_9 - t_h) / max(t_h - t_s, 1), t_s, t_h, t_9


def plain_log_ticks(ax, values: list[float]) -> None:
    """Label a log x axis at ``values`` only, in plain numbers (no overlapping minor labels)."""
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    ax.xaxis.set_major_locator(FixedLocator(values))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticklabels([f"{v:g}" for v in values])
