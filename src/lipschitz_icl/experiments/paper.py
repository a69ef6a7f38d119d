"""``reproduce paper``: the claims of Li, Duan, Liang (P1-P8) and of the predecessor (H1, H2).

Each experiment fixes its criterion in code before it runs, measures, and derives the verdict
from the numbers. The setting is the quickstart's (K = 5 orthonormal features in d = 5, N = 50,
linear class, kernel engine, gradient descent) unless an experiment says otherwise.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .. import plots
from ..analysis import analyze_run_object, count_phases, first_step
from ..problem import build_problem
from ..store import atomic_write_npy
from ..theory import eta_max, theory_of
from .claims import ClaimResult, claim
from .measure import (
    breakpoint_loglog,
    fit_dict,
    intervals_overlap,
    loss_times,
    safe_fit,
    slope_matches,
)
from .runner import Context, base_config, experiment, rel_runs, run_group, with_overrides


def _base(ctx: Context, *extra: str):
    S = ctx.sizes
    return base_config([f"engine.draws={S.draws}", f"train.steps={S.budget}", f"train.log_every={S.log_every}",
                        f"seed={ctx.seed}", *extra])


def _L_star(cfg) -> float:
    return theory_of(build_problem(cfg)).L_star


def _analysis(run) -> dict:
    return analyze_run_object(run)


# ----------------------------------------------------------------------------- (a), (b): P1


def _curves_figure(ctx: Context, runs, title: str, stem: str) -> str:
    fig, axes = plots.figure(2, 2)
    cols = plots.colors(len(runs))
    for run, c in zip(runs, cols, strict=True):
        label = f"L={run.config.task.L:.3g}"
        loss = run.series("loss")
        amin, amean = run.series("attn_min"), run.series("attn_mean")
        for ax in axes[0]:
            ax.plot(loss.index, loss.values, color=c, label=label)
        axes[0][1].set_yscale("log")
        axes[1][0].plot(amin.index, amin.values, color=c, label=f"{label} min")
        axes[1][0].plot(amean.index, amean.values, color=c, ls="--")
        axes[1][1].plot(amin.index, 1 - amin.values, color=c)
        axes[1][1].set_yscale("log")
    axes[0][0].set(title=f"{title}: loss", xlabel="step")
    axes[0][1].set(title="loss (log y)", xlabel="step")
    axes[1][0].set(title="min_k Attn_k (solid), mean (dashed)", xlabel="step", ylim=(0, 1.02))
    axes[1][1].set(title="1 - min_k Attn_k (log y)", xlabel="step")
    axes[0][0].legend(fontsize=7)
    return plots.save(fig, ctx.out, stem)


@experiment("P1")
def exp_regimes(ctx: Context) -> list[ClaimResult]:
    """(a) flat regime, (b) sharp regime: loss and attention against step; P1 two phases."""
    criterion = ("For 3 values of L below L* and 3 above, the analysis counts phases (fast rise of Attn_k up to "
                 "T_1, then a slower creep; n_phases = 2 when the fast rate exceeds the slow one by the analysis "
                 "factor). Supported if >= 80% of runs that reach T_1 show 2 phases; not supported if <= 20%.")
    cfg = _base(ctx, "train.eps_mode=relative", "train.eps=1e-3")
    L_star = _L_star(cfg)
    factors = {"flat": (0.3, 0.5, 0.7), "sharp": (1.5, 3.0, 6.0)}
    runs = {}
    for regime, fs in factors.items():
        configs = [with_overrides(cfg, [f"task.L={f * L_star:.6g}", f"name={regime}-L{f * L_star:.3g}"]) for f in fs]
        runs[regime] = run_group(ctx, f"regimes-{regime}", configs, f"(a,b) {regime} regime")
    figs = [_curves_figure(ctx, runs[r], f"{r} regime", f"regimes_{r}") for r in runs]
    all_runs = runs["flat"] + runs["sharp"]
    phases = {f"{r.config.task.L:.3g}": _analysis(r)["n_phases"] for r in all_runs}
    reached = [r for r in all_runs if r.summary["T_1"] is not None]
    frac = sum(_analysis(r)["n_phases"] == 2 for r in reached) / len(reached) if reached else math.nan
    stat = {"L_star": L_star, "runs_reaching_T1": len(reached), "fraction_two_phases": frac,
            "n_phases_by_L": phases}
    return [claim("P1", criterion, stat, frac >= 0.8, frac <= 0.2, figures=figs, runs=rel_runs(ctx, all_runs))]


# ----------------------------------------------------------------------------- (c): P4, P5, B1, B3


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


@experiment("P4", "P5", "B1", "B3")
def exp_scaling(ctx: Context) -> list[ClaimResult]:
    """(c) T_1 and T_eps against L from L*/10 to 10 L* (and against eta, Delta, K in the flat regime)."""
    S = ctx.sizes
    crit_p4 = ("Fit log T_eps against log L separately below and above L* (95% intervals over seeds). Supported if "
               "the two slopes' intervals do not overlap and the best single breakpoint of a two-segment log-log "
               "fit lies within a factor 3 of L*; not supported if the intervals overlap (one power law across "
               "L*) or the breakpoint is more than a factor 10 away from L*.")
    crit_p5 = ("In the flat regime (L < L*), fitted log-log slopes of T_eps: against L (predicted -2), eta (-1), "
               "Delta (-2), and against K log(K/eps) (+1). Supported if every slope's 95% interval contains its "
               "prediction or lies within 0.3 of it; not supported if any interval excludes its prediction by "
               "more than 0.3.")
    crit_b1 = ("Slope of T_1 (fast phase) against L predicted -1; slope of T_eps - T_1 (slow phase) predicted -2, "
               "over all L that converge. Supported if both intervals contain the prediction (or within 0.3); not "
               "supported if either excludes it by more than 0.3.")
    crit_b3 = ("The measured breakpoint L_b of T_eps(L) is compared with sqrt(d/n), n = N context examples, and with "
               "L* = 1/(Delta delta). Supported if L_b is within a factor 2 of sqrt(d/N) and closer to it than to "
               "L* (in log); not supported if L_b is closer to L* or more than a factor 4 from sqrt(d/N).")
    cfg = _base(ctx, "train.eps_mode=relative", f"train.eps={S.eps_rel}")
    L_star = _L_star(cfg)
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
    fig_L = _scaling_figure(ctx, xL, T1, Te, L_star, fits, "scaling_L")

    ok = [i for i in conv]
    L_b = breakpoint_loglog(np.array([xL[i] for i in ok]), np.array([Te[i] for i in ok], dtype=float)) \
        if len(ok) >= 5 else None

    # the other axes of P5, in the flat regime
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
    Ks = [2, 3, 4, 6, 8]
    flat_K = with_overrides(cfg, ["features.d=8", "task.L=1.0"])  # d = 8: L* = 2 for every K
    r_K = _axis_sweep(ctx, flat_K, "scaling-K", "(c) T against K", "features.K", Ks, lambda v: f"K{v}")
    fit_eta = safe_fit([r.config.train.lr for r in r_eta], [r.summary["T_eps"] for r in r_eta])
    fit_D = safe_fit([r.summary["Delta"] for r in r_D], [r.summary["T_eps"] for r in r_D])
    eps = S.eps_rel
    fit_K = safe_fit([k * math.log(k / eps) for k in Ks], [r.summary["T_eps"] for r in r_K])
    fig_axes = _axes_figure(ctx, r_eta, r_D, r_K, Ks, eps)

    # P4
    overlap = intervals_overlap(fits["Teps_below"], fits["Teps_above"])
    near = L_b is not None and L_star / 3 <= L_b <= 3 * L_star
    far = L_b is not None and not (L_star / 10 <= L_b <= 10 * L_star)
    stat4 = {"L_star": L_star, "breakpoint": L_b, **fit_dict(fits["Teps_below"], "Teps_below"),
             **fit_dict(fits["Teps_above"], "Teps_above"), **fit_dict(fits["T1_below"], "T1_below"),
             **fit_dict(fits["T1_above"], "T1_above"), "censored_runs": sum(t is None for t in Te)}
    p4 = claim("P4", crit_p4, stat4, overlap is False and near, overlap is True or far, figures=[fig_L],
               runs=rel_runs(ctx, runs))
    # P5
    checks = {"L": slope_matches(fits["Teps_below"], -2), "eta": slope_matches(fit_eta, -1),
              "Delta": slope_matches(fit_D, -2), "KlogK": slope_matches(fit_K, 1)}
    stat5 = {**fit_dict(fits["Teps_below"], "L"), **fit_dict(fit_eta, "eta"), **fit_dict(fit_D, "Delta"),
             **fit_dict(fit_K, "KlogK"), "L_flat_for_other_axes": L_flat}
    p5 = claim("P5", crit_p5, stat5, all(a for a, _ in checks.values()), any(b for _, b in checks.values()),
               figures=[fig_L, fig_axes], runs=rel_runs(ctx, runs + r_eta + r_D + r_K))
    # B1
    m1, m2 = slope_matches(fits["T1_all"], -1), slope_matches(fits["slow_all"], -2)
    stat1 = {**fit_dict(fits["T1_all"], "fast_T1"), **fit_dict(fits["slow_all"], "slow_Teps_minus_T1")}
    b1 = claim("B1", crit_b1, stat1, m1[0] and m2[0], m1[1] or m2[1], figures=[fig_L], runs=rel_runs(ctx, runs))
    # B3
    d, N = cfg.features.d, cfg.prompt.N
    blog_t = math.sqrt(d / N)
    if L_b is None:
        s3, r3 = False, False
    else:
        closer_blog = abs(math.log(L_b / blog_t)) < abs(math.log(L_b / L_star))
        s3 = closer_blog and L_b / blog_t <= 2 and blog_t / L_b <= 2
        r3 = (not closer_blog) or max(L_b / blog_t, blog_t / L_b) > 4
    stat3 = {"breakpoint": L_b, "sqrt_d_over_N": blog_t, "L_star": L_star, "d": d, "N": N}
    b3 = claim("B3", crit_b3, stat3, s3, r3, figures=[fig_L], runs=rel_runs(ctx, runs))
    return [p4, p5, b1, b3]


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


# ----------------------------------------------------------------------------- (d): P6, P7


@experiment("P6", "P7")
def exp_tuned(ctx: Context) -> list[ClaimResult]:
    """(d) step size set per L to the theory's largest stable value, checked by the run."""
    S = ctx.sizes
    crit6 = ("eta_max(L) = 2 / lambda_max of the loss Hessian at Q = 0, for L from L*/4 to 4 L*. Supported if the "
             "log-log slope of eta_max against L is negative (95% interval below 0) and runs at 0.9 eta_max lose "
             "loss monotonically in >= 80% of cases; not supported if the slope's interval includes or exceeds 0, "
             "or fewer than 50% of the runs at 0.9 eta_max are monotone.")
    crit7 = ("Runs at eta = 0.9 eta_max(L). Compare the median steps to reach an absolute loss eps of flat-regime "
             "runs (L < L*) and sharp-regime runs (L > L*) at a small eps (1e-4) and a large eps (1e-2). Supported "
             "if flat runs are faster at the small eps and sharp runs faster at the large eps; not supported if the "
             "same regime is faster at both.")
    cfg = _base(ctx, "train.eps=1e-6", f"train.steps={S.budget}")
    L_star = _L_star(cfg)
    Ls = [f * L_star for f in (0.25, 0.5, 2.0, 4.0)] if ctx.quick else [f * L_star for f in (0.25, 0.5, 0.7, 1.5,
                                                                                              2.0, 4.0)]
    emax = {L: eta_max(build_problem(with_overrides(cfg, [f"task.L={L:.6g}"]))) for L in Ls}
    stable = [with_overrides(cfg, [f"task.L={L:.6g}", f"train.lr={0.9 * emax[L]:.6g}", f"name=L{L:.3g}-0.9"])
              for L in Ls]
    unstable = [with_overrides(cfg, [f"task.L={L:.6g}", f"train.lr={2.5 * emax[L]:.6g}", f"name=L{L:.3g}-2.5",
                                     f"train.steps={min(S.budget, 500)}"]) for L in Ls]
    r_st = run_group(ctx, "tuned-0.9", stable, "(d) eta = 0.9 eta_max")
    r_un = run_group(ctx, "tuned-2.5", unstable, "(d) eta = 2.5 eta_max")
    fit = safe_fit(Ls, [emax[L] for L in Ls])
    mono = [bool(_analysis(r)["loss_monotone"]) for r in r_st]
    mono_un = [bool(_analysis(r)["loss_monotone"]) for r in r_un]
    frac = sum(mono) / len(mono)
    stat6 = {**fit_dict(fit, "eta_max_vs_L"), "eta_max": {f"{L:.3g}": emax[L] for L in Ls},
             "monotone_at_0.9": frac, "monotone_at_2.5": sum(mono_un) / len(mono_un)}
    fig = _tuned_figure(ctx, Ls, emax, r_st, r_un, L_star)
    p6 = claim("P6", crit6, stat6, fit is not None and fit.hi < 0 and frac >= 0.8,
               fit is None or fit.hi >= 0 or frac < 0.5, figures=[fig], runs=rel_runs(ctx, r_st + r_un))
    times = {eps: {} for eps in (1e-4, 1e-2)}
    for r in r_st:
        for eps, t in loss_times(r, list(times)).items():
            times[eps][r.config.task.L] = t

    def med(eps, flat):
        vals = [t for L, t in times[eps].items() if (L < L_star) == flat]
        if not vals or any(t is None for t in vals):
            return None
        return float(np.median(vals))

    m = {(eps, fl): med(eps, fl) for eps in times for fl in (True, False)}
    stat7 = {f"{'flat' if fl else 'sharp'}_T_eps{eps:g}": v for (eps, fl), v in m.items()}
    if None in m.values():
        s7 = r7 = False
    else:
        flat_small = m[(1e-4, True)] < m[(1e-4, False)]
        sharp_large = m[(1e-2, False)] < m[(1e-2, True)]
        s7 = flat_small and sharp_large
        r7 = (m[(1e-4, True)] < m[(1e-4, False)]) == (m[(1e-2, True)] < m[(1e-2, False)])
    p7 = claim("P7", crit7, stat7, s7, r7, figures=[fig], runs=rel_runs(ctx, r_st))
    return [p6, p7]


