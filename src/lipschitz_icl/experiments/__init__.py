"""Experiments behind ``lipschitz-icl reproduce``: each tests claims of docs/CLAIMS.md and returns
ClaimResults whose verdicts come from measurements. Not imported by the core.

Each experiment module registers its experiments with ``@registry.experiment(*claim_ids,
suites=...)`` when imported below; the suites come from that registry, in import order."""

from __future__ import annotations

from . import (  # noqa: F401  (registration)
    axes,
    kernel,
    linear_vs_nonlinear,
    paper,
    sampled,
    scaling,
    step_size,
    threshold,
    vs_baselines,
    writeup,
)
from .checkpoint import ExperimentLog, run_all
from .claims import ClaimResult
from .registry import (
    Experiment,
    claim_ids,
    experiment,
    experiments_for,
    experiments_for_claims,
    registered,
    suite_names,
    suites,
)
from .runner import Context


def run_experiments(ctx: Context, experiments: list[Experiment], resume: bool = False,
                    log: ExperimentLog | None = None) -> list[ClaimResult]:
    """Run each experiment; one that raises is recorded (its claims inconclusive) and the rest go on.
    Ctrl-C raises ``ExperimentsInterrupted``; ``resume`` reuses saved results (see ``checkpoint``)."""
    return run_all(ctx, experiments, resume=resume, log=log)


__all__ = [
    "Context", "Experiment", "claim_ids", "experiment", "experiments_for", "experiments_for_claims", "registered",
    "run_experiments", "suite_names",
    "suites",
]
