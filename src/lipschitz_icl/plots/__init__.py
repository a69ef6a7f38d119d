"""Figures (matplotlib, headless). Not imported by the core.

The plotting API (each function returns a matplotlib Figure; pyplot is not used):

    >>> from lipschitz_icl import plots
    >>> plots.training_curves(run)           # loss and Attn_k against step, T_1 and T_eps marked
    >>> plots.score_trajectories(run)        # A_k and B_kn against step
    >>> plots.score_heatmap(run, "M")        # final score matrix (or "Q": the trained Q)
    >>> plots.geometry_curves(run)           # ||Q||, the attention window and n_eff against step
    >>> plots.time_vs_lipschitz("sweeps/l_sweep")   # T against L/L*, fits, theory slope -2
    >>> plots.phase_diagram("sweeps/lr_L")   # outcome over (L/L*, eta)
    >>> plots.time_vs_theory("sweeps/l_sweep")      # T against the theory's T_f

``figure``, ``save`` and ``colors`` below are the helpers of the claims' experiments."""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from ..store import atomic_write_bytes  # noqa: E402
from .style import tidy_log_axes  # noqa: E402

plt.rcParams.update({"figure.dpi": 110, "axes.grid": True, "grid.alpha": 0.3, "font.size": 9})


def figure(ncols: int = 1, nrows: int = 1, width: float = 4.2, height: float = 3.2):
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)
    return fig, axes


def save(fig, out_dir: Path, stem: str) -> str:
    """Save as PNG, PDF and SVG under out_dir/figures; return the PNG's path relative to out_dir.
    Log axes left to matplotlib's ticks get ``style.tidy_log_axes``'s (no overlapping labels)."""
    tidy_log_axes(fig)
    fig_dir = Path(out_dir) / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    for ext in ("png", "pdf", "svg"):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, metadata={"Date": None} if ext == "svg" else None)
        atomic_write_bytes(fig_dir / f"{stem}.{ext}", buf.getvalue())  # never half a figure on disk
    plt.close(fig)
    return f"figures/{stem}.png"


def colors(n: int):
    cmap = plt.get_cmap("viridis")
    return [cmap(i / max(1, n - 1) * 0.9) for i in range(n)]


from .runs import final_score_matrix, geometry_curves, score_heatmap, score_trajectories, training_curves  # noqa: E402
from .sweeps import phase_diagram, sweep_frame, time_vs_lipschitz, time_vs_theory  # noqa: E402

__all__ = [
    "colors", "figure", "final_score_matrix", "geometry_curves", "phase_diagram", "save", "score_heatmap",
    "score_trajectories", "sweep_frame", "time_vs_lipschitz", "time_vs_theory", "training_curves",
]
