"""Running a list of experiments so that an interruption is reported and a rerun resumes.

* Each finished experiment's claims are saved as ``<out>/experiments/<module>.<name>.json`` with a
  fingerprint (experiment, claims, sizes, seed, kernel step, package version, numerics revision, a digest
  of its source) and a checksum of the claims; a rerun reuses a saved result only when its fingerprint
  matches, its checksum and field types hold, and every run its claims rest on is still there and
  finished, so a rerun with other options, a hand-edited file or a half-overwritten output never reuses stale results.
* Inside an experiment, every run is written as it stops (``runner.run_group``); a resumed experiment
  reuses the finished runs of the same config and trains only the rest (``Context.resume``).
* A failed write (an OSError: disk full, permissions) stops the whole job: it is not an experiment's
  failure to record but a fault of the output, raised to the caller.
* Ctrl-C or SIGTERM (noticed by a signal watch even where a trainer turned it into a run status)
  stops the list: the experiment under way and every one not yet run get claims marked
  ``interrupted`` (verdict inconclusive), and ``ExperimentsInterrupted`` carries all claims.
* A claim whose experiment produced any run with status ``interrupted`` or ``failed`` is made
  inconclusive, with that reason: enforced here, where results are collected, for every experiment.
* Every experiment runs with one torch thread (its runs too: ``batch.run_many`` trains with the caller's
  threads), so a resumed job whose sessions had another ``LIPSCHITZ_ICL_THREADS`` gets the same numbers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from .. import NUMERICS_REVISION, __version__
from ..batch import warm_fused_step
from ..forked import ForkedInterrupted, fork_available, run_forked
from ..store import SUMMARY_FILE, atomic_write_json
from ..threads import single_threaded_torch
from .claims import INCONCLUSIVE, STATEMENTS, ClaimResult
from .controls import attach
from .durations import expected_seconds
from .registry import Experiment
from .runner import Context, ProgressHook

# (event: started | finished | reused, experiment name, elapsed s, detail: e.g. how many runs a resume reused)
ExperimentLog = Callable[[str, str, float, str], None]
CHECKPOINT_DIR = "experiments"
BAD_STATUSES = ("interrupted", "failed")
INTERRUPTED_CRITERION = "(interrupted: the experiment did not finish)"
FAILED_CRITERION = "(experiment failed)"


class ExperimentsInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped the experiments; ``claims`` holds every claim, the unfinished ones
    marked interrupted, so the report can still be written."""

    def __init__(self, claims: list[ClaimResult], signal_name: str) -> None:
        super().__init__(signal_name)
        self.claims = claims
        self.signal_name = signal_name
        self.meta: dict[str, Any] | None = None  # set by ``reproduce`` once the report is written


def experiment_key(exp: Experiment) -> str:
    """A unique, file-name-safe name: two suites may both have an ``exp_finite_sample``."""
    return f"{exp.__module__.rsplit('.', 1)[-1]}.{exp.__name__}"


def fingerprint(ctx: Context, exp: Experiment) -> dict[str, Any]:
    """What a saved result depends on: a saved result is reused only if this is equal (the number of
    workers changes no number: every run is the same config whichever path trains it)."""
    sizes = dataclasses.asdict(ctx.sizes) if ctx.sizes is not None else None
    return {"experiment": experiment_key(exp), "claims": list(getattr(exp, "claims", [])),
            "sizes": json.loads(json.dumps(sizes)), "seed": ctx.seed,
            "kernel_step": "fused" if ctx.fused else "unfused", "version": __version__, "numerics": NUMERICS_REVISION,
            "source": source_digest(exp)}


@functools.cache
def _files_digest(files: tuple[Path, ...]) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def source_digest(exp: Experiment) -> str:
    """sha256 of the source of the code that defines ``exp``: every .py file of its package (a paper's, with
    its configs and rules), or its module alone outside a package. A saved result made before that code
    changed (other configs, another rule, prompts drawn otherwise) is not reused under the same name."""
    module = sys.modules.get(exp.__module__)
    path = Path(getattr(module, "__file__", "") or "")
    if not path.is_file():
        return ""
    in_package = bool(getattr(module, "__package__", "")) and (path.parent / "__init__.py").is_file()
    return _files_digest(tuple(sorted(path.parent.rglob("*.py"))) if in_package else (path,))


