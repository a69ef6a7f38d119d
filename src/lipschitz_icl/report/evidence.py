"""The evidence a claim's verdict rests on, laid out for the report (shared by report.md and report.html):
how many distinct settings it read and the invariance that forced it (claims table), the settings'
fingerprints and which were copies of which (``ClaimResult.settings``), the verdict per reading
(``ClaimResult.readings``), what each interval covers (``interval_covers``) and the verdict at a finer
approximation (``refinement``).

A reading (``ClaimResult.readings[name]``) is a mapping; these keys have columns of their own:
``verdict``, ``forced_by``, ``distinct_settings`` (or ``distinct``); every other scalar, or list of
scalars, is shown among its key numbers."""

from __future__ import annotations

from typing import Any

from ..experiments.claims import ClaimResult
from ..experiments.controls import counts
from .text import compact, fmt

READING_HEAD = ("reading", "verdict", "forced by", "distinct settings", "key numbers")
SETTINGS_HEAD = ("shape fingerprint", "settings (first: the one counted)", "copies of the first, by invariance")
COVERS_HEAD = ("interval", "value", "what it covers")
_READING_OWN = ("verdict", "forced", "forced_by", "distinct_settings", "distinct")
MAX_NUMBERS = 6  # key numbers shown per reading


def distinct_cell(c: ClaimResult) -> str:
    """The claims table's "distinct settings": 'n of m' when the claim grouped its settings, else '—'."""
    if c.distinct_settings is None:
        return "—"
    total = (c.settings or {}).get("settings")
    return f"{c.distinct_settings} of {total}" if isinstance(total, int) else str(c.distinct_settings)


def forced_by_cell(c: ClaimResult) -> str:
    """The claims table's "forced by": the invariance that fixed the outcome, else the recorded reason of a
    forced claim, else ''."""
    if c.forced_by:
        return c.forced_by
    return c.forced_reason if c.forced else ""


def settings_rows(c: ClaimResult) -> list[tuple[str, str, str]]:
    """(fingerprint, members, copies) per distinct setting."""
    rows = []
    for group in (c.settings or {}).get("groups") or []:
        members = [str(m) for m in group.get("members") or []]
        copies = group.get("copies") or {}
        said = "; ".join(f"{m}: {', '.join(map(str, by)) if isinstance(by, list) else by}"
                         for m, by in copies.items())
        rows.append((str(group.get("fingerprint", "")), ", ".join(members), said or "none"))
    return rows


def settings_line(c: ClaimResult) -> str:
    """One sentence over the grouping: how many settings, how many distinct, and what a statistic reads."""
    s = c.settings or {}
    if not s:
        return ""
    by = {"shape": "the shape (blind to time and loss scales)", "run": "the run (the time scale kept: groups can "
          "share a shape fingerprint)", "loss": "the run at its loss scale (time and loss scales kept: groups can "
          "share a shape fingerprint)"}
    return (f"{s.get('settings', '?')} settings, {s.get('distinct', '?')} distinct, grouped by "
            f"{by.get(str(s.get('by')), s.get('by'))}; statistics, fits and intervals count one per distinct "
            "setting.")


def reading_rows(c: ClaimResult) -> list[tuple[str, str, str, str, str]]:
    """(reading, verdict, forced by, distinct settings, key numbers) per reading."""
    rows = []
    for name, r in (c.readings or {}).items():
        if not isinstance(r, dict):
            rows.append((str(name), compact(r), "", "", ""))
            continue
        distinct = r.get("distinct_settings", r.get("distinct"))
        forced_by = r.get("forced_by") or ("forced" if r.get("forced") else "")
        numbers = [(k, v) for k, v in r.items() if k not in _READING_OWN and _is_number_like(v)]
        shown = ", ".join(f"{k} = {compact(v)}" for k, v in numbers[:MAX_NUMBERS])
        more = f" … ({len(numbers) - MAX_NUMBERS} more)" if len(numbers) > MAX_NUMBERS else ""
        rows.append((str(name), str(r.get("verdict", "—")), str(forced_by), fmt(distinct), shown + more))
    return rows


def _is_number_like(v: Any) -> bool:
    scalar = (int, float, str, type(None))
    return isinstance(v, scalar) or (isinstance(v, list | tuple) and all(isinstance(x, scalar) for x in v))


def covers_rows(c: ClaimResult) -> list[tuple[str, str, str]]:
    """(interval, its value, what it covers) for every interval and every statement of what one covers."""
    names = list(c.interval) + [n for n in (c.interval_covers or {}) if n not in c.interval]
    rows = []
    for name in names:
        value = c.interval.get(name)
        shown = f"[{fmt(value[0])}, {fmt(value[1])}]" if isinstance(value, list | tuple) and len(value) == 2 else "—"
        rows.append((name, shown, (c.interval_covers or {}).get(name, "not stated")))
    return rows


def refinement_line(c: ClaimResult) -> str:
    """The verdict at a finer approximation, and whether it agrees ('' when the claim was not refined)."""
    r = c.refinement or {}
    if not r:
        return ""
    agrees = r.get("agrees")
    said = ("the same verdict: it stands" if agrees else
            "a different verdict: the approximation decides it, so the claim is inconclusive")
    stat = r.get("statistic") or {}
    numbers = f" ({compact(stat)})" if stat else ""
    return f"Recomputed with {r.get('approximation', '?')}: {r.get('verdict', '?')}{numbers}, {said}."



CONTROLS_HEAD = ("case", "the claim's rule says", "statistic", "data")


def controls_rows(c: ClaimResult) -> list[tuple[str, str, str, str]]:
    """(case, verdict, statistic, what the data is) per control of ``c`` (null first), [] when it has none."""
    rows = []
    for name, case in (c.controls or {}).items():
        if isinstance(case, dict) and "verdict" in case:
            stat = ", ".join(f"{k}={compact(v)}" for k, v in list((case.get("statistic") or {}).items())[:4])
            rows.append((name, str(case["verdict"]), stat, str(case.get("how", ""))))
    return rows


def controls_line(c: ClaimResult) -> str:
    """One sentence: can the claim's rule fail, shown by its controls (or that it has none)."""
    if c.can_fail is None:
        return ("Controls missing: the claim's rule was not run on a null and a planted case, so this verdict is "
                "not counted as evidence.")
    if c.can_fail:
        return "Can fail: the claim's rule rejects its null and accepts its planted case."
    why = (c.controls or {}).get("why", "")
    return f"Cannot fail, not evidence: {why}." if why else "Cannot fail, not evidence."


def counts_line(claims: list[ClaimResult]) -> str:
    """The headline counts: claims, evidence, forced, cannot fail, controls missing, inconclusive."""
    return ", ".join(f"{name}: {n}" for name, n in counts(claims).items())
