"""What the reproduce report reads back from an output directory: claims.json, the runs' summaries
(warnings for runs that ended at step 0 or were interrupted) and the configs of every run group."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UserInputError
from ..experiments.claims import ClaimResult, claim_rank
from ..plots.files import FOLD_KEY, png_notes
from ..store import SUMMARY_FILE
from .text import why_differs

CLAIM_FIELDS = {f.name for f in dataclasses.fields(ClaimResult)}
WARN_STATUSES = ("interrupted", "failed", "trivial")


def load_claims(path: Path) -> tuple[dict[str, Any], list[ClaimResult]]:
    """(meta, claims) of a claims.json (or of the output directory holding one); UserInputError
    when it is missing or not a reproduce claims.json."""
    path = path / "claims.json" if path.is_dir() else path
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        claims = [ClaimResult(**{k: v for k, v in c.items() if k in CLAIM_FIELDS}) for c in data["claims"]]
        meta = data.get("meta") or {}
    except FileNotFoundError:
        raise UserInputError(f"{path}: no such file (a reproduce output directory holds claims.json)") from None
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
        raise UserInputError(f"{path}: not a reproduce claims.json ({type(e).__name__}: {e})") from None
    if not isinstance(meta, dict):
        raise UserInputError(f"{path}: not a reproduce claims.json (meta is not a mapping)")
    return meta, claims


def run_warnings(out: Path, runs: list[str]) -> list[str]:
    """'<run>: <why>' for each run that ended at step 0 (trivial, or diverged at once) or did not end
    normally (interrupted, failed, or no readable summary)."""
    found = []
    for rel in runs:
        try:
            summary = json.loads((out / rel / SUMMARY_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            found.append(f"{rel}: no readable summary")
            continue
        status, steps = summary.get("status"), summary.get("steps")
        if status in WARN_STATUSES:
            found.append(f"{rel}: {status} at step {steps}")
        elif steps == 0:
            found.append(f"{rel}: ended at step 0 ({status})")
    return found


def configs_used(out: Path) -> dict[str, str]:
    """One resolved config per run group (its first run's), for every group under ``out/runs``."""
    found: dict[str, str] = {}
    runs_root = out / "runs"
    if not runs_root.is_dir():
        return found
    for group in sorted(p for p in runs_root.iterdir() if p.is_dir()):
        cfgs = sorted(group.glob("*/config.yaml"))
        if cfgs:
            found[f"{group.name} (first of {len(cfgs)} runs: {cfgs[0].parent.name})"] = cfgs[0].read_text()
    return found


def split_results(results: list[ClaimResult]) -> tuple[list[ClaimResult], list[ClaimResult]]:
    """(the claims, the comparisons with baselines), each in report order."""
    ordered = sorted_claims(results)
    return [c for c in ordered if not c.comparison], [c for c in ordered if c.comparison]


def sorted_claims(claims: list[ClaimResult]) -> list[ClaimResult]:
    """Claims in the order of the claims table (experiments.claims.STATEMENTS)."""
    return sorted(claims, key=lambda c: claim_rank(c.id))


def fold_note(out: Path, rel: str) -> str:
    """For a figure ``plots.save`` laid out in fewer columns than drawn (to fit the page), the sentence that
    says how its caption's positions map; else ''."""
    try:
        drawn, shown = png_notes((out / rel).read_bytes()).get(FOLD_KEY, "").split()
    except (OSError, ValueError):
        return ""
    return (f"Laid out in {shown} columns to fit the page (drawn in rows of {drawn}): each row of {drawn} panels "
            f"continues on the next row, so a caption's rows, left, middle and right mean the panels' order, row "
            "by row. ")


@dataclass(frozen=True)
class Owner:
    """Where a figure is shown: the claim and the file (another path when two files hold the same bytes)."""

    claim: str
    figure: str


def _figure_key(out: Path | None, rel: str) -> str:
    """A figure's identity: the sha256 of its bytes (two paths with the same PNG are one figure), else its path."""
    try:
        return hashlib.sha256((out / rel).read_bytes()).hexdigest() if out is not None else rel
    except OSError:
        return rel


def figure_owners(claims: list[ClaimResult], out: Path | None = None) -> dict[str, Owner]:
    """Figure path -> where it is shown: the first claim (report order) that has it, or a file with the
    same bytes under ``out``; later claims refer to it."""
    first: dict[str, Owner] = {}
    owners: dict[str, Owner] = {}
    for c in sorted_claims(claims):
        for f in c.figures:
            owners.setdefault(f, first.setdefault(_figure_key(out, f), Owner(c.id, f)))
    return owners


@dataclass
class Comparison:
    """A previous reproduce output's verdicts, shown beside this one's (``--compare-with``)."""

    size: str  # the previous output's size (quick | full)
    claims: dict[str, ClaimResult]  # by claim id
    source: str = ""  # where it was read from

    @classmethod
    def load(cls, path: Path) -> Comparison:
        meta, claims = load_claims(path)
        return cls(str(meta.get("size", "")), {c.id: c for c in claims}, str(path))

    def pair(self, c: ClaimResult, size_now: str) -> tuple[str, str, ClaimResult | None, str]:
        """(size here, size there, the claim there or None, why the verdicts differ or '')."""
        prev = self.claims.get(c.id)
        size, size_before = c.size or size_now, ((prev.size or self.size) if prev else self.size)
        why = why_differs(c, prev, size, size_before) if prev else "not in the previous run"
        return size, size_before, prev, why
