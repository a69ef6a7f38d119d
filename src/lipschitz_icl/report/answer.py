"""The report's opening paragraph: the answer to "is there a regime separation at L*?", built only from the
verdicts that are evidence (not forced, and a rule its controls show able to fail), with what kept the others out."""

from __future__ import annotations

from ..experiments.claims import INCONCLUSIVE, NOT_SUPPORTED, SUPPORTED, ClaimResult
from ..experiments.controls import is_evidence

QUESTION = "Is there a regime separation at L*?"
# the claims that read it: the threshold and its four readings, the flat regime's time scale, the crossover in
# accuracy, and whether the regimes separate visibly. Not P6: its rule asks that eta_max fall with L throughout,
# which a smooth curve with no change at L* passes as well, so it cannot tell a separation from none
REGIME_CLAIMS = ("P4", "P4a", "P4b", "P4c", "P4d", "P5", "P7", "R5")


def _ids(claims: list[ClaimResult]) -> str:
    return ", ".join(c.id for c in claims)


def _why_not(claims: list[ClaimResult]) -> list[str]:
    """What kept each non-evidence reading out, grouped: forced, cannot fail, no controls, inconclusive."""
    groups = [("forced by an invariance", [c for c in claims if c.forced]),
              ("a rule that cannot fail (its null passes, or the protocol fixes the outcome)",
               [c for c in claims if not c.forced and c.can_fail is False]),
              ("no controls", [c for c in claims if not c.forced and c.can_fail is None]),
              ("inconclusive", [c for c in claims if not c.forced and c.can_fail and c.verdict == INCONCLUSIVE])]
    return [f"{what} ({_ids(cs)})" for what, cs in groups if cs]


def regime_answer(claims: list[ClaimResult]) -> str:
    """One paragraph: the answer, the evidence it rests on, and why the other readings do not count."""
    read = [c for c in claims if c.id in REGIME_CLAIMS and not c.comparison]
    if not read:
        return f"**{QUESTION}** Not asked in this run: none of its claims ({', '.join(REGIME_CLAIMS)}) was tested."
    evidence = [c for c in read if is_evidence(c)]
    yes = [c for c in evidence if c.verdict == SUPPORTED]
    no = [c for c in evidence if c.verdict == NOT_SUPPORTED]
    if yes and no:
        answer = f"The evidence is split: {_ids(yes)} support it, {_ids(no)} refute it."
    elif yes:
        answer = f"The evidence says yes: {_ids(yes)} support it and no reading that is evidence refutes it."
    elif no:
        answer = f"The evidence says no: {_ids(no)} refute it and no reading that is evidence supports it."
    else:
        answer = "This run gives no answer: none of the readings of it is evidence yet."
    out = [f"**{QUESTION}** {answer}", f"{len(read)} claims read it, {len(evidence)} of them evidence."]
    kept_out = _why_not([c for c in read if not is_evidence(c)])
    if kept_out:
        out.append("Not counted: " + "; ".join(kept_out) + ".")
    return " ".join(out)
