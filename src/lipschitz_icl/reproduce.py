"""``reproduce``: run the experiments of the named suites or claims and write claims.json, report.md,
report.html and figures under one directory. The Python API behind the CLI command.

``out/reproduce.json`` records the options (suite, size, seed, kernel step, package version); a rerun with the
same options into the same directory resumes: finished experiments (``out/experiments/``) are
reused, the rest run. Ctrl-C writes the report with the unfinished claims marked interrupted and
raises ``ExperimentsInterrupted``."""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import time
from pathlib import Path

from . import __version__
from .errors import UserInputError
from .experiments import claim_ids, experiments_for, experiments_for_claims, run_experiments, suite_names, suites
from .experiments.checkpoint import FAILED_CRITERION, ExperimentLog, ExperimentsInterrupted
from .experiments.claims import STATEMENTS, ClaimResult
from .experiments.registry import Experiment, paper_claims, paper_ids, papers
from .experiments.runner import FINISHED_STATUSES, Context, ProgressHook
from .interrupts import deferred_signals
from .numba_support import fused_available, resolve_fused
from .papers import load_plugins
from .report import Comparison, software_meta, write_report
from .store import atomic_write_json
from .threads import cores
from .tracking import check_tracker

MANIFEST_FILE = "reproduce.json"  # the options an output directory was made with, and its sessions
MAX_SEED = 2**31 - 1  # experiments add small offsets to the seed; every config seed stays far inside int64
# what reproduce writes into its output directory (--force removes these, and nothing else)
OUTPUT_ENTRIES = ("experiments", "runs", "data", "figures", "comparisons", "features", "claims.json", "claims.csv",
                  "claims.tex", "report.md", "report.html", MANIFEST_FILE)


def available_suites() -> list[str]:
    """The suite names of the experiment registry, in claims-table order (``all`` runs them all)."""
    return suite_names()


def available_papers() -> list[str]:
    """The ids of the registered papers (built-in, and plugins' once loaded), in report order."""
    return paper_ids()


def _canonical(names: list[str]) -> list[str]:
    """Each name once, in a fixed order (suites, then papers, then claims, each in registry order), so the
    same selection always reads the same (``B4 H1`` and ``H1 B4`` are one set of options)."""
    if "all" in names:
        return ["all"]
    order = [*available_suites(), *available_papers(), *claim_ids()]
    return sorted(set(names), key=order.index)


def resolve_targets(targets: list[str]) -> tuple[list[str], list[Experiment]]:
    """Suite names (``all`` too), paper ids and claim ids (any case) -> (the names, normalised and in
    canonical order; the experiments they need, each once, in claims-table order). An unknown name raises
    UserInputError naming the allowed ones."""
    suites, paper_names, claims = available_suites(), available_papers(), claim_ids()
    by_upper = {c.upper(): c for c in claims}
    names: list[str] = []
    for t in targets or ["all"]:
        name = t if t in suites or t in paper_names or t == "all" else by_upper.get(t.upper())
        if name is None:
            raise UserInputError(f"{t!r} is neither a suite, a paper nor a claim id (suites: "
                                 f"{', '.join([*suites, 'all'])}; papers: {', '.join(paper_names)}; "
                                 f"claims: {', '.join(claims)})")
        names.append(name)
    names = _canonical(names)
    if names == ["all"]:
        return names, experiments_for(suites)
    wanted = [c for n in names if n in paper_names for c in paper_claims(n)] + [n for n in names if n in claims]
    chosen = experiments_for([n for n in names if n in suites])
    chosen += [e for e in experiments_for_claims(wanted) if e not in chosen]
    order = {e: i for i, e in enumerate(experiments_for(suites))}
    return names, sorted(chosen, key=lambda e: order.get(e, len(order)))


def listing() -> dict:
    """What ``reproduce --list`` shows: the papers with their claims (statement, experiment, suites) and
    the suites with their experiments, from the registries."""
    by_claim = {cid: exp for exp in experiments_for(available_suites()) for cid in exp.claims}
    out = {"papers": [], "suites": {}}
    for paper in papers():
        rows = [{"id": cid, "statement": STATEMENTS.get(cid, ""), "experiment": by_claim[cid].__name__,
                 "module": by_claim[cid].__module__, "suites": list(by_claim[cid].suites)}
                for cid in paper_claims(paper.id)]
        if rows:
            out["papers"].append({"id": paper.id, **paper.as_meta(), "claims": rows})
    for name, exps in suites().items():
        out["suites"][name] = [{"experiment": e.__name__, "claims": list(e.claims)} for e in exps]
    return out


