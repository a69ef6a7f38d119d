"""The claims table as CSV and LaTeX (claims.csv, claims.tex), with a previous run's verdicts
side by side when one is given (``--compare-with``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..experiments.claims import ClaimResult, claim_rank
from ..experiments.controls import can_fail_cell
from ..store import atomic_write_text
from .text import headline, why_differs


def claims_frame(claims: list[ClaimResult], size: str, before: dict[str, ClaimResult] | None = None,
                 size_before: str = "") -> pd.DataFrame:
    """One row per claim; with ``before``: its verdict there and why the two differ."""
    rows = []
    for c in sorted(claims, key=lambda c: claim_rank(c.id)):
        row = {"id": c.id, "verdict": c.verdict, "size": c.size or size, "can_fail": can_fail_cell(c),
               "controls_null": (c.controls.get("null") or {}).get("verdict", ""),
               "controls_planted": (c.controls.get("planted") or {}).get("verdict", ""), "forced": c.forced,
               "forced_reason": c.forced_reason, "forced_by": c.forced_by, "distinct_settings": c.distinct_settings,
               "censored": c.censored,
               "statistic": headline(c.statistic, 8, c.criterion),
               "criterion": c.criterion, "undecided_because": c.undecided_because, "experiment": c.experiment,
               "statement": c.statement}
        if before is not None:
            prev = before.get(c.id)
            row["verdict_before"] = prev.verdict if prev else ""
            row["size_before"] = (prev.size or size_before) if prev else ""
            row["differs_because"] = why_differs(c, prev, row["size"], row["size_before"]) if prev else ""
        rows.append(row)
    return pd.DataFrame(rows)


def write_exports(out: Path, frame: pd.DataFrame) -> list[Path]:
    """claims.csv (every column) and claims.tex (a booktabs table of the verdicts)."""
    csv_path, tex_path = out / "claims.csv", out / "claims.tex"
    atomic_write_text(csv_path, frame.to_csv(index=False))
    cols = [c for c in ("id", "verdict", "can_fail", "size", "forced", "censored", "verdict_before", "size_before")
            if c in frame.columns]
    tex = frame[cols].to_latex(index=False, escape=True, caption="Claims and verdicts (lipschitz-icl reproduce).",
                               label="tab:claims")
    atomic_write_text(tex_path, tex)
    return [csv_path, tex_path]
