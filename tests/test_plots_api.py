"""The plotting API (lipschitz_icl.plots) on a tiny run and a tiny sweep: figure content,
legends, log-axis tick labels that never overlap, and no pyplot state left behind."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

import lipschitz_icl as li
from lipschitz_icl import plots
from lipschitz_icl.errors import UserInputError
from lipschitz_icl.plots.style import MAX_LOG_TICKS, OUTCOME_COLORS, log_axis, new_figure
from lipschitz_icl.sweep import run_configs
from lipschitz_icl.theory import flat_time_scale

QUICKSTART = Path(__file__).resolve().parents[1] / "configs" / "quickstart.yaml"
TINY = ["train.eps=2e-2", "train.log_every=5", "engine.draws=32", "eval.functions=32", "train.steps=300"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """The quickstart cut short: reaches T_1 and T_eps within 300 steps (under a second)."""
    out = tmp_path_factory.mktemp("run") / "quick"
    return li.run(li.load_config(QUICKSTART, TINY), out=out)


@pytest.fixture(scope="module")
def tiny_sweep(tmp_path_factory):
    """4 values of L x 2 step sizes x 2 seeds, in process; eta = 0.02 runs out of steps."""
    out = tmp_path_factory.mktemp("sweep") / "s"
    cfgs = [li.load_config(QUICKSTART, [*TINY, f"task.L={L}", f"train.lr={lr}", f"seed={s}"])
            for L, lr, s in itertools.product((0.8, 1.2, 2.0, 3.0), (1.0, 0.02), (0, 1))]
    run_configs(cfgs, out, workers=1)
    return out


def _legend_texts(ax) -> list[str]:
    legend = ax.get_legend()
    return [t.get_text() for t in legend.get_texts()] if legend else []


def _tick_labels_overlap(fig: Figure) -> list[str]:
    """Names of log axes whose rendered major tick labels overlap, or that label fewer than two
    or more than MAX_LOG_TICKS ticks."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    bad = []
    for ax in fig.axes:
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            if axis.get_scale() != "log":
                continue
            lo, hi = sorted(ax.get_xlim() if name == "x" else ax.get_ylim())
            boxes = [t.label1.get_window_extent(renderer) for t in axis.get_major_ticks()
                     if t.label1.get_visible() and t.label1.get_text() and lo <= t.get_loc() <= hi]
            if not 2 <= len(boxes) <= MAX_LOG_TICKS or any(a.overlaps(b) for a, b in itertools.combinations(boxes, 2)):
                bad.append(f"{ax.get_title()}:{name}")
    return bad


def test_training_curves_draw_the_recorded_loss_and_attention(tiny_run):
    fig = plots.training_curves([tiny_run, tiny_run])
    assert isinstance(fig, Figure) and len(fig.axes) == 4
    loss_ax, attn_ax = fig.axes[0], fig.axes[2]  # subplots are row-major: row 0 = loss
    loss = tiny_run.series("loss")
    line = loss_ax.get_lines()[0]
    np.testing.assert_array_equal(line.get_xdata(), loss.index.to_numpy())
    np.testing.assert_allclose(line.get_ydata(), loss.to_numpy())
    assert line.get_marker() not in (None, "None", "")  # recorded points visible: no false plateaus
    attn = tiny_run.attention()
    data = [ln for ln in attn_ax.get_lines() if ln.get_label().startswith("Attn")]
    assert len(data) == attn.shape[1]
    np.testing.assert_allclose(data[0].get_ydata(), attn[attn.columns[0]].to_numpy())
    assert loss_ax.get_yscale() == "log"


def test_training_curves_label_t1_and_teps_in_the_legend(tiny_run):
    T_1, T_eps = tiny_run.summary["T_1"], tiny_run.summary["T_eps"]
    assert T_1 is not None and T_eps is not None
    texts = _legend_texts(plots.training_curves(tiny_run).axes[0])
    assert any("T$_1$" in t and t.endswith(f"= {T_1}") for t in texts), texts
    assert any("T$_\\epsilon$" in t and t.endswith(f"= {T_eps}") for t in texts), texts


