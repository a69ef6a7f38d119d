"""The words of the reproduce report: numbers formatted, statistics flattened into rows, a
plain-language reason for each verdict, figure captions, and why two runs of a claim disagree.

Pure functions of a ClaimResult (and of the run warnings ``report_data.run_warnings`` found)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from ..experiments.claims import NOT_SUPPORTED, SUPPORTED, ClaimResult
from .deciding import deciding

MAX_ROWS = 60  # statistic rows shown in a table; the raw JSON holds the rest
MAX_ITEMS = 12  # items of a list shown inline


def fmt(value: Any) -> str:
    """A number to 4 significant digits (scientific outside [1e-3, 1e5)); None as an em dash."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        if value == 0:
            return "0"
        return f"{value:.3g}" if abs(value) >= 1e5 or abs(value) < 1e-3 else f"{value:.4g}"
    return str(value)


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, bool | int | float | str)


def flatten(stat: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """(name, formatted value) rows: nested mappings as ``outer › inner``, lists of scalars inline."""
    rows: list[tuple[str, str]] = []
    for key, v in stat.items():
        name = f"{prefix} › {key}" if prefix else str(key)
        if isinstance(v, dict):
            rows += flatten(v, name) if v else [(name, "{}")]
        elif isinstance(v, list | tuple) and all(_is_scalar(x) for x in v):
            shown = ", ".join(fmt(x) for x in v[:MAX_ITEMS])
            rows.append((name, f"[{shown}{', …' if len(v) > MAX_ITEMS else ''}]" + (
                f" ({len(v)} values)" if len(v) > MAX_ITEMS else "")))
        elif isinstance(v, list | tuple):
            for i, x in enumerate(v):
                rows += flatten(x, f"{name}[{i}]") if isinstance(x, dict) else [(f"{name}[{i}]", fmt(x))]
        else:
            rows.append((name, fmt(v)))
    return rows


def numbers(stat: dict[str, Any]) -> dict[str, float]:
    """The statistic's numeric leaves (booleans excluded), by flattened name."""
    out: dict[str, float] = {}
    for key, v in stat.items():
        if isinstance(v, dict):
            out.update({f"{key} › {k}": x for k, x in numbers(v).items()})
        elif isinstance(v, int | float) and not isinstance(v, bool):
            out[str(key)] = float(v)
    return out


def ranked_rows(stat: dict[str, Any], criterion: str = "") -> list[tuple[str, str]]:
    """The statistic's rows (``flatten``) without unmeasured or empty values, those the criterion
    names first: a row whose last name part (or its stem before ``_``) occurs in the criterion, or a
    reading's verdict, is what the verdict was decided on."""
    rows = [(k, v) for k, v in flatten(stat) if v not in ("—", "[]", "{}")]
    words = {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", criterion)}

    def score(name: str) -> int:
        leaf = name.split(" › ")[-1].split("[")[0].lower()
        stem = leaf.split("_")[0]
        if leaf == "verdict" or (len(leaf) > 3 and leaf in words):
            return 2
        return 1 if len(stem) > 3 and stem in words else 0

    return sorted(rows, key=lambda row: -score(row[0]))


def headline(stat: dict[str, Any], limit: int = 4, criterion: str = "") -> str:
    """The first ``limit`` rows of ``ranked_rows`` as ``name = value; ...``."""
    return "; ".join(f"{k} = {v}" for k, v in ranked_rows(stat, criterion)[:limit])


def compact(value: Any) -> str:
    """A value on one line: a mapping as ``key: value, ...`` (nested ones in parentheses), a list in
    brackets, a number by ``fmt``."""
    if isinstance(value, dict):
        return ", ".join(f"{k}: ({compact(v)})" if isinstance(v, dict) else f"{k}: {compact(v)}"
                         for k, v in value.items()) or "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(compact(v) for v in value) + "]"
    return fmt(value)


def decided_by(c: ClaimResult) -> str:
    """The deciding quantities with their values and thresholds: ``name = value (rule); ...``."""
    return "; ".join(f"{name} = {compact(value)} ({rule})" for name, value, rule in deciding(c))


def is_interrupted(c: ClaimResult) -> bool:
    return c.statistic.get("status") == "interrupted"


def reason(c: ClaimResult, warnings: list[str] | None = None) -> str:
    """One paragraph saying, in plain words, why the claim got its verdict."""
    if is_interrupted(c):
        return ("No verdict: the experiment was interrupted (Ctrl-C or SIGTERM) before it finished, so the claim "
                "is inconclusive by rule. Run the same command again (or add --resume; from Python, reproduce(..., "
                "resume=True)) to finish it.")
    if c.criterion == "(experiment failed)":
        return (f"No verdict: the experiment raised an error ({c.statistic.get('error', '?')}), so the claim is "
                "inconclusive by rule; the traceback is in the notes.")
    parts = [f"Forced, not evidence: {c.forced_reason or 'no reason recorded'}. The outcome ({c.verdict}) could "
             "not have come out otherwise on this data."] if c.forced else []
    parts.append(_verdict_sentence(c))
    if "ended interrupted or failed" in c.notes:
        parts.append("The verdict was set to inconclusive because some of its runs ended interrupted or failed.")
    if c.censored:
        parts.append(f"{c.censored} run(s) are censored (they did not reach their target within the step budget); "
                     "they are counted, not dropped, and a verdict resting on them is weaker.")
    if c.interval:
        parts.append("Intervals: " + "; ".join(f"{k} in [{fmt(_at(v, 0))}, {fmt(_at(v, 1))}]"
                                               for k, v in c.interval.items()) + ".")
    if c.size:
        parts.append(f"Measured at {c.size} size" + (" (fewer values, seeds and steps than full size)."
                                                    if c.size in ("quick", "tiny") else "."))
    if warnings:
        parts.append(f"{len(warnings)} of its {len(c.runs)} runs ended at step 0 or were interrupted "
                     "(see the warning): those runs are not evidence of learning.")
    return " ".join(parts)


def _at(v: Any, i: int) -> Any:
    return v[i] if isinstance(v, list | tuple) and len(v) > i else None


def _verdict_sentence(c: ClaimResult) -> str:
    decided = decided_by(c)
    if decided:
        word = {SUPPORTED: "Supported", NOT_SUPPORTED: "Not supported"}.get(c.verdict, "Inconclusive")
        tail = (f" What would decide it: {c.undecided_because}." if c.verdict not in (SUPPORTED, NOT_SUPPORTED)
                and c.undecided_because else "")
        return f"{word}. Decided by {decided}.{tail}"
    measured = headline(c.statistic, criterion=c.criterion) or "nothing"
    if c.verdict == SUPPORTED:
        return (f"Supported: the measured statistic ({measured}) meets the criterion's condition for support and "
                "not its condition for refutation.")
    if c.verdict == NOT_SUPPORTED:
        return (f"Not supported: the measured statistic ({measured}) meets the criterion's condition for refutation "
                "and not its condition for support, so the measurement contradicts the claim as tested.")
    tail = (f" What would decide it: {c.undecided_because}." if c.undecided_because
            else " The experiment did not record what would decide it.")
    return (f"Inconclusive: the measured statistic ({measured}) meets neither of the criterion's conditions "
            f"(or both).{tail}")


def provenance(c: ClaimResult) -> tuple[str, list[str]]:
    """Where an experiment's data is, for the footer of its claims: (the sentence, the files to link)."""
    if c.runs:
        groups = sorted({"/".join(r.split("/")[:2]) + "/" for r in c.runs})
        return f"{len(c.runs)} runs, under {', '.join(groups)}", []
    if c.data:
        return "no runs (it trains outside the run engine); its trajectories and tables", list(c.data)
    return "no runs of its own: the statistic above holds every number its verdict uses", []


def caption(c: ClaimResult, figure: str) -> str:
    """The experiment's caption for ``figure`` (ClaimResult.captions), else one from the claim."""
    given = (c.captions or {}).get(figure)
    if given:
        return given
    return (f"{Path(figure).stem} ({c.id}). What to look at: the curves or points the statistic above is computed "
            "from; read them against the criterion (no caption was given by the experiment).")


def redraw(c: ClaimResult, meta: dict) -> tuple[str, list[str]]:
    """The command that redraws ``c``'s figures alone (its experiment only, at this report's size, seed and plugins),
    and the run folders whose config.yaml files the figures are drawn from."""
    flags = ["--quick"] if meta.get("size") == "quick" else []
    flags += [f"--seed {meta['seed']}"] if meta.get("seed") else []
    flags += [f"--plugins {p}" for p in re.findall(r"--plugins[ =](\S+)", str(meta.get("command", "")))]
    command = " ".join(["lipschitz-icl reproduce", c.id, *flags, f"--out redraw-{c.id}"])
    return command, sorted({str(Path(r).parent) + "/" for r in c.runs})


COMPARISONS_INTRO = ("Not claims of the paper: how the trained model compares with standard predictors on the same "
                     "prompts. There is no criterion and no verdict; read the numbers and the figure.")


def comparison_warnings(c: ClaimResult) -> list[str]:
    """A comparison's warnings (a baseline that is trivially exact, say), from its statistic."""
    found = c.statistic.get("warnings") or []
    return [str(w) for w in found] if isinstance(found, list) else [str(found)]


def why_differs(now: ClaimResult, before: ClaimResult, size_now: str, size_before: str) -> str:
    """Why the verdicts of two runs of a claim differ ('' when they agree), from their statistics and flags."""
    if now.verdict == before.verdict:
        return ""
    reasons: list[str] = []
    for c, label in ((before, size_before or "before"), (now, size_now or "now")):
        if is_interrupted(c):
            reasons.append(f"the {label} run was interrupted")
    if now.censored != before.censored:
        reasons.append(f"censored runs {before.censored} ({size_before}) vs {now.censored} ({size_now})")
    if now.forced != before.forced:
        reasons.append(f"forced only at {size_now if now.forced else size_before} size")
    for name in sorted(set(now.interval) & set(before.interval)):
        a, b = before.interval[name], now.interval[name]
        if None not in (_at(a, 0), _at(a, 1), _at(b, 0), _at(b, 1)):
            overlap = a[0] <= b[1] and b[0] <= a[1]
            reasons.append(f"interval of {name} [{fmt(a[0])}, {fmt(a[1])}] vs [{fmt(b[0])}, {fmt(b[1])}] "
                           f"({'overlapping: the difference is within the uncertainty' if overlap else 'disjoint'})")
    reasons += _changed_numbers(before.statistic, now.statistic, now.criterion)
    if not reasons:
        reasons.append("no statistic in common changed; compare the raw statistics")
    return (f"{before.verdict} at {size_before or 'before'} vs {now.verdict} at {size_now or 'now'}: "
            + "; ".join(reasons) + f". Criterion: {now.criterion}")


def _changed_numbers(a: dict, b: dict, criterion: str = "", limit: int = 4) -> list[str]:
    """The numbers that moved: first those the criterion names (e.g. ``breakpoint``), then censoring
    counts, then the largest relative changes."""
    na, nb = numbers(a), numbers(b)
    text = criterion.lower()
    changes = []
    for k in set(na) & set(nb):
        x, y = na[k], nb[k]
        if math.isfinite(x) and math.isfinite(y) and x != y:
            leaf = k.rsplit(" › ", 1)[-1].lower()
            named = leaf in text or leaf.replace("_", " ") in text
            changes.append((named, "censor" in leaf, abs(y - x) / max(abs(x), abs(y), 1e-300), k, x, y))
    changes.sort(reverse=True)
    out = [f"{k} {fmt(x)} → {fmt(y)}" for *_, k, x, y in changes[:limit]]
    gone = sorted(k for k in set(na) ^ set(nb))[:limit]
    if gone:
        out.append("measured in only one of them: " + ", ".join(gone))
    return out



def time_line(meta: dict) -> str:
    """The job's wall time over all its sessions, each session's time and how it ended (a resumed output
    is the work of several), e.g. '95.3 s over 2 sessions (30.1 s, interrupted; 65.2 s, finished)'."""
    total = float(meta.get("wall_s") or 0.0)
    sessions = [s for s in meta.get("sessions") or [] if isinstance(s, dict)]
    if len(sessions) <= 1:
        return f"{total:.1f} s"
    parts = "; ".join(f"{float(s.get('wall_s') or 0.0):.1f} s, {s.get('status', '?')}" for s in sessions)
    return f"{total:.1f} s over {len(sessions)} sessions ({parts})"


def sessions_rows(meta: dict) -> list[tuple[str, str]]:
    """(label, text) per session: when it ran, its command and how it ended."""
    return [(f"session {i}", f"{s.get('start', '?')} to {s.get('end', '?')}, {float(s.get('wall_s') or 0.0):.1f} s, "
             f"{s.get('status', '?')}: {s.get('command', '')}")
            for i, s in enumerate(meta.get("sessions") or [], 1) if isinstance(s, dict)]


def paper_opening(c: ClaimResult, previous: ClaimResult | None, meta: dict) -> tuple[str, str, str] | None:
    """(paper id, citation, what was reachable) when ``c`` opens its paper's group of claims in a report that
    holds claims of several papers, else None (the same paper as ``previous``, or one paper in all)."""
    papers = meta.get("papers") or {}
    if len(papers) < 2 or not c.paper or (previous is not None and previous.paper == c.paper):
        return None
    paper = papers.get(c.paper, {})
    return c.paper, str(paper.get("citation", "")), str(paper.get("reachable", ""))

