"""report.html, self-contained (figures embedded): the claims table with verdicts (a forced outcome in
its own colour and word), then per claim the reason (the deciding quantities and their thresholds
first), the criterion, the statistic (deciding quantities, other values, per-run dumps folded, raw JSON
folded), figures at their natural size with captions, each linked to its files (a figure, by its bytes,
embedded once and referred to after), warning badges on runs that ended at step 0 or were interrupted,
the previous run's verdict (``--compare-with``), run information and every config.

Every string that comes from a user or a run (config values, notes, errors) is HTML-escaped."""

from __future__ import annotations

import base64
import json
import re
from html import escape as e
from pathlib import Path

from ..experiments.claims import ClaimResult
from ..experiments.controls import can_fail_cell
from ..store import atomic_write_text
from . import evidence as ev
from .answer import regime_answer
from .data import Comparison, Owner, figure_owners, fold_note, run_warnings, sorted_claims
from .statistic import layout
from .text import (
    COMPARISONS_INTRO,
    MAX_ROWS,
    caption,
    comparison_warnings,
    paper_opening,
    provenance,
    reason,
    redraw,
    sessions_rows,
    time_line,
)

VERDICT_COLOURS = {"supported": "#1a7f37", "not supported": "#cf222e", "inconclusive": "#9a6700"}
FORCED_COLOUR = "#8250df"  # a forced outcome is not evidence: never the green of a supported claim
PROSE_WIDTH = "72em"  # text, tables and folds; figures may use the whole width of the window
STYLE = f"""body{{font-family:system-ui,sans-serif;margin:2em auto;padding:0 16px;color:#222}}
h1,h2,h3,p,blockquote,table,details,ul{{max-width:{PROSE_WIDTH}}}
table{{border-collapse:collapse;width:100%;font-size:0.9em}}td,th{{border:1px solid #ccc;padding:4px 6px;
vertical-align:top}}th{{background:#f3f3f3;text-align:left}}figure{{margin:0.8em 0 0}}
figure img{{max-width:100%;height:auto;border:1px solid #eee;display:block}}
table.stat{{width:auto;min-width:40%}}table.stat td:nth-child(2){{font-family:monospace;text-align:right}}
table.decide td:nth-child(2){{font-weight:bold}}
pre{{background:#f6f8fa;padding:0.6em;overflow-x:auto;font-size:0.8em;max-height:24em;max-width:{PROSE_WIDTH}}}
figcaption{{font-size:0.85em;color:#444;margin-bottom:1em;max-width:{PROSE_WIDTH}}}.why{{background:#f6f8fa;
padding:0.6em 0.8em;border-left:4px solid #888}}.small{{font-size:0.8em;color:#555}}blockquote{{color:#444;
border-left:3px solid #ccc;margin-left:0;padding-left:1em}}.badge{{display:inline-block;font-size:0.7em;
padding:1px 7px;border-radius:9px;margin-left:6px;vertical-align:middle;font-weight:bold}}
.forced,.noevidence{{color:{FORCED_COLOUR};font-weight:bold}}table.decide td:nth-child(2){{white-space:nowrap}}
.warn{{background:#fff8c5;color:#7d4e00;border:1px solid #d4a72c}}"""


def _verdict(c: ClaimResult) -> str:
    """The verdict word in its colour; a forced outcome, or one whose rule cannot fail or has no controls, in its own
    colour, never as evidence."""
    if c.forced:
        return (f'<span class="forced" title="{e(c.forced_reason)}">forced</span>'
                f' <span class="small">(outcome {e(c.verdict)}; not evidence)</span>')
    if not c.comparison and c.can_fail is not True:  # a rule that cannot fail, or has no controls: never green
        return (f'<span class="noevidence" title="{e(ev.controls_line(c))}">{e(c.verdict)}</span>'
                f' <span class="small">({e(can_fail_cell(c))}; not evidence)</span>')
    colour = VERDICT_COLOURS.get(c.verdict, "#555")
    return f'<span style="color:{colour};font-weight:bold">{e(c.verdict)}</span>'