def _tuned_figure(ctx, Ls, emax, r_st, r_un, L_star) -> str:
    fig, axes = plots.figure(3, 1)
    axes[0][0].loglog(Ls, [emax[L] for L in Ls], "o-")
    axes[0][0].axvline(L_star, color="gray", ls=":")
    axes[0][0].set(xlabel="L", ylabel="eta_max = 2/lambda_max", title="largest stable step size")
    for ax, runs, title in ((axes[0][1], r_st, "eta = 0.9 eta_max"), (axes[0][2], r_un, "eta = 2.5 eta_max")):
        for r, c in zip(runs, plots.colors(len(runs)), strict=True):
            loss = r.series("loss")
            ax.semilogy(loss.index, loss.values, color=c, label=f"L={r.config.task.L:.3g}")
        ax.set(xlabel="step", ylabel="loss", title=title)
        ax.legend(fontsize=7)
    return plots.save(fig, ctx.out, "tuned_step_size")


# ----------------------------------------------------------------------------- (e): P2


@experiment("P2")
def exp_oscillations(ctx: Context) -> list[ClaimResult]:
    """(e) irrelevant-feature attention over time, with detected oscillations marked."""
    crit = ("Over the fast phase [0, T_1], compare how far the irrelevant scores B_{k,n} move with how far the "
            "target scores A_k move: R = mean |B_{k,n}(T_1) - B_{k,n}(0)| / mean |A_k(T_1) - A_k(0)|, over an "
            "orthonormal and a gaussian (non-orthogonal) feature set, below and above L*. Supported if R < 1 in "
            "every run; not supported if R >= 1 in every run. Oscillations of Attn_{k->n} after T_1 are counted "
            "and reported (the claim says they can occur, so their absence does not refute it).")
    cfg = _base(ctx, "train.log_every=1", "train.steps=1500", "train.eps_mode=relative", "train.eps=1e-3")
    configs = []
    for kind in ("orthonormal", "gaussian"):
        base = with_overrides(cfg, [f"features.kind={kind}"])
        L_star = _L_star(base)
        for f in (0.5, 2.0):
            configs.append(with_overrides(base, [f"task.L={f * L_star:.6g}", f"name={kind}-{f:g}Lstar"]))
    runs = run_group(ctx, "oscillations", configs, "(e) irrelevant attention")
    ratios, osc = {}, {}
    for r in runs:
        T1 = r.summary["T_1"]
        A, B = r.per_feature("A"), r.per_feature("B")
        if T1 is None:
            ratios[r.config.name] = None
            continue
        dA = (A.loc[T1] - A.iloc[0]).abs().mean()
        dB = (B.loc[T1] - B.iloc[0]).abs().mean()
        ratios[r.config.name] = float(dB / dA) if dA > 0 else None
        osc[r.config.name] = _analysis(r)["oscillations"]
    vals = [v for v in ratios.values() if v is not None]
    fig = _oscillation_figure(ctx, runs)
    stat = {"score_ratio_R": ratios, "oscillations_after_T1": osc}
    return [claim("P2", crit, stat, bool(vals) and all(v < 1 for v in vals) and len(vals) == len(runs),
                  bool(vals) and all(v >= 1 for v in vals), figures=[fig], runs=rel_runs(ctx, runs))]


