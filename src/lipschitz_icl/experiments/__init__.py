"""Experiments behind ``lipschitz-icl reproduce``: each tests claims of CLAIMS.md and returns
ClaimResults whose verdicts come from measurements. Not imported by the core."""

from __future__ import annotations

from collections.abc import Callable

from .checkpoint import ExperimentLog, run_all
from .claims import ClaimResult
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


def run_experiments(ctx: Context, experiments: list[Experiment], resume: bool = False,
                    log: ExperimentLog | None = None) -> list[ClaimResult]:
    """Run each experiment; one that raises is recorded (its claims inconclusive) and the rest go on.
    Ctrl-C raises ``ExperimentsInterrupted``; ``resume`` reuses saved results (see ``checkpoint``)."""
    return run_all(ctx, experiments, resume=resume, log=log)