def png_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) in pixels from a PNG's header, or None when ``data`` is not a PNG."""
    if len(data) < 24 or data[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def _img(out: Path, rel: str) -> str:
    """The PNG embedded at its natural size (no wider than the window), linked to its file, with the
    PDF and SVG beside it where they exist."""
    p = out / rel
    if not p.is_file():
        return f"<p><em>figure missing: {e(rel)}</em></p>"
    data = p.read_bytes()
    size = png_size(data)
    dims = f' width="{size[0]}" height="{size[1]}"' if size else ""
    img = f'<img alt="{e(rel)}"{dims} src="data:image/png;base64,{base64.b64encode(data).decode("ascii")}">'
    files = [(ext.upper(), str(Path(rel).with_suffix(f".{ext}"))) for ext in ("png", "pdf", "svg")
             if (out / Path(rel).with_suffix(f".{ext}")).is_file()]
    links = " · ".join(f'<a href="{e(path)}">{name}</a>' for name, path in files)
    return (f'<a href="{e(rel)}" title="open {e(Path(rel).name)} at full size">{img}</a>'
            f'<span class="small">Full size: {links}</span>')


def _figures(out: Path, c: ClaimResult, owners: dict[str, Owner]) -> str:
    parts = []
    for f in c.figures:
        owner = owners.get(f, Owner(c.id, f))
        if owner == Owner(c.id, f):
            said = fold_note(out, f) + caption(c, f)
            parts.append(f"<figure>{_img(out, f)}<figcaption>{e(said)}</figcaption></figure>")
        else:
            same = f" (the same figure as <code>{e(Path(owner.figure).name)}</code>)" if owner.figure != f else ""
            parts.append(f'<p class=small>Figure <code>{e(Path(f).name)}</code>{same}: shown under '
                         f'<a href="#{e(owner.claim)}">{e(owner.claim)}</a>.</p>')
    return "".join(parts)


def _redraw(c: ClaimResult, meta: dict) -> str:
    if not c.figures:
        return ""
    command, folders = redraw(c, meta)
    configs = (" · the runs' configs: " + ", ".join(f'<a href="{e(f)}">{e(f)}</a>' for f in folders)
               + " (each run's config.yaml)" if folders else "")
    return f"<p class=small><b>Redraw alone.</b> <code>{e(command)}</code>{configs}</p>"


def _rows(rows: list[tuple[str, ...]]) -> str:
    return "".join("<tr>" + "".join(f"<td>{e(cell)}</td>" for cell in row) + "</tr>" for row in rows)


def _statistic(c: ClaimResult) -> str:
    """The deciding quantities with their thresholds, the other values, each per-run dump in a fold, the raw JSON."""
    lay = layout(c)
    parts = []
    if lay.deciding:
        parts.append('<table class="stat decide"><tr><th>deciding quantity</th><th>value</th>'
                     f"<th>threshold (from the criterion)</th></tr>{_rows(lay.deciding)}</table>")
    if lay.rows:
        more = (f"<tr><td>…</td><td>{len(lay.rows) - MAX_ROWS} more in the raw JSON</td></tr>"
                if len(lay.rows) > MAX_ROWS else "")
        head = "other measured values" if lay.deciding else "quantity"
        parts.append(f'<table class="stat"><tr><th>{head}</th><th>value</th></tr>{_rows(lay.rows[:MAX_ROWS])}{more}'
                     "</table>")
    for key, rows in lay.folds:
        parts.append(f"<details><summary>{e(key)}: {len(rows)} values</summary><table class=\"stat\">"
                     f"{_rows(rows[:MAX_ROWS])}</table></details>")
    raw = e(json.dumps(c.statistic, indent=1, default=str))
    return "".join(parts) + f"<details><summary>raw statistic (JSON)</summary><pre>{raw}</pre></details>"


def _table(head: tuple[str, ...], rows: list[tuple[str, ...]], cls: str = "stat") -> str:
    return (f'<table class="{cls}"><tr>' + "".join(f"<th>{e(h)}</th>" for h in head) + f"</tr>{_rows(rows)}"
            "</table>")


def _evidence(c: ClaimResult) -> str:
    """The verdict per reading, what each interval covers, the refinement, and the settings with their copies."""
    parts = []
    if not c.comparison:
        rows = ev.controls_rows(c)
        parts.append(f"<p><b>Controls.</b> {e(ev.controls_line(c))}</p>"
                     + (_table(ev.CONTROLS_HEAD, rows, "controls") if rows else ""))
    if c.readings:
        parts.append(f'<p><b>Per reading.</b></p>{_table(ev.READING_HEAD, ev.reading_rows(c), "readings")}')
    covers = ev.covers_rows(c)
    if covers:
        parts.append(f'<p><b>Intervals and what they cover.</b></p>{_table(ev.COVERS_HEAD, covers, "covers")}')
    if c.refinement:
        parts.append(f"<p><b>Refinement.</b> {e(ev.refinement_line(c))}</p>")
    if c.settings:
        parts.append(f"<p><b>Settings.</b> {e(ev.settings_line(c))}</p><details><summary>fingerprints and copies"
                     f"</summary>{_table(ev.SETTINGS_HEAD, ev.settings_rows(c), 'settings')}</details>")
    return "".join(parts)


def _section(out: Path, c: ClaimResult, meta: dict, owners: dict[str, Owner], cmp: Comparison | None) -> str:
    warnings = run_warnings(out, c.runs)
    badge = (f'<span class="badge warn" title="{e("; ".join(warnings))}">⚠ {len(warnings)} run(s) ended at step 0 '
             "or were interrupted</span>" if warnings else "")
    warn_list = ("<p><b>⚠ Runs that ended at step 0 or did not end normally.</b></p><ul>"
                 + "".join(f"<li><code>{e(w)}</code></li>" for w in warnings) + "</ul>" if warnings else "")
    compare = ""
    if cmp is not None:
        _, size_before, prev, why = cmp.pair(c, str(meta.get("size", "")))
        if prev is not None:
            said = e(why) if why else f"{_verdict(prev)}, the same verdict."
            compare = f"<p><b>At {e(size_before)} size:</b> {said}</p>"
    notes = f"<p><b>Notes.</b> {e(c.notes)}</p>" if c.notes else ""
    return (f'<section id="{e(c.id)}"><h2>{e(c.id)} — {_verdict(c)}{badge}</h2>'
            f"<blockquote>{e(c.statement)}</blockquote><p class=why><b>Why.</b> {e(reason(c, warnings))}</p>"
            f"<p><b>Criterion.</b> {e(c.criterion)}</p>{_statistic(c)}{_evidence(c)}{_figures(out, c, owners)}"
            f"{_redraw(c, meta)}{warn_list}"
            f"{compare}{notes}{_footer(c)}</section>")


def _footer(c: ClaimResult) -> str:
    said, files = provenance(c)
    links = (": " + ", ".join(f'<a href="{e(f)}"><code>{e(f)}</code></a>' for f in files)
             + " (<code>pandas.read_csv</code> loads them)") if files else ""
    return f"<p class=small>Experiment <code>{e(c.experiment)}</code>, {c.wall_s:.1f} s, {e(said)}{links}.</p>"


def _claims_table(claims: list[ClaimResult], meta: dict, cmp: Comparison | None) -> str:
    head = "<tr><th>id</th><th>claim</th><th>verdict</th><th>can fail</th><th>distinct settings</th><th>forced by</th>"
    head += f"<th>verdict at {e(cmp.size or 'previous')} size</th><th>why they differ</th>" if cmp else ""
    rows = []
    for c in sorted_claims(claims):
        extra = ""
        if cmp is not None:
            _, size_before, prev, why = cmp.pair(c, str(meta.get("size", "")))
            extra = f"<td>{_verdict(prev) if prev else '—'}</td><td>{e(why)}</td>"
        rows.append(f'<tr><td><a href="#{e(c.id)}">{e(c.id)}</a></td><td>{e(c.statement)}</td>'
                    f"<td>{_verdict(c)}</td><td>{e(can_fail_cell(c))}</td><td>{e(ev.distinct_cell(c))}</td>"
                    f"<td>{e(ev.forced_by_cell(c))}</td>{extra}</tr>")
    return f"<table>{head}</tr>{''.join(rows)}</table>"


def _comparison(out: Path, c: ClaimResult, owners: dict[str, Owner]) -> str:
    failed = (f"<p><b>Failed.</b> {e(str(c.statistic.get('error', '?')))}</p>"
              if c.criterion == "(experiment failed)" else "")
    warns = "".join(f'<p><span class="badge warn">⚠</span> {e(w)}</p>' for w in comparison_warnings(c))
    data = c.statistic.get("data")
    link = (f'<p><b>Data.</b> <a href="{e(str(data))}"><code>{e(str(data))}</code></a> (one row per context '
            "length, method and class; <code>pandas.read_csv</code> loads it).</p>" if data else "")
    return (f'<section id="{e(c.id)}"><h3>{e(c.id)}</h3><blockquote>{e(c.statement)}</blockquote>{failed}{warns}'
            f"{link}{_statistic(c)}{_figures(out, c, owners)}{_footer(c)}</section>")


def _comparisons(out: Path, comparisons: list[ClaimResult]) -> str:
    if not comparisons:
        return ""
    owners = figure_owners(comparisons, out)
    return (f"<h2>Comparisons with baselines</h2><p>{e(COMPARISONS_INTRO)}</p>"
            + "".join(_comparison(out, c, owners) for c in comparisons))


def _bold(text: str) -> str:
    """Markdown **bold** in ``text`` as HTML, the rest escaped."""
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", e(text))


def _cited(citation: str) -> str:
    """A paper's citation (``Paper.citation``: its title in markdown emphasis) as HTML, the title in italics."""
    return re.sub(r"\*([^*]+)\*", r"<em>\1</em>", e(citation))


def write_report_html(out: Path, claims: list[ClaimResult], meta: dict, configs: dict[str, str], *,
                      compare: Comparison | None = None, comparisons: list[ClaimResult] | None = None) -> Path:
    owners = figure_owners(claims, out)
    sections, previous = "", None
    for c in sorted_claims(claims):
        opening = paper_opening(c, previous, meta)
        if opening is not None:  # claims grouped by paper: a heading where each paper's claims begin
            pid, citation, reachable = opening
            sections += (f'<h1 id="paper-{e(pid)}" class="paper">{e(pid)}: {_cited(citation)}</h1>'
                         + (f"<p><em>Reachable: {e(reachable)}</em></p>" if reachable else ""))
        sections += _section(out, c, meta, owners, compare)
        previous = c
    sections += _comparisons(out, comparisons or [])
    cfg_html = "".join(f"<details><summary>{e(name)}</summary><pre>{e(text)}</pre></details>"
                       for name, text in configs.items())
    shown = {k: v for k, v in meta.items() if k not in ("sessions", "papers")}
    shown["wall_s"] = time_line(meta)
    rows = [*shown.items(), *sessions_rows(meta)]
    meta_rows = "".join(f"<tr><td>{e(str(k))}</td><td>{e(str(v))}</td></tr>" for k, v in rows)
    meta_rows += "".join(f"<tr><td>paper {e(pid)}</td><td>{_cited(p.get('citation', ''))}</td></tr>"
                         for pid, p in (meta.get("papers") or {}).items())
    notes = ("<p><b>⚠ This reproduce was interrupted: claims marked interrupted have no verdict.</b></p>"
             if meta.get("status") == "interrupted" else "")
    notes += ("<p><em>Quick size: fewer values, seeds and steps; several verdicts can be inconclusive at this "
              "size.</em></p>" if meta.get("size") == "quick" else "")
    side = f" (beside {e(compare.source)})" if compare is not None else ""
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>lipschitz-icl reproduce report</title>
<style>{STYLE}</style></head><body>
<h1>lipschitz-icl reproduce report</h1>
<p class=answer>{_bold(regime_answer(claims))}</p>
<p class=small>Command: <code>{e(str(meta.get("command", "")))}</code> · wall time: {e(time_line(meta))}</p>{notes}
<p><b>Counts.</b> {e(ev.counts_line(claims))}. Evidence is a verdict that is not forced and whose rule its controls
show able to fail (it rejects a null and accepts a planted case).</p>
<h2>Claims{side}</h2>{_claims_table(claims, meta, compare)}
{sections}
<h2>Run information</h2><table>{meta_rows}</table>
<h2>Configs ({len(configs)} run groups, the first run's config of each)</h2>{cfg_html}
</body></html>
"""
    path = out / "report.html"
    atomic_write_text(path, page)
    return path
