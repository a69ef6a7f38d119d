"""Experiments behind ``lipschitz-icl reproduce``: each tests claims of CLAIMS.md and returns
ClaimResults whose verdicts come from measurements. Not imported by the core."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable

from .claims import INCONCLUSIVE, STATEMENTS, ClaimResult
from .runner import Context

Experiment = Callable[[Context], list[ClaimResult]]


def suites() -> dict[str, list[Experiment]]:
    from .blog import BLOG_EXPERIMENTS
    from .linear import LINEAR_EXPERIMENTS
    from .paper import PAPER_EXPERIMENTS, exp_scaling

    out: dict[str, list[Experiment]] = {
        "paper": PAPER_EXPERIMENTS,
        "blog": [*BLOG_EXPERIMENTS, exp_scaling],  # B1 and B3 come from the scaling sweep
        "linear": LINEAR_EXPERIMENTS,
    }
    try:
        from .extensions import EXTENSION_EXPERIMENTS
    except ImportError:
        EXTENSION_EXPERIMENTS = []
    if EXTENSION_EXPERIMENTS:
        out["extensions"] = EXTENSION_EXPERIMENTS
    return out


def experiments_for(names: list[str]) -> list[Experiment]:
    """The experiments of the named suites, each once, in order."""
    table = suites()
    chosen: list[Experiment] = []
    for name in names:
        for exp in table[name]:
            if exp not in chosen:
                chosen.append(exp)
    return chosen


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
