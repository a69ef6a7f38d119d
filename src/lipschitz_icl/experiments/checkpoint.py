"""Running a list of experiments so that an interruption is reported and a rerun resumes.

* Each finished experiment's claims are saved as ``<out>/experiments/<module>.<name>.json`` with a
  fingerprint (experiment, claims, sizes, seed, kernel step, package version) and a checksum of the
  claims; a rerun reuses a saved result only when its fingerprint matches, its checksum and field
  types hold, and every run its claims rest on is still there and finished, so a rerun with other
  options, a hand-edited file or a half-overwritten output never reuses stale results.
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
import hashlib
import json
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from .. import __version__
from ..store import SUMMARY_FILE, atomic_write_json
from ..threads import single_threaded_torch
from .claims import INCONCLUSIVE, STATEMENTS, ClaimResult
from .controls import attach
from .registry import Experiment
from .runner import Context

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
            "kernel_step": "fused" if ctx.fused else "unfused", "version": __version__}


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
    """Run each experiment (reusing saved results when ``resume``); see the module docstring."""
    results: list[ClaimResult] = []
    with signal_watch() as fired:
        for i, exp in enumerate(experiments):
            saved = load_checkpoint(ctx, exp) if resume else None
            if saved is not None:
                for r in saved:  # saved before its claim had controls, or with older ones: the current controls
                    attach(r)
                results.extend(saved)
                if log is not None:
                    log("reused", exp.__name__, 0.0, "saved result")
                continue
            start, reused, trained = time.perf_counter(), ctx.reused_runs, ctx.trained_runs
            if log is not None:
                log("started", exp.__name__, 0.0, "")
            try:
                claims, finished = _run_one(ctx, exp, fired)
            except KeyboardInterrupt:
                results.extend(interrupted_claims(exp, time.perf_counter() - start))
                for rest in experiments[i + 1:]:
                    results.extend(interrupted_claims(rest))
                raise ExperimentsInterrupted(results, fired[0] if fired else "SIGINT") from None
            results.extend(claims)
            if finished:
                save_checkpoint(ctx, exp, claims)
            if log is not None:
                kept = ctx.reused_runs - reused
                detail = f"{ctx.trained_runs - trained} runs trained, {kept} reused" if kept else ""
                log("finished", exp.__name__, time.perf_counter() - start, detail)
    return results
