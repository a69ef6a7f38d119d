"""report.md: the claims table, then per claim the reason for its verdict, the criterion, the
statistic as a table (raw JSON folded), figures with captions (each shown once), run warnings and,
with ``--compare-with``, the previous run's verdict beside it."""

from __future__ import annotations

import json
from pathlib import Path

from ..experiments.claims import VERDICTS, ClaimResult
from ..experiments.controls import can_fail_cell
from ..store import atomic_write_text
from . import evidence as ev
from .answer import regime_answer
from .data import Comparison, Owner, figure_owners, fold_note, run_warnings, sorted_claims
from .deciding import deciding
from .statistic import layout
from .text import (
    COMPARISONS_INTRO,
    MAX_ROWS,
    caption,
    comparison_warnings,
    flatten,
    paper_opening,
    provenance,
    ranked_rows,
    reason,
    redraw,
    sessions_rows,
    time_line,
)


def verdict_md(c: ClaimResult) -> str:
    """The verdict in markdown: a forced outcome, or one whose rule cannot fail or has no controls, says so
    first (it is not evidence)."""
    if c.forced:
        return f"**forced** (outcome {c.verdict}; not evidence)"
    if not c.comparison and c.can_fail is not True:
        return f"**{c.verdict}** ({can_fail_cell(c)}; not evidence)"
    return f"**{c.verdict}**"


def claims_table_md(claims: list[ClaimResult], link_root: str = "") -> str:
    lines = ["| claim | verdict | can fail | statistic (abridged) | distinct settings | forced by | figure |",
             "|---|---|---|---|---|---|---|"]
    for c in sorted_claims(claims):
        fig = f"[{Path(c.figures[0]).name}]({link_root}{c.figures[0]})" if c.figures else ""
        forced_by = _cell(ev.forced_by_cell(c))
        lines.append(f"| {c.id} | {verdict_md(c)} | {can_fail_cell(c)} | {_abridge(c)} | {ev.distinct_cell(c)} "
                     f"| {forced_by} | {fig} |")
    return "\n".join(lines)


def _abridge(c: ClaimResult, limit: int = 160) -> str:
    """The deciding quantities, then the statistic's other rows (those its criterion names first), as
    ``name=value`` items up to ``limit`` characters; an item is never cut (a longer first one is kept
    whole), and the count of those left out closes the cell."""
    def name(key: str) -> str:  # a › b › c as a[b][c]
        head, *rest = key.split(" › ")
        return head + "".join(f"[{part}]" for part in rest)

    decided = [row for q, value, _ in deciding(c) for row in flatten({q: value})]
    names = {k for k, _ in decided}
    rows = decided + [(k, v) for k, v in ranked_rows(c.statistic, c.criterion) if k not in names]
    items = [f"{name(k)}={v}" for k, v in rows]
    shown: list[str] = []
    for item in items:
        if shown and len(", ".join([*shown, item])) > limit:
            break
        shown.append(item)
    left = len(items) - len(shown)
    text = ", ".join(shown) + (f" … ({left} more)" if left else "")
    return text.replace("|", "\\|")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _compare_md(claims: list[ClaimResult], meta: dict, cmp: Comparison) -> list[str]:
    lines = [f"## Side by side with {cmp.source or 'a previous run'}", "",
             "| claim | verdict here | verdict there | why they differ |", "|---|---|---|---|"]
    for c in sorted_claims(claims):
        size, size_before, prev, why = cmp.pair(c, str(meta.get("size", "")))
        there = f"{prev.verdict} ({size_before})" if prev else "—"
        lines.append(f"| {c.id} | {c.verdict} ({size}) | {there} | {_cell(why or 'same verdict')} |")
    return [*lines, ""]


def _table_md(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
            *["| " + " | ".join(_cell(x) for x in row) + " |" for row in rows]]