def listing_markdown() -> str:
    """``listing()`` as markdown: per paper its citation, what of it was reachable and a table of its claims
    (docs/CLAIMS.md holds this text between its ``papers`` markers; a test keeps the two equal)."""
    data, parts = listing(), []
    for paper in data["papers"]:
        parts += [f"### {paper['id']}: {paper['citation']}", "", f"Reachable: {paper['reachable']}", "",
                  "| id | claim | experiment | suites |", "|---|---|---|---|"]
        for row in paper["claims"]:
            where = row["module"].replace("lipschitz_icl.", "").replace(".", "/") + ".py"
            statement = row["statement"].replace("|", "\\|")
            suites_of = ", ".join(row["suites"])
            parts.append(f"| {row['id']} | {statement} | `{row['experiment']}` (`{where}`) | {suites_of} |")
        parts.append("")
    parts += ["### Suites", "", "| suite | experiments (claims) |", "|---|---|"]
    for name, exps in data["suites"].items():
        parts.append(f"| {name} | " + "; ".join(f"`{e['experiment']}` ({', '.join(e['claims'])})" for e in exps) + " |")
    return "\n".join(parts) + "\n"


def check_seed(seed: int, option: str = "seed") -> int:
    """``seed`` when it is a whole number in [0, MAX_SEED], else UserInputError naming ``option``."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise UserInputError(f"{option}: {seed!r} is out of range (allowed: a whole number from 0 to {MAX_SEED})")
    return seed


def check_jobs(jobs: int | None, option: str = "jobs") -> int:
    """``jobs`` when it is a whole number >= 1; None: one per core (``threads.cores``); else UserInputError."""
    if jobs is None:
        return cores()
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise UserInputError(f"{option}: {jobs!r} is not allowed (a whole number >= 1: experiments at a time)")
    return jobs


def kernel_step_name(fused: bool) -> str:
    return "fused (numba)" if fused else "unfused (torch)"


def options_of(suite: str, quick: bool, seed: int, fused: bool = False, plugins: list[str] | None = None) -> dict:
    """What makes two reproduce outputs comparable (workers do not change the numbers; the fused
    step changes them within 1e-12 relative, but a resume never mixes the two)."""
    options = {"suite": suite, "size": "quick" if quick else "full", "seed": seed,
               "kernel_step": kernel_step_name(fused), "version": __version__}
    return {**options, "plugins": list(plugins)} if plugins else options


def _manifest(out: Path) -> dict | None:
    try:
        data = json.loads((out / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def recorded_options(out: Path) -> dict | None:
    """The options ``out`` was made with, or None when it is not a reproduce output."""
    data = _manifest(out)
    return None if data is None else {k: v for k, v in data.items() if k != "sessions"}


def recorded_sessions(out: Path) -> list[dict]:
    """The sessions that wrote ``out`` (start, end, wall_s, command, status, exit), oldest first."""
    sessions = (_manifest(out) or {}).get("sessions")
    return [s for s in sessions if isinstance(s, dict)] if isinstance(sessions, list) else []


def finished_runs(out: Path) -> int:
    """How many runs under ``out/runs`` ended normally (a resume reuses them)."""
    count = 0
    for summary in (out / "runs").glob("*/*/summary.json"):
        try:
            count += json.loads(summary.read_text(encoding="utf-8")).get("status") in FINISHED_STATUSES
        except (OSError, ValueError, AttributeError, RecursionError):
            continue
    return count


def clear_output(out: Path) -> None:
    """Remove what reproduce wrote into ``out`` (``OUTPUT_ENTRIES``; other files stay): starting over
    leaves no saved experiment or run of the earlier job to be reused."""
    for name in OUTPUT_ENTRIES:
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()


def make_out_dir(out: Path) -> None:
    """Create the output directory; one that cannot be created or written (a read-only file system, a
    read-only folder) is bad input naming it, before anything is run."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserInputError(f"out={out}: cannot create the output directory ({e.strerror})",
                             cli=f"--out {out}: cannot create the output directory ({e.strerror})") from None
    if not os.access(out, os.W_OK):
        raise UserInputError(f"out={out}: the output directory is not writable",
                             cli=f"--out {out}: the output directory is not writable")


