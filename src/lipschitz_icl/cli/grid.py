"""Tables as plain text cells (``Grid``), printed as rich tables on a terminal or as markdown
tables at full width when stdout is a file or a pipe (``bench``, ``evaluate``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.table import Table

from .common import esc, out


@dataclass
class Grid:
    """A table as plain text cells, printable as a rich table or as markdown."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    styles: list[str | None] = field(default_factory=list)  # the last cell's style, one per row


def rich_table(grid: Grid) -> Table:
    table = Table(title=esc(grid.title), title_justify="left")
    for c in grid.columns:
        table.add_column(esc(c), overflow="fold")
    for i, row in enumerate(grid.rows):
        cells = [esc(c) for c in row]
        style = grid.styles[i] if i < len(grid.styles) else None
        if style:
            cells[-1] = f"[{style}]{cells[-1]}[/]"
        table.add_row(*cells)
    return table


def markdown_table(grid: Grid) -> str:
    """A GitHub-flavoured markdown table with its title in bold above it."""

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |"

    body = [line(grid.columns), "|" + "---|" * len(grid.columns), *(line(r) for r in grid.rows)]
    return "\n".join([f"**{grid.title}**", "", *body, ""])


def print_grid(grid: Grid, markdown: bool) -> None:
    if markdown:
        out.print(markdown_table(grid), markup=False, highlight=False, emoji=False, soft_wrap=True)
    else:
        out.print(rich_table(grid))
