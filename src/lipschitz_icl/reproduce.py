"""``reproduce``: run the experiments of the named suites and write claims.json, report.md,
report.html and figures under one directory. The Python API behind the CLI command.

``out/reproduce.json`` records the options (suite, size, seed, package version); a rerun with the
same options into the same directory resumes: finished experiments (``out/experiments/``) are
reused, the rest run. Ctrl-C writes the report with the unfinished claims marked interrupted and
raises ``ExperimentsInterrupted``."""

from __future__ import annotations

import datetime as _dt
import json
import time
from pathlib import Path

from . import __version__
from .experiments import experiments_for, run_experiments, suite_names
from .experiments.checkpoint import ExperimentLog, ExperimentsInterrupted
from .experiments.claims import ClaimResult
from .experiments.runner import Context, ProgressHook
from .report import software_meta, write_claims_json, write_report_html, write_report_md
from .store import atomic_write_json, deferred_signals

MANIFEST_FILE = "reproduce.json"  # the options an output directory was made with


def available_suites() -> list[str]:
    """The suite names of the experiment registry, in claims-table order (``all`` runs them all)."""
    return suite_names()


def options_of(suite: str, quick: bool, seed: int) -> dict:
    """What makes two reproduce outputs comparable (workers do not change the numbers)."""
    return {"suite": suite, "size": "quick" if quick else "full", "seed": seed, "version": __version__}


def recorded_options(out: Path) -> dict | None:
    """The options ``out`` was made with, or None when it is not a reproduce output."""
    try:
        data = json.loads((out / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def reproduce(
    suite: str,
    out: Path,
    *,
    quick: bool = False,
    seed: int = 0,
    workers: int = 1,
    progress: ProgressHook | None = None,
    command: str = "",
    resume: bool = False,
    log: ExperimentLog | None = None,
) -> tuple[list[ClaimResult], dict]:
    """Run a suite (one of ``available_suites()``, or ``all``) and write its report into ``out``.

    ``resume`` reuses the experiments already finished in ``out`` with the same options. On Ctrl-C
    the report is still written (meta ``status: interrupted``) and ``ExperimentsInterrupted``
    (a KeyboardInterrupt, with ``claims`` and ``meta``) is raised."""
    names = available_suites() if suite == "all" else [suite]
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / MANIFEST_FILE, options_of(suite, quick, seed))
    ctx = Context(out=out, quick=quick, seed=seed, workers=workers, progress=progress)
    start = time.perf_counter()
    stopped: ExperimentsInterrupted | None = None
    try:
        claims = run_experiments(ctx, experiments_for(names), resume=resume, log=log)
    except ExperimentsInterrupted as stop:
        claims, stopped = stop.claims, stop
    meta = {
        "command": command or f"lipschitz-icl reproduce {suite}" + (" --quick" if quick else ""),
        "suites": ", ".join(names), "size": "quick" if quick else "full", "seed": seed,
        "wall_s": round(time.perf_counter() - start, 1),
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), **software_meta(),
        "status": "interrupted" if stopped is not None else "finished",
    }
    with deferred_signals():  # a further Ctrl-C waits until the report is whole
        configs = _configs_used(out)
        write_claims_json(out, claims, meta)
        write_report_md(out, claims, meta)
        write_report_html(out, claims, meta, configs)
    if stopped is not None:
        stopped.meta = meta
        raise stopped
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
