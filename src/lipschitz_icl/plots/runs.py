"""Figures of single runs: loss and Attn_k against step, the score trajectories A_k and
B_{k,n}, heatmaps of Q or of the final score matrix M, and the attention's geometry (||Q||, the
window, n_eff) against step. Each returns a Figure."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..api import Run
from ..errors import UserInputError
from ..store import read_params
from .style import T1_STYLE, TEPS_STYLE, as_runs, log_axis, new_figure, run_label, steps_marker_every

RunsLike = Run | str | Path | Iterable[Run | str | Path]


def _mark_times(ax: Axes, run: Run, with_labels: bool) -> None:
    """Vertical lines at T_1 and T_eps of a run, labelled (for the legend) when asked."""
    for key, style, name in (("T_1", T1_STYLE, "T$_1$ (end of fast phase)"), ("T_eps", TEPS_STYLE, "T$_\\epsilon$")):
        step = run.summary.get(key)
        if step is not None:
            ax.axvline(step, label=f"{name} = {step}" if with_labels else None, **style)


def _require(run: Run, metric: str) -> None:
    if run.metrics.empty or metric not in set(run.metrics["metric"]):
        raise UserInputError(f"{run_label(run)}: no '{metric}' metric recorded (the run has none of it)")


def training_curves(runs: RunsLike, log_steps: bool = False) -> Figure:
    """Loss (log scale) and Attn_k against step, one column of two panels per run.

    What to look at: the fast phase, where every Attn_k rises while the loss falls little,
    ending at T_1 (dotted blue line, min_k Attn_k reaches analysis.t1_level); then the slow
    phase to T_eps (dashed red line, loss <= eps). Both are labelled in the legend with their
    step. Markers are the recorded steps: a straight segment between two markers is an
    interpolation, not a plateau. ``log_steps`` puts step on a log axis (step 0 is left out).
    """
    items = as_runs(runs)
    fig, axes = new_figure(len(items), 2)
    for col, run in enumerate(items):
        _require(run, "loss")
        loss_ax, attn_ax = axes[0, col], axes[1, col]
        loss = run.series("loss")
        if log_steps:
            loss = loss[loss.index > 0]
        loss_ax.plot(loss.index, loss.to_numpy(), color="black", label="loss", **steps_marker_every(len(loss)))
        attn = run.attention()
        if log_steps:
            attn = attn[attn.index > 0]
        for k in attn.columns:
            attn_ax.plot(attn.index, attn[k].to_numpy(), label=f"Attn$_{{{int(k)}}}$", **steps_marker_every(len(attn)))
        for ax in (loss_ax, attn_ax):
            _mark_times(ax, run, with_labels=ax is loss_ax)
            if log_steps:
                log_axis(ax, "x")
        log_axis(loss_ax, "y")
        loss_ax.set(ylabel="loss", title=run_label(run))
        attn_ax.set(xlabel="step", ylabel="Attn$_k$", ylim=(-0.02, 1.02))
        loss_ax.legend(fontsize=7)
        attn_ax.legend(fontsize=7, ncol=2)
    return fig


def score_trajectories(runs: RunsLike) -> Figure:
    """A_k = v_k^T Q v_k (top) and B_{k,n} = v_n^T Q v_k, n != k (bottom) against step.

    What to look at: A_k should grow (roughly logarithmically once attention concentrates)
    while the B_{k,n} stay small or turn negative; a B_{k,n} that keeps pace with A_k means
    the query of feature k does not single out its own feature. T_1 and T_eps are marked.
    Not recorded for the ``transformer`` model."""
    items = as_runs(runs)
    fig, axes = new_figure(len(items), 2)
    for col, run in enumerate(items):
        _require(run, "A")
        a_ax, b_ax = axes[0, col], axes[1, col]
        a = run.per_feature("A")
        for k in a.columns:
            a_ax.plot(a.index, a[k].to_numpy(), label=f"A$_{{{int(k)}}}$", **steps_marker_every(len(a)))
        b = run.per_feature("B")
        for k, n in b.columns:
            b_ax.plot(b.index, b[(k, n)].to_numpy(), lw=0.8, label=f"B$_{{{int(k)},{int(n)}}}$")
        for ax in (a_ax, b_ax):
            _mark_times(ax, run, with_labels=ax is a_ax)
        a_ax.set(ylabel="A$_k$ (self score)", title=run_label(run))
        b_ax.set(xlabel="step", ylabel="B$_{k,n}$ (cross score)")
        a_ax.legend(fontsize=7, ncol=2)
        if len(b.columns) <= 12:
            b_ax.legend(fontsize=6, ncol=3)
    return fig


def final_score_matrix(run: Run) -> np.ndarray:
    """M with M_kk = A_k and M_kn = B_{k,n} at the last recorded step (k: query, n: context)."""
    _require(run, "A")
    a = run.per_feature("A").iloc[-1]
    b = run.per_feature("B").iloc[-1]
    M = np.diag(a.to_numpy(np.float64))
    for (k, n), value in b.items():
        M[int(k), int(n)] = value
    return M


def _effective_q(params: dict[str, torch.Tensor]) -> np.ndarray:
    """Q (reduced), Gamma (linear attention) or the merged Q_eff = W_K^T W_Q / sqrt(d_k) (the factored forms)."""
    for name in ("Q", "Gamma"):
        if name in params:
            return params[name].detach().double().numpy()
    if "W_Q" in params and "W_K" in params:
        wq, wk = params["W_Q"].double(), params["W_K"].double()
        return (wk.T @ wq / wq.shape[0] ** 0.5).numpy()
    raise UserInputError(f"no Q in the run's parameters (has {', '.join(params)}); use which='M' or a reduced model")


def score_heatmap(run: Run | str | Path, which: str = "M") -> Figure:
    """A heatmap of the final score matrix M (``which="M"``: M_kn = v_n^T Q v_k from the last
    recorded A and B) or of the trained Q itself (``which="Q"``, from params.pt).

    What to look at: for M a dominant diagonal (each query feature scores its own feature
    highest) is what the theory's converged attention needs; the gap between the diagonal and
    the largest off-diagonal entry of a row sets how close Attn_k is to 1. The colour scale is
    symmetric about 0 (red positive, blue negative)."""
    if which not in ("M", "Q"):
        raise UserInputError(f"which must be 'M' (score matrix) or 'Q' (parameters), got {which!r}")
    (item,) = as_runs(run)
    if which == "M":
        matrix, xlabel, ylabel = final_score_matrix(item), "context feature n", "query feature k"
    else:
        params = item.params if item.params is not None else read_params(item.dir) if item.dir else None
        if params is None:
            raise UserInputError("the run has no parameters (run with write=False keeps them in run.params)")
        matrix, xlabel, ylabel = _effective_q(params), "column", "row"
    fig, axes = new_figure(1, 1)
    ax = axes[0, 0]
    ax.grid(False)
    bound = float(np.abs(matrix).max()) or 1.0
    image = ax.imshow(matrix, cmap="RdBu_r", vmin=-bound, vmax=bound)
    fig.colorbar(image, ax=ax, label=which)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=f"{which} of {run_label(item)}")
    return fig


def geometry_curves(runs: RunsLike) -> Figure:
    """||Q||_2 and ||Q||_F (top, log scale), the window r_1/2 and the attention-weighted distance to
    the query (middle), and the effective number of attended tokens n_eff (bottom) against step, one
    column per run (Q is Gamma for linear attention).

    What to look at: softmax attention that adapts sharpens, ||Q|| growing while the window and n_eff
    shrink; linear attention's window stays where its weights' shape puts it (1 on the unit sphere for
    an isotropic Gamma) however large Gamma grows. An infinite window (uniform attention, Q = 0) is not
    drawn. Needs a run recorded with eval.geometry (the default with continuous inputs)."""
    items = as_runs(runs)
    fig, axes = new_figure(len(items), 3)
    for col, run in enumerate(items):
        _require(run, "Q_norm_2")
        norm_ax, win_ax, eff_ax = axes[0, col], axes[1, col], axes[2, col]
        for ax, metrics in ((norm_ax, ("Q_norm_2", "Q_norm_F")), (win_ax, ("window", "attn_distance")),
                            (eff_ax, ("n_eff",))):
            for name in metrics:
                series = run.series(name)
                v = series.to_numpy()
                series = series[np.isfinite(v) & ((v > 0) if ax is norm_ax else True)]  # log axis: Q = 0 left out
                ax.plot(series.index, series.to_numpy(), label=name, **steps_marker_every(len(series)))
            _mark_times(ax, run, with_labels=False)
            ax.legend(fontsize=7)
        log_axis(norm_ax, "y")
        norm_ax.set(ylabel="||Q||", title=run_label(run))
        win_ax.set(ylabel="distance to the query")
        eff_ax.set(xlabel="step", ylabel="n_eff")
    return fig