def reproduce(
    suite: str | list[str],
    out: Path,
    *,
    quick: bool = False,
    seed: int = 0,
    workers: int = 1,
    jobs: int | None = None,
    progress: ProgressHook | None = None,
    command: str = "",
    resume: bool = False,
    log: ExperimentLog | None = None,
    compare: Comparison | None = None,
    fused: bool | None = None,
    plugins: list[str] | None = None,
    tracker: str | None = None,
) -> tuple[list[ClaimResult], dict]:
    """Run suites (``available_suites()``, or ``all``) or the experiments that claims need (claim ids,
    e.g. ``["P4", "B3"]``), and write the report into ``out``.

    ``resume`` reuses the experiments already finished in ``out`` with the same options; ``compare``
    (``Comparison.load(previous claims.json)``) puts a previous output's verdicts beside these. On Ctrl-C
    the report is still written (meta ``status: interrupted``) and ``ExperimentsInterrupted``
    (a KeyboardInterrupt, with ``claims`` and ``meta``) is raised. ``fused`` (default: where numba is
    installed, ``fused_available()``) trains the kernel-engine runs that allow it with the compiled step
    (``engine.fused``; within 1e-12, ~3x faster) and gd_layers by its compiled gradient (``ExactEngine.compiled``).
    ``plugins`` names modules (a user's paper packages) to import first, so that their papers, claims and
    suites can be named in ``suite``. ``tracker`` (``"tensorboard"``) also writes each run's metrics as TensorBoard
    event files into its directory under ``out/runs/`` as the run is written (``tracking.write_events``).
    ``jobs``: experiments run at a time, each in a forked process, and the forked processes an experiment's
    unbatched runs share (``experiments/lanes.py``; default: one per core; 1: one after the other in this process;
    the numbers are the same); ``workers`` (processes for an experiment's groups of runs) applies with ``jobs=1``."""
    jobs, fused = _checked_options(plugins, seed, jobs, tracker, fused)
    names, experiments = resolve_targets([suite] if isinstance(suite, str) else list(suite))
    suite = " ".join(names)
    make_out_dir(out)
    options = options_of(suite, quick, seed, fused, plugins)
    sessions = recorded_sessions(out) if resume else []
    session = _session(command or _command_of(suite, quick, seed, fused, out, plugins), out, options, sessions)
    ctx = Context(out=out, quick=quick, seed=seed, workers=workers, jobs=jobs, progress=progress, fused=fused,
                  resume=resume, tracker=tracker)
    start = time.perf_counter()
    stopped: ExperimentsInterrupted | None = None
    try:
        claims = run_experiments(ctx, experiments, resume=resume, log=log)
    except ExperimentsInterrupted as stop:
        claims, stopped = stop.claims, stop
    failed = sorted({c.experiment for c in claims if c.criterion == FAILED_CRITERION})
    status = "interrupted" if stopped is not None else ("failed" if failed else "finished")
    session.update(end=_now(), wall_s=round(time.perf_counter() - start, 1), status=status,
                   exit={"finished": 0, "failed": 1, "interrupted": 130}[status])
    sessions.append(session)
    meta = _meta(names, quick, seed, fused, claims, sessions, status, failed)
    with deferred_signals():  # a further Ctrl-C waits until the report and the manifest are whole
        write_report(out, claims, meta, compare)
        atomic_write_json(out / MANIFEST_FILE, {**options, "sessions": sessions})
    if stopped is not None:
        stopped.meta = meta
        raise stopped
    return claims, meta


def _checked_options(plugins: list[str] | None, seed: int, jobs: int | None, tracker: str | None,
                     fused: bool | None) -> tuple[int, bool]:
    """The plugins imported, and the options checked (UserInputError: one line) before anything is written: the
    number of jobs and whether the compiled step runs."""
    load_plugins(list(plugins or []))
    check_seed(seed)
    jobs = check_jobs(jobs)
    if tracker is not None:
        check_tracker(tracker)
    return jobs, resolve_fused(fused)


def _session(command: str, out: Path, options: dict, sessions: list[dict]) -> dict:
    """This session (running), recorded in the manifest after the earlier ones before any experiment runs."""
    session = {"start": _now(), "command": command, "status": "running"}
    atomic_write_json(out / MANIFEST_FILE, {**options, "sessions": [*sessions, session]})
    return session


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _command_of(suite: str, quick: bool, seed: int, fused: bool, out: Path, plugins: list[str] | None) -> str:
    """The command line that makes these options into ``out`` (the API's call written as the CLI's)."""
    flags = [suite] + (["--quick"] if quick else []) + ([f"--seed {seed}"] if seed else [])
    flags += ([] if fused == fused_available() else ["--fused" if fused else "--no-fused"])
    flags += [f"--plugins {','.join(plugins)}"] if plugins else []
    return " ".join(["lipschitz-icl reproduce", *flags, "--out", str(out)])


def _meta(names: list[str], quick: bool, seed: int, fused: bool, claims: list[ClaimResult], sessions: list[dict],
          status: str, failed: list[str]) -> dict:
    """claims.json's meta: this session's command, every session (the wall time is their total), the
    software and machine, each paper's citation, and the experiments that failed."""
    return {
        "command": sessions[-1]["command"],
        "suites": ", ".join(available_suites() if "all" in names else names),
        "size": "quick" if quick else "full", "seed": seed, "kernel_step": kernel_step_name(fused),
        "wall_s": round(sum(s.get("wall_s") or 0.0 for s in sessions), 1),
        "sessions": sessions,
        "date": _now()[:-7] + " UTC", **software_meta(),
        "status": status,
        "failed_experiments": failed,
        "papers": {p.id: p.as_meta() for p in papers() if any(c.paper == p.id for c in claims)},
    }
