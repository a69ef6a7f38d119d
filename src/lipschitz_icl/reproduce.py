"""``reproduce``: run the experiments of the named suites and write claims.json, report.md,
report.html and figures under one directory. The Python API behind the CLI command."""

from __future__ import annotations

import datetime as _dt
import time
from pathlib import Path

from .experiments import experiments_for, run_experiments, suite_names
from .experiments.claims import ClaimResult
from .experiments.runner import Context, ProgressHook
from .report import software_meta, write_claims_json, write_report_html, write_report_md


def available_suites() -> list[str]:
    """The suite names of the experiment registry, in claims-table order (``all`` runs them all)."""
    return suite_names()


def reproduce(
    suite: str,
    out: Path,
    *,
    quick: bool = False,
    seed: int = 0,
    workers: int = 1,
    progress: ProgressHook | None = None,
    command: str = "",
) -> tuple[list[ClaimResult], dict]:
    """Run a suite (one of ``available_suites()``, or ``all``) and write its report into ``out``."""
    names = available_suites() if suite == "all" else [suite]
    out.mkdir(parents=True, exist_ok=True)
    ctx = Context(out=out, quick=quick, seed=seed, workers=workers, progress=progress)
    start = time.perf_counter()
    claims = run_experiments(ctx, experiments_for(names))
    meta = {
        "command": command or f"lipschitz-icl reproduce {suite}" + (" --quick" if quick else ""),
        "suites": ", ".join(names), "size": "quick" if quick else "full", "seed": seed,
        "wall_s": round(time.perf_counter() - start, 1),
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), **software_meta(),
    }
    configs = _configs_used(out)
    write_claims_json(out, claims, meta)
    write_report_md(out, claims, meta)
    write_report_html(out, claims, meta, configs)
    return claims, meta


def _configs_used(out: Path, limit: int = 12) -> dict[str, str]:
    """One resolved config per run group (the first run's), for the report."""
    found: dict[str, str] = {}
    runs_root = out / "runs"
    if not runs_root.is_dir():
        return found
    for group in sorted(p for p in runs_root.iterdir() if p.is_dir()):
        cfgs = sorted(group.glob("*/config.yaml"))
        if cfgs:
            found[f"{group.name} (first of {len(cfgs)} runs: {cfgs[0].parent.name})"] = cfgs[0].read_text()
        if len(found) >= limit:
            break
    return found