_CLAIMS_ADAPTER = TypeAdapter(list[ClaimResult])


def _checksum(claims: list[dict]) -> str:
    return hashlib.sha256(json.dumps(claims, sort_keys=True).encode()).hexdigest()


def _checkpoint_path(ctx: Context, exp: Experiment) -> Path:
    return ctx.out / CHECKPOINT_DIR / f"{experiment_key(exp)}.json"


def load_checkpoint(ctx: Context, exp: Experiment) -> list[ClaimResult] | None:
    """The saved claims of ``exp`` when they were made with the same fingerprint, are unaltered (checksum)
    and well typed, and every run they rest on is still there and finished; else None (run it again)."""
    try:
        saved = json.loads(_checkpoint_path(ctx, exp).read_text(encoding="utf-8"))
        if saved.get("fingerprint") != fingerprint(ctx, exp) or saved.get("sha256") != _checksum(saved["claims"]):
            return None
        claims = _CLAIMS_ADAPTER.validate_python(saved["claims"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError, ValidationError, RecursionError):
        return None  # missing, unreadable (nested too deeply too), edited or from another version
    if bad_runs(ctx, [r for c in claims for r in c.runs]):
        return None  # a run it rests on was interrupted, failed or removed since
    return claims


def save_checkpoint(ctx: Context, exp: Experiment, claims: list[ClaimResult]) -> None:
    path = _checkpoint_path(ctx, exp)
    path.parent.mkdir(parents=True, exist_ok=True)
    saved = json.loads(json.dumps([c.as_dict() for c in claims]))  # as read back: JSON types
    atomic_write_json(path, {"fingerprint": fingerprint(ctx, exp), "sha256": _checksum(saved), "claims": saved})


@contextlib.contextmanager
def signal_watch() -> Iterator[list[str]]:
    """Record SIGINT/SIGTERM (the list gets the signal's name) and raise KeyboardInterrupt as usual,
    so an interrupt that a trainer swallowed into a run status is still seen. Main thread only."""
    fired: list[str] = []
    if threading.current_thread() is not threading.main_thread():
        yield fired
        return

    def handler(signum, frame):  # noqa: ARG001
        fired.append(signal.Signals(signum).name)
        raise KeyboardInterrupt

    sigs = [signal.SIGINT] + ([signal.SIGTERM] if hasattr(signal, "SIGTERM") else [])
    old = {s: signal.signal(s, handler) for s in sigs}
    try:
        yield fired
    finally:
        for s, h in old.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)


def _claim_ids(exp: Experiment) -> list[str]:
    return list(getattr(exp, "claims", None) or ["?"])


def _placeholder(exp: Experiment, criterion: str, statistic: dict, notes: str, wall_s: float) -> list[ClaimResult]:
    results = [ClaimResult(cid, STATEMENTS.get(cid, ""), criterion, statistic, INCONCLUSIVE, notes=notes,
                           experiment=exp.__name__, wall_s=round(wall_s, 2),
                           comparison=bool(getattr(exp, "comparison", False))) for cid in _claim_ids(exp)]
    for r in results:
        attach(r)
    return results


def interrupted_claims(exp: Experiment, wall_s: float = 0.0) -> list[ClaimResult]:
    return _placeholder(exp, INTERRUPTED_CRITERION, {"status": "interrupted"},
                        "interrupted (Ctrl-C or SIGTERM) before this experiment finished; rerun the same command "
                        "(or add --resume) to finish it", wall_s)


def _status(ctx: Context, rel: str) -> str:
    try:
        return str(json.loads((ctx.out / rel / SUMMARY_FILE).read_text()).get("status"))
    except (OSError, ValueError, AttributeError, RecursionError):
        return "failed"  # unreadable: not a result to judge a claim by


