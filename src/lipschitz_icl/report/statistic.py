"""A claim's statistic laid out for a reader: the deciding quantities first (value and threshold), then
the other measured values, and each per-run or per-setting dump (an entry of more than FOLD_ROWS rows)
in a fold of its own. Shared by report.md and report.html."""

from __future__ import annotations

from dataclasses import dataclass

from ..experiments.claims import ClaimResult
from .deciding import DECIDING, deciding, label
from .text import compact, flatten, ranked_rows

FOLD_ROWS = 4  # an entry of the statistic that flattens to more rows than this goes into a fold


@dataclass
class StatisticLayout:
    deciding: list[tuple[str, str, str]]  # (quantity, value, threshold rule)
    rows: list[tuple[str, str]]  # the other measured values, those the criterion names first
    folds: list[tuple[str, list[tuple[str, str]]]]  # (entry, its rows): per-run and per-setting dumps


def _decided_names(c: ClaimResult) -> list[str]:
    """The flattened names of the deciding quantities (their rows are not repeated below them)."""
    paths = [p for path, _ in DECIDING.get(c.id, ()) if not path.startswith("interval:") for p in path.split("..")]
    return [label(p) for p in paths]


def layout(c: ClaimResult) -> StatisticLayout:
    names = _decided_names(c)

    def shown_above(name: str) -> bool:
        return any(name == n or name.startswith((f"{n} › ", f"{n}[")) for n in names)

    small, folds = {}, []
    for key, value in c.statistic.items():
        rows = flatten({key: value})
        if len(rows) > FOLD_ROWS:
            folds.append((str(key), rows))
        else:
            small[key] = value
    rows = [(k, v) for k, v in ranked_rows(small, c.criterion) if not shown_above(k)]
    decided = [(name, compact(value), rule) for name, value, rule in deciding(c)]
    return StatisticLayout(decided, rows, folds)
