"""Figures (matplotlib). Not imported by the core.

The plotting API (each function returns a matplotlib Figure that Jupyter shows inline; pyplot is
not used, and importing this package changes nothing in matplotlib: no backend, no rcParams):

    >>> from lipschitz_icl import plots
    >>> plots.training_curves(run)           # loss and Attn_k against step, T_1 and T_eps marked
    >>> plots.score_trajectories(run)        # A_k and B_kn against step
    >>> plots.score_heatmap(run, "M")        # final score matrix (or "Q": the trained Q)
    >>> plots.geometry_curves(run)           # ||Q||, the attention window and n_eff against step
    >>> plots.compare([run_a, run_b], metric="loss")   # runs overlaid, labelled by what differs
    >>> plots.attention_map(run)             # one prompt: the query's attention over its context
    >>> plots.time_vs_lipschitz("sweeps/l_sweep")   # T against L/L*, fits, theory slope -2
    >>> plots.phase_diagram("sweeps/lr_L")   # outcome over (L/L*, eta)
    >>> plots.time_vs_theory("sweeps/l_sweep")      # T against the theory's T_f

``figure``, ``save`` and ``colors`` are the helpers of the claims' experiments: ``save`` writes PNG,
PDF and SVG laid out for a page (``files.for_page``)."""

from __future__ import annotations

from .files import save
from .style import GRID, NotebookFigure, colors, new_figure


def figure(ncols: int = 1, nrows: int = 1, width: float = 4.2, height: float = 3.2):
    """A NotebookFigure of (nrows, ncols) panels of ``width`` x ``height`` inches, laid out by ``save``
    (tight), and its axes as an (nrows, ncols) array."""
    return new_figure(ncols, nrows, width=width, height=height, layout=None)


from .attention import attention_map  # noqa: E402
from .compare import compare  # noqa: E402
from .runs import final_score_matrix, geometry_curves, score_heatmap, score_trajectories, training_curves  # noqa: E402
from .sweeps import phase_diagram, sweep_frame, time_vs_lipschitz, time_vs_theory  # noqa: E402

__all__ = [
    "GRID", "NotebookFigure", "attention_map", "colors", "compare", "figure", "final_score_matrix", "geometry_curves",
    "phase_diagram", "save", "score_heatmap", "score_trajectories", "sweep_frame", "time_vs_lipschitz",
    "time_vs_theory", "training_curves",
]
