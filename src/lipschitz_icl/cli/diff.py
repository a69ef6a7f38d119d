"""``lipschitz-icl diff``: two runs side by side, the config keys that differ and their summaries."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from ..compare import diff, row_texts
from .common import check_run_dir, esc, out, user_errors


def _table(frame, title: str) -> Table:
    table = Table(title=esc(title))
    for i, col in enumerate(frame.columns):
        table.add_column(esc(col), justify="left" if i == 0 else "right")
    for row in frame.itertuples(index=False):  # values that differ never print alike (row_texts)
        table.add_row(esc(row[0]), *(esc(t) for t in row_texts(list(row[1:]))))
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
        tables = [_table(result.config, f"config: {n} key{'s differ' if n != 1 else ' differs'}") if n else
                  "config: the same (every key equal)", _table(result.summary, "summary")]
    for table in tables:  # built inside user_errors: a value that cannot be shown is one line, not a traceback
        out.print(table)
