"""``lipschitz-icl diff``: two runs side by side, the config keys that differ and their summaries."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from ..compare import diff
from .common import cell, check_run_dir, esc, out, user_errors


def _table(frame, title: str) -> Table:
    table = Table(title=esc(title))
    for i, col in enumerate(frame.columns):
        table.add_column(esc(col), justify="left" if i == 0 else "right")
    for row in frame.itertuples(index=False):
        table.add_row(*(esc(cell(v, 6)) for v in row))
    return table


def diff_command(
    run_a: Path = typer.Argument(..., help="A run directory."),
    run_b: Path = typer.Argument(..., help="Another run directory."),
) -> None:
    """Compare two runs: the config keys in which they differ, then their summaries side by side.

    From Python: `lipschitz_icl.diff(a, b)` returns the same two tables as DataFrames
    (`.config`, `.summary`); `plots.compare(runs, metric="loss")` overlays their curves.
    """
    with user_errors():
        check_run_dir(run_a)
        check_run_dir(run_b)
        result = diff(run_a, run_b)
    n = len(result.config)
    if n:
        out.print(_table(result.config, f"config: {n} key{'s differ' if n != 1 else ' differs'}"))
    else:
        out.print("config: the same (every key equal)")
    out.print(_table(result.summary, "summary"))
