"""The experiment registry: ``@experiment(*claim_ids, suites=(...))`` registers a function that
takes a runner.Context and returns ClaimResults. The suites, the CLI's suite names and its help
text all come from this one registry (as ``bench.register`` does for benchmarks).

Order comes from the claims table (claims.STATEMENTS), not from import order: experiments run in
the order of their earliest claim, and suites are listed in the order of their earliest claim."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence

from .claims import STATEMENTS, ClaimResult, claim_rank
from .runner import Context

Experiment = Callable[[Context], list[ClaimResult]]

_EXPERIMENTS: dict[str, Experiment] = {}  # by function name


def experiment(*claim_ids: str, suites: Sequence[str], statements: Mapping[str, str] | None = None,
               comparison: bool = False) -> Callable[[Experiment], Experiment]:
    """Register an experiment testing ``claim_ids`` in ``suites``. Each claim needs a statement:
    a row of claims.STATEMENTS (the built-in claims, in report order), or one given here in
    ``statements`` (a new claim in its own file: it is added to the table, after the rows there).
    ``comparison=True`` marks a comparison with baselines rather than a claim: its results carry
    ``comparison`` (no verdict) and the report shows them in their own section after the claims.
    The wrapper records the claims (so a failure can be reported against them) and sets each
    result's wall time and experiment name."""
    for cid, text in (statements or {}).items():
        if STATEMENTS.get(cid, text) != text:
            raise ValueError(f"claim {cid!r} already has another statement in claims.STATEMENTS")
        STATEMENTS[cid] = text
    missing = [cid for cid in claim_ids if cid not in STATEMENTS]
    if not claim_ids or missing or not suites:
        raise ValueError(f"@experiment needs claim ids with a statement (in claims.STATEMENTS or statements=; "
                         f"missing: {missing}) "
                         f"and at least one suite (got {list(suites)})")

    def wrap(fn: Experiment) -> Experiment:
        @functools.wraps(fn)
        def wrapper(ctx: Context) -> list[ClaimResult]:
            start = time.perf_counter()
            results = fn(ctx)
            for r in results:
                r.wall_s = round(time.perf_counter() - start, 2)
                r.experiment = r.experiment or fn.__name__
                r.comparison = r.comparison or comparison
            return results

        wrapper.claims = list(claim_ids)
        wrapper.comparison = comparison
        wrapper.suites = tuple(suites)
        if fn.__name__ in _EXPERIMENTS:
            raise ValueError(f"experiment {fn.__name__!r} is registered twice")
        _EXPERIMENTS[fn.__name__] = wrapper
        return wrapper

    return wrap


def _rank(exp: Experiment) -> tuple:
    return min(claim_rank(cid) for cid in exp.claims), exp.__name__


def registered() -> list[Experiment]:
    """Every registered experiment, in the order of its earliest claim in the claims table."""
    return sorted(_EXPERIMENTS.values(), key=_rank)


def suites() -> dict[str, list[Experiment]]:
    """Suite name -> its experiments (claims-table order); suites in the order of their earliest claim."""
    out: dict[str, list[Experiment]] = {}
    for exp in registered():
        for name in exp.suites:
            out.setdefault(name, []).append(exp)
    return out


def suite_names() -> list[str]:
    return list(suites())


def claim_ids() -> list[str]:
    """The claim ids some registered experiment tests, in claims-table order."""
    return sorted({cid for exp in registered() for cid in exp.claims}, key=claim_rank)


def experiments_for_claims(ids: list[str]) -> list[Experiment]:
    """The experiments that test any of the claims ``ids``, each once, in order."""
    return [exp for exp in registered() if set(exp.claims) & set(ids)]


def experiments_for(names: list[str]) -> list[Experiment]:
    """The experiments of the named suites, each once, in order."""
    table = suites()
    chosen: list[Experiment] = []
    for name in names:
        for exp in table[name]:
            if exp not in chosen:
                chosen.append(exp)
    return chosen