def _oscillation_figure(ctx, runs) -> str:
    from ..analysis import turning_points

    fig, axes = plots.figure(len(runs), 2, width=3.4)
    for j, r in enumerate(runs):
        cross = r.per_feature("attn_cross")
        B = r.per_feature("B")
        steps = cross.index.to_numpy()
        for (k, n), c in zip([c for c in cross.columns if c[0] == 0], plots.colors(r.summary["K"] - 1), strict=True):
            vals = cross[(k, n)].to_numpy()
            axes[0][j].plot(steps, vals, color=c, lw=1, label=f"n={n}")
            tp = turning_points(vals, 1e-4)
            axes[0][j].plot(steps[tp], vals[tp], "x", color="tab:red", ms=4)
            axes[1][j].plot(steps, B[(k, n)].to_numpy(), color=c, lw=1)
        if r.summary["T_1"] is not None:
            for ax in axes[:, j]:
                ax.axvline(r.summary["T_1"], color="gray", ls=":")
        axes[0][j].set(title=f"{r.config.name}\nAttn_(0->n) (x: turning points)", xlabel="step", xscale="log")
        axes[1][j].set(title="B_(0,n) = v_n^T Q v_0", xlabel="step", xscale="log")
        axes[0][j].legend(fontsize=6)
    return plots.save(fig, ctx.out, "irrelevant_attention")