def _statistic_md(c: ClaimResult) -> list[str]:
    """The deciding quantities with their thresholds, the other values, each per-run dump folded, the raw JSON."""
    lay = layout(c)
    lines: list[str] = []
    if lay.deciding:
        lines += [*_table_md(("deciding quantity", "value", "threshold (from the criterion)"), lay.deciding), ""]
    if lay.rows:
        lines += _table_md(("other measured values" if lay.deciding else "quantity", "value"), lay.rows[:MAX_ROWS])
        if len(lay.rows) > MAX_ROWS:
            lines.append(f"| … | {len(lay.rows) - MAX_ROWS} more in the raw JSON |")
        lines.append("")
    for key, rows in lay.folds:
        lines += [f"<details><summary>{key}: {len(rows)} values</summary>", "",
                  *_table_md(("quantity", "value"), rows[:MAX_ROWS]), "", "</details>", ""]
    raw = json.dumps(c.statistic, indent=1, default=str)
    return [*lines, "<details><summary>raw statistic (JSON)</summary>", "", "```json", raw, "```", "",
            "</details>", ""]


def _evidence_md(c: ClaimResult) -> list[str]:
    """The verdict per reading, what each interval covers, the refinement, and the settings with their copies."""
    lines: list[str] = []
    if not c.comparison:
        lines += [f"**Controls.** {ev.controls_line(c)}", ""]
        if ev.controls_rows(c):
            lines += [*_table_md(ev.CONTROLS_HEAD, ev.controls_rows(c)), ""]
    if c.readings:
        lines += ["**Per reading.**", "", *_table_md(ev.READING_HEAD, ev.reading_rows(c)), ""]
    covers = ev.covers_rows(c)
    if covers:
        lines += ["**Intervals and what they cover.**", "", *_table_md(ev.COVERS_HEAD, covers), ""]
    if c.refinement:
        lines += [f"**Refinement.** {ev.refinement_line(c)}", ""]
    if c.settings:
        lines += [f"**Settings.** {ev.settings_line(c)}", "", "<details><summary>fingerprints and copies</summary>", "",
                  *_table_md(ev.SETTINGS_HEAD, ev.settings_rows(c)), "", "</details>", ""]
    return lines


def _figures_md(out: Path, c: ClaimResult, owners: dict[str, Owner]) -> list[str]:
    lines = []
    for f in c.figures:
        owner = owners.get(f, Owner(c.id, f))
        if owner == Owner(c.id, f):
            lines += [f"[![{c.id}: {Path(f).name}]({f})]({f})", "", f"*{fold_note(out, f)}{caption(c, f)}*", ""]
        else:
            same = f" (the same figure as `{Path(owner.figure).name}`)" if owner.figure != f else ""
            lines += [f"Figure `{Path(f).name}`{same}: shown under [{owner.claim}](#{owner.claim}).", ""]
    return lines


def _redraw_md(c: ClaimResult, meta: dict) -> list[str]:
    if not c.figures:
        return []
    command, folders = redraw(c, meta)
    configs = (" · the runs' configs: " + ", ".join(f"[{f}]({f})" for f in folders) + " (each run's config.yaml)"
               if folders else "")
    return [f"**Redraw alone.** `{command}`{configs}", ""]


def _claim_md(out: Path, c: ClaimResult, meta: dict, owners: dict[str, Owner], cmp: Comparison | None) -> list[str]:
    warnings = run_warnings(out, c.runs)
    flags = f" · ⚠ {len(warnings)} run(s) need care" if warnings else ""
    parts = [f'<a id="{c.id}"></a>', "", f"## {c.id} — {verdict_md(c)}{flags}", "", f"> {c.statement}", "",
             f"**Why.** {reason(c, warnings)}", "", f"**Criterion.** {c.criterion}", "", "**Statistic.**", "",
             *_statistic_md(c), *_evidence_md(c), *_figures_md(out, c, owners), *_redraw_md(c, meta)]
    if warnings:
        parts += ["**⚠ Runs that ended at step 0 or did not end normally.**", "", *[f"- `{w}`" for w in warnings], ""]
    if cmp is not None:
        _, size_before, prev, why = cmp.pair(c, str(meta.get("size", "")))
        if prev is not None:
            parts += [f"**At {size_before} size:** {why or prev.verdict + ', the same verdict.'}", ""]
    if c.notes:
        parts += [f"**Notes.** {c.notes}", ""]
    return [*parts, _footer_md(c), ""]


