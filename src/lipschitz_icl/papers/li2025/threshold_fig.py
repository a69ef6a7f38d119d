"""The threshold readings on one page: each reading's curve against L / L* per setting, and the
located changes L_x against Delta delta (a collapse is a horizontal row of points)."""

from __future__ import annotations

import math

import numpy as np

from ... import plots
from ...experiments.runner import Context
from .threshold_absolute import ABS_EPS, predicted_curve
from .threshold_measure import LEVEL, TAU, rescaled_time


def readings_figure(ctx: Context, m: dict, stem: str) -> str:
    settings = m["settings"]
    cols = dict(zip([st.name for st in settings], plots.colors(len(settings)), strict=True))
    fig, axes = plots.figure(4, 2, width=4.4, height=3.4)
    _relative_panel(axes[0][0], m, cols)
    _absolute_panel(axes[0][1], m, cols)
    _noise_panel(axes[0][2], m, cols)
    _noise_scaling_panel(axes[0][3], m, cols)
    _step_panel(axes[1][0], m, cols)
    _collapse_panel(axes[1][1], m)
    ax = axes[1][2]
    for st in settings:
        ax.plot([], [], "o-", color=cols[st.name], label=f"{st.name} (Delta delta = {st.dd:.2f})")
    ax.legend(fontsize=7, loc="center")
    ax.axis("off")
    axes[1][3].axis("off")
    for ax in (axes[0][0], axes[0][1], axes[0][2], axes[1][0]):
        ax.axvline(1.0, color="gray", ls=":", lw=1)
    fig.tight_layout()
    return plots.save(fig, ctx.out, stem)


def _relative_panel(ax, m, cols) -> None:
    for st in m["settings"]:
        pts = [(r.config.task.L / st.L_star, rescaled_time(r)) for r in m["relative"][st.name]]
        pts = [(x, y / m["s_ref"][st.name]) for x, y in pts if y and m["s_ref"][st.name]]
        if pts:
            ax.plot(*zip(*pts, strict=True), "o-", color=cols[st.name], ms=3)
    ax.set(xscale="log", yscale="log", ylim=(0.3, 3), xlabel="L / L*", ylabel="eta L^2 T_eps / median",
           title="P4a relative eps: rescaled time (forced flat)")


def _absolute_panel(ax, m, cols) -> None:
    x = np.geomspace(0.05, 20, 200)
    for st in m["settings"]:
        ax.plot(x, predicted_curve(m["leads"][st.name], st.L_star, x) + 1, color=cols[st.name], lw=1)
        pts = [(r.config.task.L / st.L_star, r.summary["T_eps"] + 1) for r in m["absolute"][st.name]
               if r.summary.get("T_eps") is not None]
        if pts:
            ax.plot(*zip(*pts, strict=True), "o", color=cols[st.name], ms=4)
    ax.set(xscale="log", yscale="log", xlabel="L / L*", ylabel="T_eps + 1",
           title=f"P4b absolute eps = {ABS_EPS:g}: runs (o) on the invariance's curve")


def _noise_panel(ax, m, cols) -> None:
    for st in m["settings"]:
        hist = m["crossings"][st.name].history
        if hist:
            ax.plot([L / st.L_star for L, _ in hist], [a for _, a in hist], "o-", color=cols[st.name], ms=3)
    ax.axhline(LEVEL, color="k", lw=0.8)
    ax.set(xscale="log", xlabel="L / L*", ylabel="min_k Attn_k at the optimum", ylim=(0, 1.02),
           title=f"P4c label noise tau = {TAU:g}: the optimum")


def _step_panel(ax, m, cols) -> None:
    for st in m["settings"]:
        change = m["steps"].get(st.name)
        if change is None:
            continue
        pts = [(L / st.L_star, T) for L, T, _ in change.history if math.isfinite(T)]
        bad = [L / st.L_star for L, T, _ in change.history if not math.isfinite(T)]
        if pts:
            ax.plot(*zip(*pts, strict=True), "o-", color=cols[st.name], ms=3)
        if bad:
            ax.plot(bad, [1.0] * len(bad), "x", color=cols[st.name], ms=6)
    ax.set(xscale="log", yscale="log", xlabel="L / L*", ylabel="T_eps (x: unstable)",
           title="P4d fixed eta = 1: one-step saturation or instability")


def _noise_scaling_panel(ax, m, cols) -> None:
    """P4c: L_tau against tau sqrt(K/N) / (delta Delta), the settings and the tau, N, K variations; a line
    through the origin is the scaling the reading asks for."""
    pts = [(st, TAU, m["crossings"][st.name].L, cols[st.name], "o") for st in m["settings"]]
    pts += [(st, tau, c.L, "k", "s") for st, tau, c in m["variations"]]
    xs = []
    for st, tau, L_tau, c, marker in pts:
        if L_tau is None:
            continue
        x = tau * math.sqrt(st.cfg.features.K / st.cfg.prompt.N) / st.dd
        xs.append(x)
        ax.plot([x], [L_tau], marker, color=c, ms=5)
    if xs:
        grid = np.geomspace(min(xs) / 1.5, max(xs) * 1.5, 20)
        coef = float(np.median([L / x for (st, tau, L, _, _), x in zip(
            [p for p in pts if p[2] is not None], xs, strict=True)]))
        ax.plot(grid, coef * grid, "k:", lw=1, label=f"L_tau = {coef:.2f} x (median)")
        ax.legend(fontsize=7)
    ax.set(xscale="log", yscale="log", xlabel="tau sqrt(K/N) / (delta Delta)", ylabel="L_tau",
           title="P4c: L_tau (squares: tau, N, K varied)")


def _collapse_panel(ax, m) -> None:
    settings = m["settings"]
    dd = [st.dd for st in settings]
    series = {
        "P4b": [math.sqrt(ABS_EPS / st.loss0) for st in settings],
        "P4c": [m["crossings"][st.name].L for st in settings],
        "P4d": [m["steps"][st.name].L_x if st.name in m["steps"] else None for st in settings],
    }
    for (name, Lx), marker in zip(series.items(), ("o", "s", "^"), strict=True):
        pts = [(d, x * d) for d, x in zip(dd, Lx, strict=True) if x]
        if pts:
            ax.plot(*zip(*pts, strict=True), marker, label=name)
    ax.set(xscale="log", yscale="log", xlabel="Delta delta", ylabel="L_x / L* = L_x Delta delta",
           title="L_x / L* (flat: L_x ~ 1/(Delta delta))")
    ax.legend(fontsize=7)