# ----------------------------------------------------------------------------- (f), (g): P8, P3


@experiment("P8", "P3")
def exp_beyond(ctx: Context) -> list[ClaimResult]:
    """(f) gaussian features and nonlinear classes; (g) error on unseen functions per class."""
    crit8 = ("For orthonormal and gaussian features and the classes linear, relu_net, rbf, sinusoid, each at "
             "L = 0.5 L* and 2 L* of that setting: a run passes if the analysis finds two phases and the run "
             "converges (loss <= eps). Supported if >= 80% of the non-(orthonormal, linear) settings pass; not "
             "supported if <= 40% pass.")
    crit3 = ("Among those runs that reached loss <= eps: final min_k Attn_k >= 1 - eps_attn (0.9) and error on "
             "fresh functions of the same class <= 1.5 eps. Supported if >= 90% of converged runs satisfy both; "
             "not supported if < 50%.")
    S = ctx.sizes
    cfg = _base(ctx, "train.eps_mode=relative", "train.eps=1e-3", "task.kernel_samples=2048",
                f"train.steps={S.budget * 2}")
    classes = ["linear", "relu_net", "rbf", "sinusoid"]
    configs = []
    for kind in ("orthonormal", "gaussian"):
        for cls in classes:
            base = with_overrides(cfg, [f"features.kind={kind}", f"task.kind={cls}", "task.L=1"])
            L_star = _L_star(base)  # delta does not depend on L: every class is rescaled to L
            for f in (0.5, 2.0):
                configs.append(with_overrides(base, [f"task.L={f * L_star:.6g}", f"name={kind}-{cls}-{f:g}Lstar"]))
    runs = run_group(ctx, "beyond", configs, "(f,g) classes and features")
    rows = []
    for r in runs:
        a = _analysis(r)
        eps_abs = r.config.train.eps * r.series("loss").iloc[0]
        rows.append({
            "name": r.config.name, "features": r.config.features.kind, "class": r.config.task.kind,
            "L_over_Lstar": r.config.task.L / r.summary["L_star"], "n_phases": a["n_phases"],
            "converged": r.summary["status"] == "converged", "min_attn": r.summary["min_attn"],
            "test_error": r.summary.get("final_test_error"), "eps": eps_abs,
        })
    beyond_rows = [x for x in rows if not (x["features"] == "orthonormal" and x["class"] == "linear")]
    passed = [x["n_phases"] == 2 and x["converged"] for x in beyond_rows]
    frac8 = sum(passed) / len(passed)
    conv = [x for x in rows if x["converged"]]
    ok3 = [x["min_attn"] is not None and x["min_attn"] >= 0.9 and x["test_error"] is not None
           and x["test_error"] <= 1.5 * x["eps"] for x in conv]
    frac3 = sum(ok3) / len(ok3) if ok3 else math.nan
    fig = _beyond_figure(ctx, runs, rows)
    stat8 = {"fraction_passing": frac8, "settings": {x["name"]: {"n_phases": x["n_phases"],
                                                                 "converged": x["converged"]} for x in rows}}
    stat3 = {"converged_runs": len(conv), "fraction_attn_and_error_ok": frac3,
             "per_run": {x["name"]: {"min_attn": x["min_attn"], "test_error": x["test_error"], "eps": x["eps"]}
                         for x in rows}}
    return [
        claim("P8", crit8, stat8, frac8 >= 0.8, frac8 <= 0.4, figures=[fig], runs=rel_runs(ctx, runs)),
        claim("P3", crit3, stat3, bool(ok3) and frac3 >= 0.9, bool(ok3) and frac3 < 0.5, figures=[fig],
              runs=rel_runs(ctx, runs)),
    ]


