"""Layout checks of a rendered matplotlib Figure, for the tests of the reproduce figures: no two tick
labels of an axis overlap, and every title lies inside the figure."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

import lipschitz_icl.plots as plots

TOLERANCE_PX = 0.5  # boxes that share no more than this are not counted as overlapping


def _shown_labels(axis) -> list:
    """The tick labels drawn on ``axis``: visible, non-empty, at a tick inside the view interval."""
    lo, hi = sorted(axis.get_view_interval())
    span = (hi - lo) * 1e-9
    ticks = [*axis.get_major_ticks(len(axis.get_majorticklocs())),
             *axis.get_minor_ticks(len(axis.get_minorticklocs()))]
    return [t.label1 for t in ticks if t.label1.get_visible() and t.label1.get_text().strip()
            and lo - span <= t.get_loc() <= hi + span]


def _overlap(a: Bbox, b: Bbox) -> bool:
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > TOLERANCE_PX) and (min(a.y1, b.y1) - max(a.y0, b.y0) > TOLERANCE_PX)


def layout_problems(fig: Figure, name: str = "figure") -> list[str]:
    """'<name>: <what>' for each pair of overlapping tick labels and each title outside the figure."""
    if not isinstance(fig.canvas, FigureCanvasAgg):  # a figure closed by pyplot keeps a bare canvas
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    problems = []
    page = fig.bbox
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible() or not ax.axison:
            continue
        for which, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            labels = _shown_labels(axis)
            boxes = [(lab.get_text(), lab.get_window_extent(renderer)) for lab in labels]
            for j, (ta, a) in enumerate(boxes):
                for tb, b in boxes[j + 1:]:
                    if _overlap(a, b):
                        problems.append(f"{name}: axes {i} {which} tick labels {ta!r} and {tb!r} overlap")
        for title in (ax.title, ax._left_title, ax._right_title):
            if title.get_text():
                box = title.get_window_extent(renderer)
                if box.x0 < page.x0 - 1 or box.x1 > page.x1 + 1 or box.y0 < page.y0 - 1 or box.y1 > page.y1 + 1:
                    problems.append(f"{name}: axes {i} title {title.get_text()!r} is clipped by the figure")
    return problems


@contextlib.contextmanager
def checked_figures(monkeypatch) -> Iterator[list[str]]:
    """While active, every figure an experiment saves through ``plots.save`` is checked as it was saved;
    the list collects the problems found."""
    problems: list[str] = []
    original = plots.save

    def save(fig, out_dir, stem):
        path = original(fig, out_dir, stem)
        problems.extend(layout_problems(fig, stem))  # laid out and ticked as it was saved
        return path

    monkeypatch.setattr(plots, "save", save)
    yield problems
