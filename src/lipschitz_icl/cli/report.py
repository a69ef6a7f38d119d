"""``lipschitz-icl report OUT_DIR``: write a reproduce output's report again, running nothing."""

from __future__ import annotations

from pathlib import Path

import typer

from ..errors import UserInputError
from ..report import regenerate_report
from .common import esc, user_errors
from .common import out as console


def report_command(
    out_dir: Path = typer.Argument(..., help="A reproduce output directory (holds claims.json, runs/, figures/)."),
    compare_with: Path = typer.Option(None, "--compare-with", help="A previous output's claims.json (or its "
                                      "directory), e.g. the quick run: verdicts side by side, with why they differ."),
) -> None:
    """Write report.md, report.html, claims.csv and claims.tex again from an output's claims.json,
    runs/ and figures/, without rerunning any experiment (claims.json is not changed)."""
    with user_errors():
        if not out_dir.is_dir():
            raise UserInputError(f"{out_dir}: not a directory (give a reproduce output directory)")
        paths = regenerate_report(out_dir, compare_with)  # a failed write: exit 1 (user_errors)
    for p in paths:
        console.print(esc(f"wrote {p}"), highlight=False)