def _beyond_figure(ctx, runs, rows) -> str:
    fig, axes = plots.figure(3, 1)
    classes = sorted({x["class"] for x in rows})
    cols = dict(zip(classes, plots.colors(len(classes)), strict=True))
    for r in runs:
        ls = "-" if r.config.features.kind == "orthonormal" else "--"
        amin = r.series("attn_min")
        lw = 1.5 if r.config.task.L > r.summary["L_star"] else 0.8
        axes[0][0].plot(amin.index, amin.values, ls, color=cols[r.config.task.kind], lw=lw)
        loss = r.series("loss")
        axes[0][1].semilogy(loss.index, loss.values / loss.values[0], ls, color=cols[r.config.task.kind], lw=lw)
    for c in classes:
        axes[0][0].plot([], [], color=cols[c], label=c)
    axes[0][0].plot([], [], "k-", label="orthonormal")
    axes[0][0].plot([], [], "k--", label="gaussian")
    axes[0][0].set(title="min_k Attn_k (thick: 2 L*, thin: L*/2)", xlabel="step", xscale="log")
    axes[0][0].legend(fontsize=6)
    axes[0][1].set(title="loss / initial loss", xlabel="step", xscale="log")
    names = [x["name"].replace("orthonormal", "orth").replace("gaussian", "gaus") for x in rows]
    test = [x["test_error"] / x["eps"] if x["test_error"] is not None else np.nan for x in rows]
    axes[0][2].barh(range(len(rows)), test, color=[cols[x["class"]] for x in rows])
    axes[0][2].axvline(1.0, color="k", ls=":")
    axes[0][2].set_yticks(range(len(rows)), names, fontsize=5)
    axes[0][2].set(title="unseen-function error / eps (P3)", xscale="log")
    return plots.save(fig, ctx.out, "beyond_linear")


