"""What every paper suite's end-to-end test asserts at the TINY size, and every claim's controls: written once."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from claims_snapshot import check as check_snapshot

from lipschitz_icl.experiments import experiments_for, run_experiments
from lipschitz_icl.experiments.claims import INCONCLUSIVE, NOT_SUPPORTED, PAPER_OF, SUPPORTED, VERDICTS, ClaimResult
from lipschitz_icl.experiments.controls import controls_of
from lipschitz_icl.experiments.runner import Context
from lipschitz_icl.experiments.sizes import TINY


def run_suite_at_tiny(out: Path, suite: str, ids: list[str], paper: str) -> list[ClaimResult]:
    """Run ``suite`` at TINY into ``out``: its claims are ``ids`` of ``paper``, each with a verdict from a rule that
    can fail, figures whose captions say what to look for, a reason when inconclusive, a refinement and non-empty
    data tables; the numbers are the snapshot's (tests/data/claims_tiny.json, bit for bit where it was made)."""
    claims = run_experiments(Context(out=out, quick=True, sizes=TINY), experiments_for([suite]))
    check_snapshot(claims)
    assert [c.id for c in claims] == ids and all(PAPER_OF[c.id] == paper for c in claims)
    for c in claims:
        assert c.verdict in VERDICTS and c.statistic and c.paper == paper and c.can_fail is True
        assert c.figures and all((out / f).is_file() for f in c.figures)
        assert all("look for" in c.captions.get(f, "").lower() for f in c.figures), (c.id, c.captions)
        assert c.verdict != INCONCLUSIVE or c.undecided_because
        assert c.refinement and "approximation" in c.refinement
        assert all(len(pd.read_csv(out / f)) > 0 for f in c.data)
    return claims


def assert_controls_can_fail(cid: str) -> None:
    """The claim's rule rejects its null and every further null and accepts its planted case."""
    made = controls_of(cid)
    assert made.null.verdict == NOT_SUPPORTED and made.planted.verdict == SUPPORTED
    assert all(c.verdict == NOT_SUPPORTED for c in made.extra.values()) and made.can_fail
