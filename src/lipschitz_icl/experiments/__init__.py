"""The machinery behind ``lipschitz-icl reproduce``: the claim and verdict types (``claims``), the
registries of papers and experiments (``registry``), running an experiment's configs (``runner``),
checkpoints and resume (``checkpoint``), measurements, intervals and figure helpers. The claims
themselves live in ``lipschitz_icl.papers``, one package per source, which registers them when
imported. Not imported by the core."""

from __future__ import annotations

from .checkpoint import ExperimentLog, run_all
from .claims import ClaimResult, claim, verdict
from .registry import (
    Experiment,
    Paper,
    claim_ids,
    experiment,
    experiments_for,
    experiments_for_claims,
    paper_claims,
    paper_ids,
    papers,
    register_paper,
    registered,
    suite_names,
    suites,
)
from .runner import Context, base_config, kernel_base, paper_base, rel_runs, run_group, sampled_base, with_overrides


def run_experiments(ctx: Context, experiments: list[Experiment], resume: bool = False,
                    log: ExperimentLog | None = None) -> list[ClaimResult]:
    """Run each experiment; one that raises is recorded (its claims inconclusive) and the rest go on.
    Ctrl-C raises ``ExperimentsInterrupted``; ``resume`` reuses saved results (see ``checkpoint``)."""
    return run_all(ctx, experiments, resume=resume, log=log)


__all__ = [
    "ClaimResult", "Context", "Experiment", "Paper", "base_config", "claim", "claim_ids", "experiment",
    "experiments_for", "experiments_for_claims", "kernel_base", "paper_base", "paper_claims", "paper_ids", "papers",
    "register_paper", "registered", "rel_runs", "run_experiments", "run_group", "sampled_base", "suite_names",
    "suites", "verdict", "with_overrides",
]