def count_censored(ctx: Context, claims: list[ClaimResult]) -> list[ClaimResult]:
    """Every run a claim rests on that stopped at its step budget is censored: listed in ``censored_runs``,
    and ``censored`` is at least their number (an experiment may count more, e.g. events not reached)."""
    for c in claims:
        c.censored_runs = [rel for rel in c.runs if _status(ctx, rel) == "budget"]
        c.censored = max(c.censored, len(c.censored_runs))
    return claims


def bad_runs(ctx: Context, run_dirs: list[str]) -> list[str]:
    """The run directories (relative to ctx.out) whose summary status is interrupted or failed."""
    found = []
    for rel in run_dirs:
        status = _status(ctx, rel)
        if status in BAD_STATUSES:
            found.append(f"{rel} ({status})")
    return found


def enforce_run_status(claims: list[ClaimResult], bad: list[str]) -> list[ClaimResult]:
    """No verdict from a run that did not end normally: such claims become inconclusive."""
    if not bad:
        return claims
    reason = f"inconclusive: computed from {len(bad)} run(s) that ended interrupted or failed: {', '.join(bad[:5])}"
    for c in claims:
        c.verdict = INCONCLUSIVE
        c.notes = f"{reason}. {c.notes}".strip()
    return claims


def _run_one(ctx: Context, exp: Experiment, fired: list[str]) -> tuple[list[ClaimResult], bool]:
    """One experiment: its claims with run statuses enforced, and whether it finished (a failure is
    recorded as inconclusive claims, and not saved, so that a rerun tries it again)."""
    start, first_run = time.perf_counter(), len(ctx.run_dirs)
    try:
        with single_threaded_torch():  # every session the same numbers, whatever LIPSCHITZ_ICL_THREADS says
            claims = exp(ctx)
    except (KeyboardInterrupt, OSError):  # a stop, or a failed write: not the experiment's to record
        raise
    except Exception as e:  # noqa: BLE001 - reported in the claims table, never a crash
        return _placeholder(exp, FAILED_CRITERION, {"error": repr(e)}, traceback.format_exc(limit=3),
                            time.perf_counter() - start), False
    if fired:  # a trainer turned the interrupt into a run status and the experiment went on
        raise KeyboardInterrupt
    claims = count_censored(ctx, claims)
    return enforce_run_status(claims, bad_runs(ctx, ctx.run_dirs[first_run:])), True


def run_all(ctx: Context, experiments: list[Experiment], *, resume: bool = False,
            log: ExperimentLog | None = None) -> list[ClaimResult]:
    """Run each experiment (reusing saved results when ``resume``), one after the other, or with ``ctx.jobs`` > 1
    several at a time, each in a process of its own (``side_by_side``); see the module docstring."""
    results: dict[int, list[ClaimResult]] = {}
    todo: list[tuple[int, Experiment]] = []
    for i, exp in enumerate(experiments):
        saved = load_checkpoint(ctx, exp) if resume else None
        if saved is None:
            todo.append((i, exp))
            continue
        for r in saved:  # saved before its claim had controls, or with older ones: the current controls
            attach(r)
        results[i] = saved
        if log is not None:
            log("reused", exp.__name__, 0.0, "saved result")
    run = side_by_side if ctx.jobs > 1 and len(todo) > 1 and fork_available() else one_by_one
    with signal_watch() as fired:
        try:
            run(ctx, todo, results, log, fired)
        except KeyboardInterrupt as stop:
            elapsed = stop.elapsed if isinstance(stop, ForkedInterrupted) else {}  # experiment index -> seconds
            for i, exp in todo:
                results.setdefault(i, interrupted_claims(exp, elapsed.get(i, 0.0)))
            raise ExperimentsInterrupted(_in_order(results), fired[0] if fired else "SIGINT") from None
    return _in_order(results)


def _in_order(results: dict[int, list[ClaimResult]]) -> list[ClaimResult]:
    return [c for i in sorted(results) for c in results[i]]