def _footer_md(c: ClaimResult) -> str:
    said, files = provenance(c)
    links = (": " + ", ".join(f"[{f}]({f})" for f in files) + " (`pandas.read_csv` loads them)") if files else ""
    return f"Experiment `{c.experiment}`, {c.wall_s:.1f} s, {said}{links}."


def _comparison_md(out: Path, c: ClaimResult, owners: dict[str, Owner]) -> list[str]:
    warnings = run_warnings(out, c.runs)
    parts = [f'<a id="{c.id}"></a>', "", f"### {c.id}", "", f"> {c.statement}", ""]
    if c.criterion == "(experiment failed)":
        parts += [f"**Failed.** {c.statistic.get('error', '?')}", ""]
    if comparison_warnings(c):
        parts += [*[f"- ⚠ **{w}**" for w in comparison_warnings(c)], ""]
    data = c.statistic.get("data")
    if data:
        parts += [f"**Data.** [{data}]({data}) (one row per context length, method and class; "
                  "`pandas.read_csv` loads it).", ""]
    parts += ["**Numbers.**", "", *_statistic_md(c), *_figures_md(out, c, owners)]
    if warnings:
        parts += ["**⚠ Runs that ended at step 0 or did not end normally.**", "", *[f"- `{w}`" for w in warnings], ""]
    return [*parts, _footer_md(c), ""]


def comparisons_md(out: Path, comparisons: list[ClaimResult]) -> list[str]:
    """The section "Comparisons with baselines", after the claims (nothing when there are none)."""
    if not comparisons:
        return []
    owners = figure_owners(comparisons, out)
    parts = ["## Comparisons with baselines", "", COMPARISONS_INTRO, ""]
    for c in comparisons:
        parts += _comparison_md(out, c, owners)
    return parts


def write_report_md(out: Path, claims: list[ClaimResult], meta: dict, compare: Comparison | None = None,
                    comparisons: list[ClaimResult] | None = None) -> Path:
    counts = {v: sum(c.verdict == v for c in claims) for v in VERDICTS}
    parts = [
        "# lipschitz-icl reproduce report", "", regime_answer(claims), "",
        f"Command: `{meta.get('command', '')}` · size: {meta.get('size')} · seed: {meta.get('seed')} · "
        f"kernel step: {meta.get('kernel_step', 'unfused (torch)')} · wall time: {time_line(meta)}", "",
        "Verdicts: " + ", ".join(f"{v}: {n}" for v, n in counts.items()), "",
        f"Counts: {ev.counts_line(claims)}. Evidence is a verdict that is not forced and whose rule its controls "
        "show able to fail (it rejects a null and accepts a planted case).", "",
    ]
    if len(meta.get("sessions") or []) > 1:
        parts += [f"- {label}: {text}" for label, text in sessions_rows(meta)] + [""]
    if meta.get("status") == "interrupted":
        parts += ["**⚠ This reproduce was interrupted: claims marked interrupted have no verdict.**", ""]
    if meta.get("size") == "quick":
        parts += ["*Quick size: fewer values, seeds and steps; runs that miss their target within the step budget "
                  "are censored, so several verdicts can be `inconclusive` at this size.*", ""]
    parts += [claims_table_md(claims), ""]
    if compare is not None:
        parts += _compare_md(claims, meta, compare)
    owners = figure_owners(claims, out)
    previous = None
    for c in sorted_claims(claims):
        opening = paper_opening(c, previous, meta)
        if opening is not None:  # claims grouped by paper: a heading where each paper's claims begin
            pid, citation, reachable = opening
            parts += [f'<a id="paper-{pid}"></a>', "", f"# {pid}: {citation}", "",
                      *([f"*Reachable: {reachable}*", ""] if reachable else [])]
        parts += _claim_md(out, c, meta, owners, compare)
        previous = c
    parts += comparisons_md(out, comparisons or [])
    path = out / "report.md"
    atomic_write_text(path, "\n".join(parts) + "\n")
    return path
