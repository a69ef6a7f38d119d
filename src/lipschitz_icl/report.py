"""Writing the reproduce outputs: claims.json, report.md, report.html (self-contained).

Every string that comes from a user or a run (config values, notes, errors) is HTML-escaped.
"""

from __future__ import annotations

import base64
import html
import json
import platform
from pathlib import Path
from typing import Any

import matplotlib
import numpy
import torch

from . import __version__
from .experiments.claims import VERDICTS, ClaimResult, claim_rank
from .store import atomic_write_text

VERDICT_COLOURS = {"supported": "#1a7f37", "not supported": "#cf222e", "inconclusive": "#9a6700"}
README_START, README_END = "<!-- claims:start -->", "<!-- claims:end -->"


def sorted_claims(claims: list[ClaimResult]) -> list[ClaimResult]:
    """Claims in the order of the claims table (experiments.claims.STATEMENTS)."""
    return sorted(claims, key=lambda c: claim_rank(c.id))


def write_claims_json(out: Path, claims: list[ClaimResult], meta: dict) -> Path:
    path = out / "claims.json"
    data = {"meta": meta, "claims": [c.as_dict() for c in sorted_claims(claims)]}
    atomic_write_text(path, json.dumps(data, indent=2, allow_nan=False, default=str) + "\n")
    return path


def claims_table_md(claims: list[ClaimResult], link_root: str = "") -> str:
    lines = ["| claim | verdict | statistic (abridged) | figure |", "|---|---|---|---|"]
    for c in sorted_claims(claims):
        fig = f"[{Path(c.figures[0]).name}]({link_root}{c.figures[0]})" if c.figures else ""
        lines.append(f"| {c.id} | **{c.verdict}** | {_abridge(c.statistic)} | {fig} |")
    return "\n".join(lines)


def _abridge(stat: dict, limit: int = 160) -> str:
    """Scalars of the statistic, and the scalars of its nested mappings one level down."""
    parts = []

    def add(key: str, v) -> None:
        if isinstance(v, float):
            parts.append(f"{key}={v:.3g}")
        elif isinstance(v, int | str | bool) or v is None:
            parts.append(f"{key}={v}")

    for k, v in stat.items():
        if isinstance(v, dict):
            for kk, vv in v.items():
                add(f"{k}[{kk}]", vv)
        else:
            add(k, v)
    text = ", ".join(parts)
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return text.replace("|", "\\|")


def write_report_md(out: Path, claims: list[ClaimResult], meta: dict) -> Path:
    counts = {v: sum(c.verdict == v for c in claims) for v in VERDICTS}
    parts = [
        "# lipschitz-icl reproduce report", "",
        f"Command: `{meta.get('command', '')}` · size: {meta.get('size')} · seed: {meta.get('seed')} · "
        f"wall time: {meta.get('wall_s', 0):.1f} s", "",
        "Verdicts: " + ", ".join(f"{v}: {n}" for v, n in counts.items()), "",
    ]
    if meta.get("size") == "quick":
        parts += ["*Quick size: fewer values, seeds and steps; runs that hit their step budget are dropped from fits, "
                  "so several verdicts can be `inconclusive` at this size.*", ""]
    parts += [claims_table_md(claims), ""]
    for c in sorted_claims(claims):
        parts += [f"## {c.id} — {c.verdict}", "", f"> {c.statement}", "", f"**Criterion.** {c.criterion}", "",
                  "**Statistic.**", "", "```json", json.dumps(c.statistic, indent=1, default=str)[:4000], "```", ""]
        parts += [f"![{c.id}]({f})" for f in c.figures]
        if c.notes:
            parts += ["", f"**Notes.** {c.notes}"]
        parts += ["", f"Experiment `{c.experiment}`, {c.wall_s:.1f} s, {len(c.runs)} runs.", ""]
    path = out / "report.md"
    atomic_write_text(path, "\n".join(parts) + "\n")
    return path


def _img(out: Path, rel: str) -> str:
    p = out / rel
    if not p.is_file():
        return f"<p><em>figure missing: {html.escape(rel)}</em></p>"
    data = base64.b64encode(p.read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(rel)}" src="data:image/png;base64,{data}">'


