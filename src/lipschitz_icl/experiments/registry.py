"""The registries of papers and experiments.

``register_paper(Paper(...))`` records a source (a paper, a write-up, this project's own questions):
its metadata and the order of its claims. ``@experiment(*claim_ids, suites=(...), statements={...})``
registers a function that takes a runner.Context and returns ClaimResults; each claim's statement is
given where its experiment is written. A claim belongs to the paper that lists it, else to the paper
whose package holds the experiment (``lipschitz_icl.papers.<id>``, or a user's package on ``plugins``).
The suites, papers, the CLI's names and its help text all come from these registries (as
``bench.register`` does for benchmarks).

Order comes from the papers (registration order) and each paper's claims, not from import order:
experiments run in the order of their earliest claim, and suites are listed likewise."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .claims import PAPER_OF, PAPER_ORDER, STATEMENTS, ClaimResult, claim_rank, place_claim
from .controls import attach
from .runner import Context

Experiment = Callable[[Context], list[ClaimResult]]

_EXPERIMENTS: dict[str, Experiment] = {}  # by function name
_PAPERS: dict[str, Paper] = {}  # by id, in registration order
UNLISTED_POSITION = 1000  # claims a paper does not list come after the ones it does, in registration order


@dataclass(frozen=True)
class Paper:
    """A source of claims: what the report's section heading, ``reproduce --list`` and docs/CLAIMS.md show."""

    id: str  # the package name and the ``reproduce --paper`` value, e.g. li2025
    title: str
    authors: str = ""
    year: int | None = None
    venue: str = ""  # e.g. "ICML 2024", "arXiv preprint", "blog post"
    arxiv: str = ""  # arXiv id, e.g. 2507.20443
    reachable: str = ""  # what of the source could be read when its claims were written down
    claims: tuple[str, ...] = ()  # claim ids in report order (claims tested elsewhere may be listed too)
    package: str = ""  # the package whose experiments belong to it (default: lipschitz_icl.papers.<id>, or <id>)

    def citation(self) -> str:
        """One line: authors, title, venue, year, arXiv id."""
        year = str(self.year or "") if str(self.year or "") not in self.venue else ""
        parts = [self.authors, f"*{self.title}*", self.venue, year]
        return ", ".join(p for p in parts if p) + (f" (arXiv:{self.arxiv})" if self.arxiv else "")

    def as_meta(self) -> dict:
        return {"title": self.title, "authors": self.authors, "year": self.year, "venue": self.venue,
                "arxiv": self.arxiv, "reachable": self.reachable, "citation": self.citation()}


def register_paper(paper: Paper) -> Paper:
    """Record a paper (once; its package's ``__init__`` calls this before importing its claim modules)."""
    if paper.id in _PAPERS and _PAPERS[paper.id] != paper:
        raise ValueError(f"paper {paper.id!r} is registered twice with different metadata")
    _PAPERS[paper.id] = paper
    if paper.id not in PAPER_ORDER:
        PAPER_ORDER.append(paper.id)
    for i, cid in enumerate(paper.claims):
        place_claim(cid, paper.id, i)
    return paper


def papers() -> list[Paper]:
    """The registered papers, in registration order."""
    return [_PAPERS[pid] for pid in PAPER_ORDER if pid in _PAPERS]


def _packages_of(paper: Paper) -> tuple[str, ...]:
    """Where a paper's experiments live: its ``package``, else a built-in's or a plugin's named by its id."""
    return (paper.package,) if paper.package else (f"lipschitz_icl.papers.{paper.id}", paper.id)


def _paper_of_module(module: str) -> str:
    """The paper whose package holds ``module``, or "" (an experiment outside any paper package)."""
    for paper in _PAPERS.values():
        if any(module == pkg or module.startswith(pkg + ".") for pkg in _packages_of(paper)):
            return paper.id
    return ""


def _place_claims(claim_ids: Sequence[str], module: str) -> None:
    """Give each claim not listed by a paper the paper of the experiment's package."""
    paper = _paper_of_module(module)
    for cid in claim_ids:
        if cid not in PAPER_OF:
            listed = sum(1 for p in PAPER_OF.values() if p == paper)
            place_claim(cid, paper, UNLISTED_POSITION + listed)


def experiment(*claim_ids: str, suites: Sequence[str], statements: Mapping[str, str] | None = None,
               comparison: bool = False) -> Callable[[Experiment], Experiment]:
    """Register an experiment testing ``claim_ids`` in ``suites``. Each claim needs a statement:
    a row of claims.STATEMENTS (the built-in claims, in report order), or one given here in
    ``statements`` (a new claim in its own file: it is added to the table).
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
        _place_claims(claim_ids, fn.__module__)

        @functools.wraps(fn)
        def wrapper(ctx: Context) -> list[ClaimResult]:
            start = time.perf_counter()
            results = fn(ctx)
            for r in results:
                r.wall_s = round(time.perf_counter() - start, 2)
                r.experiment = r.experiment or fn.__name__
                r.comparison = r.comparison or comparison
                r.paper = r.paper or PAPER_OF.get(r.id, "")
                attach(r)  # the claim's rule on its null and planted case: can it fail?
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


def paper_claims(paper_id: str) -> list[str]:
    """The tested claims that belong to paper ``paper_id``, in report order."""
    return [cid for cid in claim_ids() if PAPER_OF.get(cid) == paper_id]


def paper_ids() -> list[str]:
    """The ids of the registered papers that have a tested claim, in registration order."""
    return [p.id for p in papers() if paper_claims(p.id)]


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