def test_training_curves_from_a_run_directory_with_log_steps(tiny_run):
    fig = plots.training_curves(tiny_run.dir, log_steps=True)
    assert fig.axes[0].get_xscale() == "log"
    assert min(fig.axes[0].get_lines()[0].get_xdata()) > 0  # step 0 has no place on a log axis
    assert _tick_labels_overlap(fig) == []


def test_no_pyplot_figure_is_left_open(tiny_run, tiny_sweep):
    before = plt.get_fignums()
    plots.training_curves(tiny_run)
    plots.score_heatmap(tiny_run)
    plots.phase_diagram(tiny_sweep)
    assert plt.get_fignums() == before


def test_score_trajectories_match_the_recorded_A_and_B(tiny_run):
    fig = plots.score_trajectories(tiny_run)
    a_ax, b_ax = fig.axes[0], fig.axes[1]
    A, B = tiny_run.per_feature("A"), tiny_run.per_feature("B")
    a_lines = [ln for ln in a_ax.get_lines() if ln.get_label().startswith("A$")]
    b_lines = [ln for ln in b_ax.get_lines() if ln.get_label().startswith("B$")]
    assert len(a_lines) == A.shape[1] and len(b_lines) == B.shape[1]
    np.testing.assert_allclose(a_lines[2].get_ydata(), A[2].to_numpy())
    np.testing.assert_allclose(b_lines[0].get_ydata(), B[B.columns[0]].to_numpy())
    assert any(t.startswith("T$_1$") for t in _legend_texts(a_ax))


def test_score_heatmap_of_M_and_of_Q(tiny_run):
    M = plots.final_score_matrix(tiny_run)
    np.testing.assert_allclose(np.diag(M), tiny_run.per_feature("A").iloc[-1].to_numpy())
    image = plots.score_heatmap(tiny_run, "M").axes[0].get_images()[0]
    np.testing.assert_allclose(image.get_array(), M)
    assert image.norm.vmin == -image.norm.vmax  # symmetric colour scale about 0
    q_image = plots.score_heatmap(tiny_run.dir, "Q").axes[0].get_images()[0]  # params.pt read back
    np.testing.assert_allclose(q_image.get_array(), tiny_run.params["Q"].numpy())


def test_score_heatmap_refuses_an_unknown_matrix(tiny_run):
    with pytest.raises(UserInputError, match="which must be 'M'.*or 'Q'"):
        plots.score_heatmap(tiny_run, "K")


def test_time_vs_lipschitz_plots_each_run_with_fits_and_the_theory_slope(tiny_sweep):
    frame = plots.sweep_frame(tiny_sweep)
    assert len(frame) == 16 and set(frame["status"]) == {"converged", "budget"}
    ax = plots.time_vs_lipschitz(tiny_sweep).axes[0]
    points = [ln for ln in ax.get_lines() if ln.get_label().startswith("runs")]
    x = np.concatenate([ln.get_xdata() for ln in points])
    reached = frame.dropna(subset=["T_eps"])
    np.testing.assert_allclose(np.sort(x), np.sort(reached["L_over_Lstar"].to_numpy()))
    texts = _legend_texts(ax)
    assert any(t.startswith("fit flat") for t in texts) and any(t.startswith("fit sharp") for t in texts)
    (theory,) = [ln for ln in ax.get_lines() if ln.get_label().startswith("theory")]
    xs, ys = theory.get_xdata(), theory.get_ydata()
    assert np.log(ys[-1] / ys[0]) / np.log(xs[-1] / xs[0]) == pytest.approx(-2.0)
    assert ax.get_xscale() == ax.get_yscale() == "log"


def test_phase_diagram_colours_each_point_by_its_outcome(tiny_sweep):
    ax = plots.phase_diagram(tiny_sweep).axes[0]
    markers = [ln for ln in ax.get_lines() if ln.get_marker() == "s"]
    assert len(markers) == 8  # 4 L x 2 eta; the two seeds of a point share a marker
    by_eta = {float(ln.get_ydata()[0]): ln.get_color() for ln in markers}
    assert by_eta == {1.0: OUTCOME_COLORS["converged"], 0.02: OUTCOME_COLORS["budget"]}
    assert {"converged", "budget", "L = L*"} <= set(_legend_texts(ax))


