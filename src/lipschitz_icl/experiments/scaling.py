"""``reproduce paper`` (c): convergence times against L from L*/10 to 10 L*, and against eta,
Delta and K in the flat regime. Tests P5 of the paper and B1 of the companion write-up (so it
runs in both the paper and the blog suite); the threshold itself (P4, B3) is threshold.py's.

T_1 is the end of the fast phase and T_eps the first step with loss <= eps (relative to the
initial loss), both from the run's summary; fits are log-log with 95% intervals over seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import plots
from ..api import Run
from ..config import Config
from ..fits import Fit
from ..store import atomic_write_npy
from .claims import ClaimResult, claim
from .measure import L_star_of, breakpoint_loglog, fit_dict, safe_fit, slope_matches
from .registry import experiment
from .runner import Context, paper_base, rel_runs, run_group, with_overrides
from .uncertainty import bootstrap_loglog_slope

CRITERION_P5 = (
    "In the flat regime (L < L*), fitted log-log slopes of T_eps: against L (predicted -2), eta (-1), "
    "Delta (-2), and against K log(K/eps) (+1). Supported if every slope's 95% interval contains its "
    "prediction or lies within 0.3 of it; not supported if any interval excludes its prediction by "
    "more than 0.3.")
CRITERION_B1 = (
    "Slope of T_1 (fast phase) against L predicted -1; slope of T_eps - T_1 (slow phase) predicted -2, "
    "over all L that converge. Supported if both intervals contain the prediction (or within 0.3); not "
    "supported if either excludes it by more than 0.3.")
FORCED_B1 = (
    "At a fixed eta every L follows one trajectory in s = eta L^2 t (f = L g), and T_1 and the relative T_eps "
    "are scale-free, so both slopes are -2 wherever the steps are small: the fast phase's -1 cannot hold.")
KS = [2, 3, 4, 6, 8]  # values of K for the K log(K/eps) axis of P5


@dataclass
class LSweep:
    """The sweep over L: its runs, per run L, seed, T_1 and T_eps, the fits and the breakpoint L_b."""
    runs: list[Run]
    L: list[float]
    T1: list[int | None]
    Teps: list[int | None]
    fits: dict[str, Fit | None]
    breakpoint: float | None
    figure: str


@dataclass
class FlatAxes:
    """The flat-regime sweeps over eta, Delta and K, and their fits of T_eps."""
    runs: list[Run]
    fit_eta: Fit | None
    fit_Delta: Fit | None
    fit_KlogK: Fit | None
    L_flat: float
    figure: str


@experiment("P5", "B1", suites=("paper", "blog"))
def exp_scaling(ctx: Context) -> list[ClaimResult]:
    """(c) T_1 and T_eps against L from L*/10 to 10 L* (and against eta, Delta, K in the flat regime)."""
    cfg = paper_base(ctx, "train.eps_mode=relative", f"train.eps={ctx.sizes.eps_rel}")
    L_star = L_star_of(cfg)  # L* = 1 / (Delta delta)
    sweep = _sweep_L(ctx, cfg, L_star)
    flat = _sweep_flat_axes(ctx, cfg, L_star)
    return [_claim_p5(ctx, sweep, flat), _claim_b1(ctx, sweep)]


def _sweep_L(ctx: Context, cfg: Config, L_star: float) -> LSweep:
    S = ctx.sizes
    Ls = list(np.geomspace(L_star / 10, 10 * L_star, S.n_L))
    configs = [with_overrides(cfg, [f"task.L={L:.6g}", f"seed={ctx.seed + s}", f"name=L{L:.3g}-s{s}"])
               for L in Ls for s in range(S.seeds)]
    runs = run_group(ctx, "scaling-L", configs, "(c) T against L")
    xL = [r.config.task.L for r in runs]
    seeds = [r.config.seed for r in runs]
    T1 = [r.summary["T_1"] for r in runs]
    Te = [r.summary["T_eps"] for r in runs]
    below = [i for i, L in enumerate(xL) if L < L_star]
    above = [i for i, L in enumerate(xL) if L > L_star]

    def sub(idx, ys):
        return safe_fit([xL[i] for i in idx], [ys[i] for i in idx], [seeds[i] for i in idx])

    fits = {"T1_below": sub(below, T1), "T1_above": sub(above, T1), "Teps_below": sub(below, Te),
            "Teps_above": sub(above, Te)}
    conv = [i for i in range(len(runs)) if Te[i] is not None and T1[i] is not None]
    fits["T1_all"] = safe_fit([xL[i] for i in conv], [T1[i] for i in conv], [seeds[i] for i in conv])
    slow = [Te[i] - T1[i] if Te[i] is not None and T1[i] is not None and Te[i] > T1[i] else None
            for i in range(len(runs))]
    fits["slow_all"] = safe_fit(xL, slow, seeds)
    figure = _scaling_figure(ctx, xL, T1, Te, L_star, fits, "scaling_L")
    L_b = breakpoint_loglog(np.array([xL[i] for i in conv]), np.array([Te[i] for i in conv], dtype=float)) \
        if len(conv) >= 5 else None
    return LSweep(runs, xL, T1, Te, fits, L_b, figure)


def _sweep_flat_axes(ctx: Context, cfg: Config, L_star: float) -> FlatAxes:
    """The other axes of P5, in the flat regime."""
    L_flat = 0.5 * L_star
    flat = with_overrides(cfg, [f"task.L={L_flat:.6g}"])
    etas = [0.5, 1.0, 2.0, 4.0]
    r_eta = _axis_sweep(ctx, flat, "scaling-eta", "(c) T against eta", "train.lr", etas, lambda v: f"eta{v:g}")
    # Delta by geometry, not by scale: unit vectors v_k ~ e_k + t u (u the unit diagonal) come closer
    # as t grows, while delta = 1/sqrt(d) stays fixed for the linear class and L* = 1/(Delta delta) grows
    flat_D = with_overrides(cfg, [f"task.L={0.5 * L_star:.6g}"])
    paths = [_tilted_features(ctx, cfg.features.K, t) for t in (0.0, 0.15, 0.3, 0.45)]
    r_D = _axis_sweep(ctx, flat_D, "scaling-Delta", "(c) T against Delta", "features.path", paths,
                      lambda v: f"Delta-{Path(v).stem}")
    flat_K = with_overrides(cfg, ["features.d=8", "task.L=1.0"])  # d = 8: L* = 2 for every K
    r_K = _axis_sweep(ctx, flat_K, "scaling-K", "(c) T against K", "features.K", KS, lambda v: f"K{v}")
    eps = ctx.sizes.eps_rel
    fit_eta = safe_fit([r.config.train.lr for r in r_eta], [r.summary["T_eps"] for r in r_eta])
    fit_D = safe_fit([r.summary["Delta"] for r in r_D], [r.summary["T_eps"] for r in r_D])
    fit_K = safe_fit([k * math.log(k / eps) for k in KS], [r.summary["T_eps"] for r in r_K])
    figure = _axes_figure(ctx, r_eta, r_D, r_K, KS, eps)
    return FlatAxes(r_eta + r_D + r_K, fit_eta, fit_D, fit_K, L_flat, figure)


def _claim_p5(ctx: Context, sweep: LSweep, flat: FlatAxes) -> ClaimResult:
    fit_L = sweep.fits["Teps_below"]
    checks = {"L": slope_matches(fit_L, -2), "eta": slope_matches(flat.fit_eta, -1),
              "Delta": slope_matches(flat.fit_Delta, -2), "KlogK": slope_matches(flat.fit_KlogK, 1)}
    stat = {**fit_dict(fit_L, "L"), **fit_dict(flat.fit_eta, "eta"), **fit_dict(flat.fit_Delta, "Delta"),
            **fit_dict(flat.fit_KlogK, "KlogK"), "L_flat_for_other_axes": flat.L_flat}
    return claim("P5", CRITERION_P5, stat, all(a for a, _ in checks.values()), any(b for _, b in checks.values()),
                 figures=[sweep.figure, flat.figure], runs=rel_runs(ctx, sweep.runs + flat.runs))


def _claim_b1(ctx: Context, sweep: LSweep) -> ClaimResult:
    fast, slow = sweep.fits["T1_all"], sweep.fits["slow_all"]
    m1, m2 = slope_matches(fast, -1), slope_matches(slow, -2)
    stat = {**fit_dict(fast, "fast_T1"), **fit_dict(slow, "slow_Teps_minus_T1")}
    seeds = [r.config.seed for r in sweep.runs]
    slow_T = [te - t1 if te is not None and t1 is not None else None
              for t1, te in zip(sweep.T1, sweep.Teps, strict=True)]
    interval = {"fast_T1_slope": bootstrap_loglog_slope(sweep.L, sweep.T1, seeds, seed=ctx.seed)[1],
                "slow_slope": bootstrap_loglog_slope(sweep.L, slow_T, seeds, seed=ctx.seed)[1]}
    return claim("B1", CRITERION_B1, stat, m1[0] and m2[0], m1[1] or m2[1], figures=[sweep.figure],
                 runs=rel_runs(ctx, sweep.runs), forced=True, forced_reason=FORCED_B1, interval=interval,
                 censored=sum(t is None for t in sweep.Teps))


def _scaling_figure(ctx, Ls, T1, Te, L_star, fits, stem) -> str:
    fig, axes = plots.figure(2, 1)
    for ax, T, name, key in ((axes[0][0], T1, "T_1", "T1"), (axes[0][1], Te, "T_eps", "Teps")):
        xs = [L for L, t in zip(Ls, T, strict=True) if t]
        ys = [t for t in T if t]
        ax.loglog(xs, ys, "o", ms=4, label="runs")
        for side, ls in (("below", "-"), ("above", "--")):
            f = fits.get(f"{key}_{side}")
            if f is not None:
                sel = [x for x in xs if (x < L_star) == (side == "below")]
                if sel:
                    xx = np.geomspace(min(sel), max(sel), 10)
                    ax.loglog(xx, np.exp(f.intercept) * xx**f.slope, ls, color="k",
                              label=f"{side} L*: slope {f.slope:.2f} [{f.lo:.2f}, {f.hi:.2f}]")
        ref = [x for x in xs if x < L_star]
        if ref:
            xx = np.geomspace(min(ref), max(ref), 10)
            y0 = np.median([t for x, t in zip(xs, ys, strict=True) if x == ref[0]])
            ax.loglog(xx, y0 * (xx / ref[0]) ** -2.0, ":", color="tab:red", label="theory: slope -2")
        ax.axvline(L_star, color="gray", ls=":", lw=1)
        ax.text(L_star, ax.get_ylim()[1], " L*", va="top", fontsize=8)
        ax.set(xlabel="L", ylabel=f"{name} (steps)", title=f"{name} against L")
        ax.legend(fontsize=6)
    return plots.save(fig, ctx.out, stem)


def _axis_sweep(ctx, cfg, group, label, key, values, names):
    extra = ["features.kind=file", "features.K=null", "features.d=null"] if key == "features.path" else []
    configs = [with_overrides(cfg, [*extra, f"{key}={v}", f"name={names(v)}"]) for v in values]
    return run_group(ctx, group, configs, label)


def _tilted_features(ctx: Context, K: int, t: float) -> str:
    """A (K, K) feature file: rows e_k + t u, normalised (u = ones / sqrt K); returns its path."""
    rows = np.eye(K) + t * np.ones((K, K)) / math.sqrt(K)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    path = ctx.out / "features" / f"tilt{t:g}.npy"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_npy(path, rows)
    return str(path)


def _axes_figure(ctx, r_eta, r_D, r_K, Ks, eps) -> str:
    fig, axes = plots.figure(3, 1)
    panels = (
        (axes[0][0], [r.config.train.lr for r in r_eta], r_eta, "eta", -1.0),
        (axes[0][1], [r.summary["Delta"] for r in r_D], r_D, "Delta", -2.0),
        (axes[0][2], [k * math.log(k / eps) for k in Ks], r_K, "K log(K/eps)", 1.0),
    )
    for ax, xs, runs, name, pred in panels:
        ys = [r.summary["T_eps"] for r in runs]
        pts = [(x, y) for x, y in zip(xs, ys, strict=True) if y]
        if pts:
            px, py = zip(*pts, strict=True)
            ax.loglog(px, py, "o-", label="measured T_eps")
            xx = np.geomspace(min(px), max(px), 10)
            ax.loglog(xx, py[0] * (xx / px[0]) ** pred, ":", color="tab:red", label=f"theory slope {pred:g}")
        ax.set(xlabel=name, ylabel="T_eps", title=f"flat regime: T_eps vs {name}")
        if pts:
            ax.legend(fontsize=7)
    return plots.save(fig, ctx.out, "scaling_eta_Delta_K")