def write_report_html(out: Path, claims: list[ClaimResult], meta: dict, configs: dict[str, Any]) -> Path:
    e = html.escape
    rows = []
    for c in sorted_claims(claims):
        colour = VERDICT_COLOURS.get(c.verdict, "#555")
        rows.append(f'<tr><td><a href="#{e(c.id)}">{e(c.id)}</a></td><td>{e(c.statement)}</td>'
                    f'<td style="color:{colour};font-weight:bold">{e(c.verdict)}</td><td>{e(c.criterion)}</td></tr>')
    sections = []
    for c in sorted_claims(claims):
        colour = VERDICT_COLOURS.get(c.verdict, "#555")
        figs = "".join(_img(out, f) for f in c.figures)
        sections.append(
            f'<section id="{e(c.id)}"><h2>{e(c.id)} — <span style="color:{colour}">{e(c.verdict)}</span></h2>'
            f"<blockquote>{e(c.statement)}</blockquote><p><b>Criterion.</b> {e(c.criterion)}</p>"
            f"<details open><summary>Statistic</summary><pre>{e(json.dumps(c.statistic, indent=1, default=str))}"
            f"</pre></details>{figs}"
            + (f"<p><b>Notes.</b> {e(c.notes)}</p>" if c.notes else "")
            + f"<p class=small>Experiment <code>{e(c.experiment)}</code>, {c.wall_s:.1f} s, {len(c.runs)} runs"
            f" (under <code>runs/</code>).</p></section>")
    cfg_html = "".join(f"<h3>{e(name)}</h3><pre>{e(text)}</pre>" for name, text in configs.items())
    meta_rows = "".join(f"<tr><td>{e(str(k))}</td><td>{e(str(v))}</td></tr>" for k, v in meta.items())
    quick_note = ("<p><em>Quick size: fewer values, seeds and steps; several verdicts can be inconclusive at this "
                  "size.</em></p>" if meta.get("size") == "quick" else "")
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>lipschitz-icl reproduce report</title>
<style>body{{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}}
table{{border-collapse:collapse;width:100%;font-size:0.9em}}td,th{{border:1px solid #ccc;padding:4px 6px;
vertical-align:top}}th{{background:#f3f3f3}}img{{max-width:100%;border:1px solid #eee;margin:0.5em 0}}
pre{{background:#f6f8fa;padding:0.6em;overflow-x:auto;font-size:0.8em;max-height:24em}}
.small{{font-size:0.8em;color:#555}}blockquote{{color:#444;border-left:3px solid #ccc;margin-left:0;
padding-left:1em}}</style></head><body>
<h1>lipschitz-icl reproduce report</h1>{quick_note}
<h2>Claims</h2><table><tr><th>id</th><th>claim</th><th>verdict</th><th>criterion</th></tr>{''.join(rows)}</table>
{''.join(sections)}
<h2>Run information</h2><table>{meta_rows}</table>
<h2>Configs</h2>{cfg_html}
</body></html>
"""
    path = out / "report.html"
    atomic_write_text(path, page)
    return path


def software_meta() -> dict[str, str]:
    return {"lipschitz_icl": __version__, "torch": torch.__version__, "numpy": numpy.__version__,
            "matplotlib": matplotlib.__version__, "python": platform.python_version(),
            "machine": f"{platform.machine()} {platform.system()}"}


def update_readme(readme: Path, claims: list[ClaimResult], out_dir: str, meta: dict) -> bool:
    """Replace the claims table between the README markers; False when the markers are missing."""
    text = readme.read_text()
    if README_START not in text or README_END not in text:
        return False
    head, _, rest = text.partition(README_START)
    _, _, tail = rest.partition(README_END)
    table = claims_table_md(claims, link_root=f"{out_dir.rstrip('/')}/")
    stamp = (f"Generated by `{meta.get('command')}` ({meta.get('size')} size, seed {meta.get('seed')}, "
             f"{meta.get('wall_s', 0):.0f} s on {meta.get('machine', '?')}, {meta.get('date', '')}).")
    atomic_write_text(readme, f"{head}{README_START}\n{stamp}\n\n{table}\n{README_END}{tail}")
    return True