def test_time_vs_theory_puts_each_run_at_its_T_f(tiny_sweep):
    frame = plots.sweep_frame(tiny_sweep).dropna(subset=["T_eps"])
    expected = sorted(flat_time_scale(int(r.K), r.eps, r.lr, r.delta, r.L, r.Delta) for r in frame.itertuples())
    ax = plots.time_vs_theory(tiny_sweep).axes[0]
    dots = [ln for ln in ax.get_lines() if ln.get_linestyle() == "None"]
    np.testing.assert_allclose(np.sort(np.concatenate([ln.get_xdata() for ln in dots])), expected)
    assert any(t.startswith("slope 1") for t in _legend_texts(ax))


def test_sweep_figures_accept_runs_and_refuse_a_table_without_the_columns(tiny_run, tiny_sweep):
    assert len(plots.sweep_frame([tiny_run, tiny_run.dir])) == 2
    with pytest.raises(UserInputError, match="lacks L_star"):
        plots.sweep_frame(pd.DataFrame({"L": [1.0]}))


def test_log_tick_labels_never_overlap(tiny_run, tiny_sweep):
    figures = [plots.training_curves(tiny_run, log_steps=True), plots.time_vs_lipschitz(tiny_sweep),
               plots.phase_diagram(tiny_sweep), plots.time_vs_theory(tiny_sweep)]
    ranges = [(0.3, 3.0), (0.9, 1.7), (1.0, 1.05), (2, 60), (1.0, 1e6), (1e-3, 2e2), (0.05, 40), (1, 1e12)]
    for lo, hi in ranges:  # short and long ranges
        fig, axes = new_figure(1, 1)
        axes[0, 0].plot([lo, hi], [lo, hi])
        axes[0, 0].set_title(f"{lo}-{hi}")
        log_axis(axes[0, 0], "x")
        log_axis(axes[0, 0], "y")
        figures.append(fig)
    for fig in figures:
        assert _tick_labels_overlap(fig) == []


def test_the_overlap_check_sees_matplotlib_default_minor_labels():
    """The check above can fail: matplotlib's default log formatter labels minor ticks on a
    short range, and on a narrow axis those labels run into each other."""
    fig = Figure(figsize=(1.6, 1.6))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ax.plot([0.3, 3.0], [1, 2])
    ax.set_xscale("log")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [t.label1.get_window_extent(renderer) for t in ax.xaxis.get_minor_ticks() if t.label1.get_text()]
    assert any(a.overlaps(b) for a, b in itertools.combinations(boxes, 2))


def test_bad_arguments_and_missing_metrics_are_named(tiny_run, tiny_sweep):
    with pytest.raises(UserInputError, match="time must be one of T_eps, T_1, got 'T_2'"):
        plots.time_vs_lipschitz(tiny_sweep, time="T_2")
    with pytest.raises(UserInputError, match="time must be one of"):
        plots.time_vs_theory(tiny_sweep, time="steps")
    no_scores = dataclasses.replace(tiny_run, metrics=tiny_run.metrics[~tiny_run.metrics.metric.isin(["A", "B"])])
    with pytest.raises(UserInputError, match="no 'A' metric recorded"):
        plots.score_trajectories(no_scores)  # as for the transformer model, which records no A, B


def test_time_vs_lipschitz_of_T1(tiny_sweep):
    ax = plots.time_vs_lipschitz(tiny_sweep, time="T_1").axes[0]
    assert ax.get_ylabel().startswith("T$_1$")
    y = np.concatenate([ln.get_ydata() for ln in ax.get_lines() if ln.get_label().startswith("runs")])
    np.testing.assert_allclose(np.sort(y), np.sort(plots.sweep_frame(tiny_sweep)["T_1"].dropna().to_numpy()))


def test_saved_figures_come_as_png_pdf_and_svg(tmp_path):
    fig, axes = plots.figure()
    axes[0][0].plot([1, 2], [3, 4])
    assert plots.save(fig, tmp_path, "f") == "figures/f.png"
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == ["f.pdf", "f.png", "f.svg"]
    assert (tmp_path / "figures" / "f.svg").read_text().lstrip().startswith("<?xml")
