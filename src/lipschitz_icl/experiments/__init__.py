"""Experiments behind ``lipschitz-icl reproduce``: each tests claims of docs/CLAIMS.md and returns
ClaimResults whose verdicts come from measurements. Not imported by the core.

Each experiment module registers its experiments with ``@registry.experiment(*claim_ids,
suites=...)`` when imported below; the suites come from that registry, in import order."""

from __future__ import annotations

import time
import traceback

from . import kernel, linear_vs_nonlinear, paper, sampled, scaling, writeup  # noqa: F401  (registration)
from .claims import INCONCLUSIVE, STATEMENTS, ClaimResult
from .registry import Experiment, experiment, experiments_for, registered, suite_names, suites
from .runner import Context


def run_experiments(ctx: Context, experiments: list[Experiment]) -> list[ClaimResult]:
    """Run each experiment; one that raises is recorded (its claims inconclusive) and the rest go on."""
    results: list[ClaimResult] = []
    for exp in experiments:
        start = time.perf_counter()
        try:
            results.extend(exp(ctx))
        except Exception as e:  # noqa: BLE001 - reported in the claims table, never a crash
            ids = getattr(exp, "claims", None) or ["?"]
            for cid in ids:
                results.append(ClaimResult(cid, STATEMENTS.get(cid, ""), "(experiment failed)", {"error": repr(e)},
                                           INCONCLUSIVE, notes=traceback.format_exc(limit=3),
                                           experiment=exp.__name__, wall_s=round(time.perf_counter() - start, 2)))
    return results


__all__ = [
    "Context", "Experiment", "experiment", "experiments_for", "registered", "run_experiments", "suite_names",
    "suites",
]