# ----------------------------------------------------------------------------- (h): H1, H2


@experiment("H1", "H2")
def exp_predecessor(ctx: Context) -> list[ClaimResult]:
    """(h) the predecessor's balanced and imbalanced features (linear class, orthonormal features)."""
    crit1 = ("Balanced features (uniform p), L = 2: supported if the analysis finds 2 phases and the final loss is "
             "<= eps (near-zero error); not supported if it finds 1 phase or the run does not converge.")
    crit2 = ("Imbalanced features (p_max = 0.6 on feature 0): per feature k, T_half(k) = first step at which "
             "1 - Attn_k is half its initial value; phases of each Attn_k curve counted by analysis.count_phases. "
             "Supported if the dominant feature reaches it first and the rare features' phase count is at "
             "least the dominant's; not supported if a rare feature reaches it first.")
    S = ctx.sizes
    cfg = _base(ctx, f"train.steps={S.budget * 2}")
    bal = with_overrides(cfg, ["name=balanced"])
    imb = with_overrides(cfg, ["name=imbalanced", "features.probs=imbalanced", "features.p_max=0.6"])
    r_bal, r_imb = run_group(ctx, "predecessor", [bal, imb], "(h) balanced / imbalanced")
    a_bal = _analysis(r_bal)
    th = _gap_halving_times(r_imb)
    rare = [t for k, t in th.items() if k != 0]
    dominant_first = th[0] is not None and all(t is None or t > th[0] for t in rare)
    rare_first = any(t is not None and (th[0] is None or t < th[0]) for t in rare)
    per_phase = _per_feature_phases(r_imb)
    more_phases = all(per_phase[k] >= per_phase[0] for k in per_phase if k != 0)
    fig = _predecessor_figure(ctx, r_bal, r_imb)
    return [
        claim("H1", crit1, {"n_phases": a_bal["n_phases"], "final_loss": r_bal.summary["final_loss"],
                            "status": r_bal.summary["status"]},
              a_bal["n_phases"] == 2 and r_bal.summary["status"] == "converged",
              a_bal["n_phases"] < 2 or r_bal.summary["status"] != "converged", figures=[fig],
              runs=rel_runs(ctx, [r_bal])),
        claim("H2", crit2, {"T_half_by_feature": th, "phases_by_feature": per_phase,
                            "status": r_imb.summary["status"]},
              dominant_first and more_phases, rare_first, figures=[fig], runs=rel_runs(ctx, [r_imb])),
    ]


