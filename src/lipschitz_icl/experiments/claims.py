"""Claims, their results and the verdict rule shared by every experiment.

A verdict always comes from numbers: an experiment states its criterion before running,
measures a statistic, and calls ``verdict(supported=..., refuted=...)`` with two booleans
computed from that statistic. Both true, or neither, is ``inconclusive``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE = "supported", "not supported", "inconclusive"
VERDICTS = (SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE)

# The claim tables, filled by registration (``registry.experiment`` and ``registry.register_paper``): each claim's
# statement lives in the file of its experiment, under the package of its paper (``lipschitz_icl.papers``).
STATEMENTS: dict[str, str] = {}  # claim id -> statement
PAPER_OF: dict[str, str] = {}  # claim id -> the id of the paper (source) it comes from
PAPER_ORDER: list[str] = []  # paper ids, in registration order: the report's order of sources
_POSITION: dict[str, int] = {}  # claim id -> its place within its paper (the paper's list, then registration)


def place_claim(cid: str, paper: str, position: int) -> None:
    """Record that claim ``cid`` belongs to ``paper`` at ``position`` within it (registry use)."""
    PAPER_OF[cid] = paper
    _POSITION[cid] = position


def claim_rank(cid: str) -> tuple[int, int, str]:
    """A claim's place in the report: its paper's place among the registered papers, then its place
    within that paper; claims of no registered paper come last, by id."""
    paper = PAPER_OF.get(cid)
    if paper not in PAPER_ORDER:
        return len(PAPER_ORDER), 0, cid
    return PAPER_ORDER.index(paper), _POSITION.get(cid, 0), cid


@dataclass
class ClaimResult:
    id: str
    statement: str
    criterion: str  # fixed in code before the experiment runs
    statistic: dict[str, Any]  # the measured numbers the verdict comes from
    verdict: str  # supported | not supported | inconclusive
    figures: list[str] = field(default_factory=list)  # paths relative to the output directory
    runs: list[str] = field(default_factory=list)  # run directories, relative to the output directory
    # tables (CSV, relative to the output directory) of an experiment that trains outside the run engine
    data: list[str] = field(default_factory=list)
    notes: str = ""
    experiment: str = ""
    wall_s: float = 0.0
    # True when the invariance f = L g (GD depends on (eta, L) only through eta L^2) or the geometry fixes
    # the outcome whatever the data; forced_reason says which, in one line.
    forced: bool = False
    forced_reason: str = ""
    censored: int = 0  # runs that did not reach their target within the budget; never silently dropped
    # the claim's runs that stopped at their step budget (status budget), found by checkpoint.count_censored for
    # every experiment: ``censored`` is never below their number
    censored_runs: list[str] = field(default_factory=list)
    interval: dict[str, list[float]] = field(default_factory=dict)  # statistic name -> [low, high]
    size: str = ""  # tiny | quick | full: the sizes the experiment ran at
    undecided_because: str = ""  # for an inconclusive verdict: what would decide it
    captions: dict[str, str] = field(default_factory=dict)  # figure path -> what to look at (optional)
    # a comparison with baselines, not a claim: no verdict; the report puts it in its own section after the claims
    comparison: bool = False
    paper: str = ""  # the id of the paper (source) the claim comes from (lipschitz_icl.papers)
    # the settings the statistic reads, grouped into copies (evidence.Settings.as_dict()): how many are distinct,
    # and which were copies of which under which invariance
    distinct_settings: int | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    forced_by: str = ""  # the invariance(s) that fix the outcome (every setting one shape), "" when none
    interval_covers: dict[str, str] = field(default_factory=dict)  # interval name -> what randomness it covers
    refinement: dict[str, Any] = field(default_factory=dict)  # the verdict at a finer approximation (evidence)
    readings: dict[str, dict[str, Any]] = field(default_factory=dict)  # per reading (e.g. of Delta): its outcome
    # the claim's own rule on a null and a planted case (experiments.controls): {null: {verdict, statistic, how},
    # planted: {...}}, or {missing: True}; can_fail: the null rejected and the planted case accepted (None: missing)
    controls: dict[str, Any] = field(default_factory=dict)
    can_fail: bool | None = None

    def as_dict(self) -> dict[str, Any]:
        return _clean(asdict(self))


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):  # numpy / torch scalars
        try:
            return _clean(value.item())
        except (ValueError, AttributeError):
            return str(value)
    return value


def verdict(supported: bool, refuted: bool) -> str:
    """The verdict from two conditions computed on the measurements."""
    if supported and not refuted:
        return SUPPORTED
    if refuted and not supported:
        return NOT_SUPPORTED
    return INCONCLUSIVE


NO_VERDICT = "no verdict (comparison)"  # the verdict field of a comparison: it compares, it tests nothing
COMPARISON_CRITERION = "(a comparison with baselines, not a claim: no criterion, no verdict)"


def comparison(id: str, statistic: dict, **kw: Any) -> ClaimResult:
    """A comparison's result (its statement from STATEMENTS): numbers and figures, no verdict."""
    return ClaimResult(id, STATEMENTS.get(id, ""), COMPARISON_CRITERION, statistic, NO_VERDICT, comparison=True,
                       **kw)


def claim(
    id: str, criterion: str, statistic: dict, supported: bool, refuted: bool, settings: Any = None, **kw: Any
) -> ClaimResult:
    """A result for claim ``id`` (its statement from STATEMENTS), the verdict from the two conditions.

    ``settings`` (an ``evidence.Settings``): the settings the statistic reads, grouped into copies; the result
    records how many are distinct and, when they are all one shape, is marked forced by the invariances that
    merged them (an outcome the mathematics fixes: reported, flagged, and still a verdict); a ``forced_reason``
    given for a result its settings do not force is dropped (the invariance it names did not apply)."""
    result = ClaimResult(id, STATEMENTS.get(id, ""), criterion, statistic, verdict(bool(supported), bool(refuted)),
                         **kw)
    if settings is not None:
        result.distinct_settings = settings.distinct
        result.settings = settings.as_dict()
        forced_by = settings.forced_by()
        if forced_by:
            result.forced, result.forced_by = True, result.forced_by or forced_by
            result.forced_reason = result.forced_reason or (
                f"every setting it reads is one trajectory up to scale ({settings.members} settings, 1 distinct: "
                f"{forced_by})")
        elif not result.forced:
            result.forced_reason = ""
    return result