def one_by_one(ctx: Context, todo: list[tuple[int, Experiment]], results: dict[int, list[ClaimResult]],
               log: ExperimentLog | None, fired: list[str]) -> None:
    """The experiments of ``todo`` in this process, one after the other, each one's claims into ``results``."""
    for i, exp in todo:
        start, reused, trained = time.perf_counter(), ctx.reused_runs, ctx.trained_runs
        if log is not None:
            log("started", exp.__name__, 0.0, "")
        try:
            claims, finished = _run_one(ctx, exp, fired)
        except KeyboardInterrupt:
            results[i] = interrupted_claims(exp, time.perf_counter() - start)
            raise
        results[i] = claims
        if finished:
            save_checkpoint(ctx, exp, claims)
        if log is not None:
            log("finished", exp.__name__, time.perf_counter() - start, runs_detail(trained, ctx.trained_runs,
                                                                                   ctx.reused_runs - reused))


def side_by_side(ctx: Context, todo: list[tuple[int, Experiment]], results: dict[int, list[ClaimResult]],
                 log: ExperimentLog | None, fired: list[str]) -> None:  # noqa: ARG001 - one_by_one's signature
    """The experiments of ``todo``, ``ctx.jobs`` at a time and the longest expected first, each in a forked process
    (``forked.run_forked``) that saves its checkpoint; their claims into ``results``. An experiment whose process
    died is recorded failed (a rerun tries it again); a failed write in one (OSError) stops the whole job, as in
    this process."""

    def started(pos: int) -> None:
        if log is not None:
            log("started", todo[pos][1].__name__, 0.0, "")

    def answered(pos: int, outcome: Any, elapsed: float) -> None:
        i, exp = todo[pos]
        if isinstance(outcome, OSError):
            raise outcome
        if isinstance(outcome, BaseException):
            results[i], detail = _placeholder(exp, FAILED_CRITERION, {"error": repr(outcome)}, str(outcome),
                                              elapsed), ""
        else:
            results[i], trained, kept = outcome
            ctx.trained_runs, ctx.reused_runs = ctx.trained_runs + trained, ctx.reused_runs + kept
            detail = runs_detail(0, trained, kept)
        if log is not None:
            log("finished", exp.__name__, elapsed, detail)

    def ticked(pos: int, group: tuple[str, int, int]) -> None:
        tick_of(ctx.progress, todo[pos][1].__name__, *group)

    expected = expected_seconds([exp for _, exp in todo], ctx.quick)
    todo = sorted(todo, key=lambda item: -expected[item[1].__name__])  # the longest first: none starts last
    if ctx.fused:
        warm_fused_step()  # the compiled step loaded once here, not in every experiment's process
    try:
        run_forked(todo, lambda item, tick: _in_child(ctx, item[1], tick), ctx.jobs, started, answered, ticked)
    except ForkedInterrupted as stop:  # positions in this order -> the experiments' own
        raise ForkedInterrupted({todo[pos][0]: s for pos, s in stop.elapsed.items()}) from None


def tick_of(hook: ProgressHook | None, experiment: str, label: str, done: int, total: int) -> None:
    """A group's progress, sent by an experiment running side by side with others, to ``hook``: its
    ``tick_for(experiment, label, done, total)`` where it has one (the hook can tell experiments apart), else the
    plain ``hook(label, done, total)``."""
    if hook is not None:
        tick_for = getattr(hook, "tick_for", None)
        tick_for(experiment, label, done, total) if tick_for is not None else hook(label, done, total)


def _in_child(ctx: Context, exp: Experiment, tick: Callable[[Any], None]) -> tuple[list[ClaimResult], int, int]:
    """One experiment in a forked process, on a context of its own (its runs trained here, its unbatched runs over
    ``ctx.jobs`` processes of their own (``lanes.py``), each group's progress sent back through ``tick``): its claims,
    saved as a checkpoint when it finished, and the runs it trained and reused."""
    progress = (lambda label, done, total: tick((label, done, total))) if ctx.progress is not None else None
    own = dataclasses.replace(ctx, workers=1, progress=progress, run_dirs=[], reused_runs=0, trained_runs=0)
    claims, finished = _run_one(own, exp, [])
    if finished:
        save_checkpoint(own, exp, claims)
    return claims, own.trained_runs, own.reused_runs


def runs_detail(trained_before: int, trained_after: int, kept: int) -> str:
    """The log's detail of a finished experiment: how many runs it trained and reused (nothing when none reused)."""
    return f"{trained_after - trained_before} runs trained, {kept} reused" if kept else ""
