"""Figure helpers the experiments share (on top of ``lipschitz_icl.plots``): hand-set log ticks, and
captions attached to an experiment's figures."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

from .claims import ClaimResult
from .runner import Context

Experiment = Callable[[Context], list[ClaimResult]]


def plain_log_ticks(ax: Axes, values: list[float]) -> None:
    """Label a log x axis at ``values`` only, in plain numbers (no overlapping minor labels)."""
    ax.xaxis.set_major_locator(FixedLocator(values))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticklabels([f"{v:g}" for v in values])


def captioned(captions: Mapping[str, str]) -> Callable[[Experiment], Experiment]:
    """Decorate an experiment so that each figure of its results gets the caption ``captions`` holds for
    the figure's stem (``figures/<stem>.png``), unless the result already has one. A caption says what is
    plotted, what the reader should look for and what would contradict the claim."""

    def wrap(fn: Experiment) -> Experiment:
        @functools.wraps(fn)
        def wrapper(ctx: Context) -> list[ClaimResult]:
            results = fn(ctx)
            for r in results:
                for f in r.figures:
                    if not r.captions.get(f) and Path(f).stem in captions:
                        r.captions[f] = captions[Path(f).stem]
            return results

        return wrapper

    return wrap
