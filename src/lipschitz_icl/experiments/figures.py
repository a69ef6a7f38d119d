"""Figure helpers the experiments share (on top of ``lipschitz_icl.plots``)."""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator


def plain_log_ticks(ax: Axes, values: list[float]) -> None:
    """Label a log x axis at ``values`` only, in plain numbers (no overlapping minor labels)."""
    ax.xaxis.set_major_locator(FixedLocator(values))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticklabels([f"{v:g}" for v in values])