def _gap_halving_times(run) -> dict[int, int | None]:
    """Per feature k, the first recorded step at which 1 - Attn_k is half its initial value."""
    att = run.attention()
    steps = att.index.to_numpy()
    out = {}
    for k in att.columns:
        gap = 1 - att[k].to_numpy()
        out[int(k)] = first_step(steps, gap, 0.5 * gap[0], above=False)
    return out


def _per_feature_phases(run) -> dict[int, int]:
    """Phases of each feature's own Attn_k curve (analysis.count_phases)."""
    att = run.attention()
    steps = att.index.to_numpy()
    return {int(k): count_phases(steps, att[k].to_numpy()) for k in att.columns}


def _predecessor_figure(ctx, r_bal, r_imb) -> str:
    fig, axes = plots.figure(2, 1)
    for ax, r, title in ((axes[0][0], r_bal, "balanced features"), (axes[0][1], r_imb, "imbalanced (p_0 = 0.6)")):
        att = r.attention()
        for k, c in zip(att.columns, plots.colors(len(att.columns)), strict=True):
            ax.plot(att.index, att[k], color=c, label=f"Attn_{k}" + (" (dominant)" if k == 0 and r is r_imb else ""))
        ax.set(title=title, xlabel="step", xscale="symlog", ylim=(0, 1.02))
        ax.legend(fontsize=7)
    return plots.save(fig, ctx.out, "predecessor_H1_H2")


PAPER_EXPERIMENTS = [exp_regimes, exp_scaling, exp_tuned, exp_oscillations, exp_beyond, exp_predecessor]
