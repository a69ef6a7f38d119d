"""report.html, self-contained (figures embedded): the claims table with verdicts and forced flags,
then per claim the reason, the criterion, the statistic as a table (raw JSON folded), figures with
captions (each embedded once, referred to after), warning badges on runs that ended at step 0 or
were interrupted, the previous run's verdict (``--compare-with``), run information and every config.

Every string that comes from a user or a run (config values, notes, errors) is HTML-escaped."""

from __future__ import annotations

import base64
import json
from html import escape as e
from pathlib import Path

from ..experiments.claims import ClaimResult
from ..store import atomic_write_text
from .data import Comparison, figure_owners, run_warnings, sorted_claims
from .text import (
    COMPARISONS_INTRO,
    MAX_ROWS,
    caption,
    comparison_warnings,
    flatten,
    provenance,
    reason,
    sessions_rows,
    time_line,
)

VERDICT_COLOURS = {"supported": "#1a7f37", "not supported": "#cf222e", "inconclusive": "#9a6700"}
STYLE = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;width:100%;font-size:0.9em}td,th{border:1px solid #ccc;padding:4px 6px;
vertical-align:top}th{background:#f3f3f3}img{max-width:100%;width:820px;border:1px solid #eee;margin:0.5em 0 0}
table.stat{width:auto;min-width:40%}table.stat td:last-child{font-family:monospace;text-align:right}
pre{background:#f6f8fa;padding:0.6em;overflow-x:auto;font-size:0.8em;max-height:24em}
figcaption{font-size:0.85em;color:#444;margin-bottom:1em}.why{background:#f6f8fa;padding:0.6em 0.8em;
border-left:4px solid #888}.small{font-size:0.8em;color:#555}blockquote{color:#444;border-left:3px solid #ccc;
margin-left:0;padding-left:1em}.badge{display:inline-block;font-size:0.7em;padding:1px 7px;border-radius:9px;
margin-left:6px;vertical-align:middle;font-weight:bold}.forced{background:#ddf4ff;color:#0550ae}
.warn{background:#fff8c5;color:#7d4e00;border:1px solid #d4a72c}"""


def _verdict(c: ClaimResult) -> str:
    colour = VERDICT_COLOURS.get(c.verdict, "#555")
    forced = f'<span class="badge forced" title="{e(c.forced_reason)}">forced</span>' if c.forced else ""
    return f'<span style="color:{colour};font-weight:bold">{e(c.verdict)}</span>{forced}'


def _img(out: Path, rel: str) -> str:
    p = out / rel
    if not p.is_file():
        return f"<p><em>figure missing: {e(rel)}</em></p>"
    data = base64.b64encode(p.read_bytes()).decode("ascii")
    return f'<img alt="{e(rel)}" src="data:image/png;base64,{data}">'


def _figures(out: Path, c: ClaimResult, owners: dict[str, str]) -> str:
    parts = []
    for f in c.figures:
        owner = owners.get(f, c.id)
        if owner == c.id:
            parts.append(f"<figure>{_img(out, f)}<figcaption>{e(caption(c, f))}</figcaption></figure>")
        else:
            parts.append(f'<p class=small>Figure <code>{e(Path(f).name)}</code>: shown under '
                         f'<a href="#{e(owner)}">{e(owner)}</a>.</p>')
    return "".join(parts)


def _statistic(c: ClaimResult) -> str:
    rows = flatten(c.statistic)
    body = "".join(f"<tr><td>{e(k)}</td><td>{e(v)}</td></tr>" for k, v in rows[:MAX_ROWS])
    if len(rows) > MAX_ROWS:
        body += f"<tr><td>…</td><td>{len(rows) - MAX_ROWS} more in the raw JSON</td></tr>"
    raw = e(json.dumps(c.statistic, indent=1, default=str))
    return (f'<table class="stat"><tr><th>quantity</th><th>value</th></tr>{body}</table>'
            f"<details><summary>raw statistic (JSON)</summary><pre>{raw}</pre></details>")


def _section(out: Path, c: ClaimResult, meta: dict, owners: dict[str, str], cmp: Comparison | None) -> str:
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
            f"<p><b>Criterion.</b> {e(c.criterion)}</p>{_statistic(c)}{_figures(out, c, owners)}{warn_list}"
            f"{compare}{notes}{_footer(c)}</section>")


def _footer(c: ClaimResult) -> str:
    said, files = provenance(c)
    links = (": " + ", ".join(f'<a href="{e(f)}"><code>{e(f)}</code></a>' for f in files)
             + " (<code>pandas.read_csv</code> loads them)") if files else ""
    return f"<p class=small>Experiment <code>{e(c.experiment)}</code>, {c.wall_s:.1f} s, {e(said)}{links}.</p>"


def _claims_table(claims: list[ClaimResult], meta: dict, cmp: Comparison | None) -> str:
    head = "<tr><th>id</th><th>claim</th><th>verdict</th>"
    head += f"<th>verdict at {e(cmp.size or 'previous')} size</th><th>why they differ</th>" if cmp else ""
    rows = []
    for c in sorted_claims(claims):
        extra = ""
        if cmp is not None:
            _, size_before, prev, why = cmp.pair(c, str(meta.get("size", "")))
            extra = f"<td>{_verdict(prev) if prev else '—'}</td><td>{e(why)}</td>"
        rows.append(f'<tr><td><a href="#{e(c.id)}">{e(c.id)}</a></td><td>{e(c.statement)}</td>'
                    f"<td>{_verdict(c)}</td>{extra}</tr>")
    return f"<table>{head}</tr>{''.join(rows)}</table>"


def _comparison(out: Path, c: ClaimResult, owners: dict[str, str]) -> str:
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
    owners = figure_owners(comparisons)
    return (f"<h2>Comparisons with baselines</h2><p>{e(COMPARISONS_INTRO)}</p>"
            + "".join(_comparison(out, c, owners) for c in comparisons))


def write_report_html(out: Path, claims: list[ClaimResult], meta: dict, configs: dict[str, str], *,
                      compare: Comparison | None = None, comparisons: list[ClaimResult] | None = None) -> Path:
    owners = figure_owners(claims)
    sections = "".join(_section(out, c, meta, owners, compare) for c in sorted_claims(claims))
    sections += _comparisons(out, comparisons or [])
    cfg_html = "".join(f"<details><summary>{e(name)}</summary><pre>{e(text)}</pre></details>"
                       for name, text in configs.items())
    shown = {k: v for k, v in meta.items() if k not in ("sessions", "papers")}
    shown["wall_s"] = time_line(meta)
    rows = [*shown.items(), *sessions_rows(meta)]
    rows += [(f"paper {pid}", p.get("citation", "")) for pid, p in (meta.get("papers") or {}).items()]
    meta_rows = "".join(f"<tr><td>{e(str(k))}</td><td>{e(str(v))}</td></tr>" for k, v in rows)
    notes = ("<p><b>⚠ This reproduce was interrupted: claims marked interrupted have no verdict.</b></p>"
             if meta.get("status") == "interrupted" else "")
    notes += ("<p><em>Quick size: fewer values, seeds and steps; several verdicts can be inconclusive at this "
              "size.</em></p>" if meta.get("size") == "quick" else "")
    side = f" (beside {e(compare.source)})" if compare is not None else ""
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>lipschitz-icl reproduce report</title>
<style>{STYLE}</style></head><body>
<h1>lipschitz-icl reproduce report</h1>
<p class=small>Command: <code>{e(str(meta.get("command", "")))}</code> · wall time: {e(time_line(meta))}</p>{notes}
<h2>Claims{side}</h2>{_claims_table(claims, meta, compare)}
{sections}
<h2>Run information</h2><table>{meta_rows}</table>
<h2>Configs ({len(configs)} run groups, the first run's config of each)</h2>{cfg_html}
</body></html>
"""
    path = out / "report.html"
    atomic_write_text(path, page)
    return path
