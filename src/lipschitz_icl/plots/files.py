"""Figures written to files for a page: never wider than PAGE_WIDTH_IN (a wider grid of panels is laid
out in fewer columns), no text smaller than MIN_FONT_PT, and every file written atomically.

At DPI = 110 a figure of PAGE_WIDTH_IN inches is 1386 px wide, so the report shows it at (or within 3 %
of) its natural size on a 1400 px screen, where MIN_FONT_PT = 8.5 puts digits and capitals (0.73 em in
DejaVu Sans) at 9.2 px or more."""

from __future__ import annotations

import io
import math
import textwrap
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.gridspec import GridSpec
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.text import Text

from ..store import atomic_write_bytes
from .style import tidy_log_axes

PAGE_WIDTH_IN = 12.6  # the widest figure written, in inches (1386 px at DPI 110: three 4.2-inch panels)
MIN_FONT_PT = 8.5  # the smallest text written, in points
FORMATS = ("png", "pdf", "svg")


FOLD_KEY = "lipschitz_icl fold"  # PNG text chunk: "<columns drawn> <columns shown>" of a folded figure


def fit_page(fig: Figure, width_in: float = PAGE_WIDTH_IN) -> tuple[int, int] | None:
    """Lay out a figure wider than ``width_in`` in fewer columns, row by row: panel (r, c) of an
    n-column grid folded f times goes to row r*f + c // ceil(n/f), column c % ceil(n/f), so each row
    of panels stays together, in reading order. Only a plain grid (every axes one cell of one
    GridSpec, as ``figure`` makes) is folded; returns (columns drawn, columns shown) when it was, else None."""
    width, height = fig.get_size_inches()
    specs = [ax.get_subplotspec() for ax in fig.axes]
    if width <= width_in * (1 + 1e-9) or not specs or any(s is None for s in specs):  # 3 x 4.2 is 12.600000000000001
        return None
    grid = specs[0].get_gridspec()
    if any(s.get_gridspec() is not grid or len(s.rowspan) != 1 or len(s.colspan) != 1 for s in specs):
        return None
    nrows, ncols = grid.get_geometry()
    cols = max(1, math.ceil(ncols / math.ceil(width / width_in)))
    fold = math.ceil(ncols / cols)
    if fold == 1:
        return None
    folded = GridSpec(nrows * fold, cols, figure=fig)
    for ax, spec in zip(fig.axes, specs, strict=True):
        r, c = spec.rowspan.start, spec.colspan.start
        ax.set_subplotspec(folded[r * fold + c // cols, c % cols])
    fig.set_size_inches(width * cols / ncols, height * fold)
    return ncols, cols


def readable_text(fig: Figure, min_pt: float = MIN_FONT_PT) -> None:
    """Raise every text of ``fig`` smaller than ``min_pt`` (legends, annotations, tick labels) to it."""
    for ax in fig.axes:
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            sizes = [t.get_fontsize() for t in axis.get_ticklabels(which="both")]
            if sizes and min(sizes) < min_pt:
                ax.tick_params(axis=name, which="both", labelsize=min_pt)
    for text in fig.findobj(Text):
        if text.get_fontsize() < min_pt:
            text.set_fontsize(min_pt)


def wrap_titles(fig: Figure) -> None:
    """Break every axes title wider than its panel into lines that fit it (at word boundaries), so a
    long title neither runs into the next panel nor off the figure."""
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        panel = ax.get_window_extent(renderer).width
        for title in (ax.title, ax._left_title, ax._right_title):
            text = title.get_text()
            wide = title.get_window_extent(renderer).width if text else 0.0
            if wide <= panel or not text:
                continue
            longest = max(len(line) for line in text.split("\n"))
            chars = max(12, int(longest * panel / wide))
            title.set_text("\n".join(textwrap.fill(line, chars) for line in text.split("\n")))


MAX_GROWTH = 3.0  # a figure grows at most this much taller to give its tick labels room


def _crowded_y_axes(fig: Figure) -> list:
    """The axes whose shown y tick labels need more height than the axes has (they would overlap)."""
    renderer = fig.canvas.get_renderer()
    crowded = []
    for ax in fig.axes:
        lo, hi = sorted(ax.get_ylim())
        labels = [t.label1 for t in ax.yaxis.get_major_ticks() if t.label1.get_visible() and t.label1.get_text()
                  and lo <= t.get_loc() <= hi]
        need = sum(lab.get_window_extent(renderer).height for lab in labels) * 1.1
        if len(labels) > 1 and need > ax.get_window_extent(renderer).height:
            crowded.append((ax, need / ax.get_window_extent(renderer).height))
    return crowded


def untangle_ticks(fig: Figure) -> None:
    """Give crowded y tick labels (many categories on a short panel) room: first the smallest readable size
    (MIN_FONT_PT), then, if they still overlap, a taller figure (at most MAX_GROWTH times)."""
    fig.canvas.draw()
    crowded = _crowded_y_axes(fig)
    for ax, _ in crowded:
        ax.tick_params(axis="y", labelsize=MIN_FONT_PT)
    if crowded:
        fig.canvas.draw()
        still = _crowded_y_axes(fig)
        if still:
            growth = min(MAX_GROWTH, 1.05 * max(f for _, f in still))
            width, height = fig.get_size_inches()
            fig.set_size_inches(width, height * growth)


def for_page(fig: Figure) -> tuple[Figure, dict[str, str]]:
    """``fig`` made ready for a file: log axes ticked by ``style.tidy_log_axes``, folded to the page
    width, no text below MIN_FONT_PT, titles wrapped to their panels, laid out tight (a constrained
    layout is kept); with the PNG text chunks that say how it was folded (FOLD_KEY), for the report."""
    tidy_log_axes(fig)
    folded = fit_page(fig)
    readable_text(fig)
    wrap_titles(fig)
    tight = not isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine)
    if tight:  # a tight layout done before folding is redone
        fig.tight_layout()
    untangle_ticks(fig)
    if tight:
        fig.tight_layout()
    return fig, ({FOLD_KEY: f"{folded[0]} {folded[1]}"} if folded else {})


def figure_bytes(fig: Figure, fmt: str, notes: dict[str, str] | None = None) -> bytes:
    """The figure as a file of format ``fmt`` at its own dpi (never rcParams' savefig.dpi); SVGs carry no
    date, so the same figure gives the same bytes; ``notes`` go into a PNG's text chunks."""
    buf = io.BytesIO()
    metadata = {"Date": None} if fmt == "svg" else dict(notes or {}) if fmt == "png" else None
    fig.savefig(buf, format=fmt, dpi=fig.dpi, metadata=metadata)
    return buf.getvalue()


def png_notes(data: bytes) -> dict[str, str]:
    """The text chunks (tEXt) of a PNG: what ``save`` recorded about a figure (FOLD_KEY)."""
    notes, pos = {}, 8
    while pos + 8 <= len(data):
        length, kind = int.from_bytes(data[pos:pos + 4], "big"), data[pos + 4:pos + 8]
        if kind == b"tEXt":
            key, _, value = data[pos + 8:pos + 8 + length].partition(b"\0")
            notes[key.decode("latin-1")] = value.decode("latin-1")
        if kind == b"IEND":
            break
        pos += 12 + length
    return notes


def save(fig: Figure, out_dir: Path, stem: str) -> str:
    """Save as PNG, PDF and SVG under out_dir/figures (``for_page`` first); return the PNG's path
    relative to out_dir. Log axes left to matplotlib's ticks get ``style.tidy_log_axes``'s (no
    overlapping labels)."""
    _, notes = for_page(fig)
    fig_dir = Path(out_dir) / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    for fmt in FORMATS:
        atomic_write_bytes(fig_dir / f"{stem}.{fmt}", figure_bytes(fig, fmt, notes))  # never half a figure on disk
    return f"figures/{stem}.png"


def save_png(fig: Figure, path: str | Path) -> Path:
    """One PNG at ``path`` (``for_page`` first), written atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, notes = for_page(fig)
    atomic_write_bytes(path, figure_bytes(fig, "png", notes))
    return path
