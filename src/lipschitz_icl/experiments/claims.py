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

# Every claim the suites test (docs/CLAIMS.md), in report order: the paper (P), its predecessor (H),
# the companion write-up (B) and this project's open questions (R).
STATEMENTS: dict[str, str] = {
    "P1": "Two phases: a query's attention to tokens of its own feature rises fast at first, then creeps toward 1.",
    "P2": "Attention to irrelevant features decays more slowly than the target attention rises, and can oscillate.",
    "P3": "At convergence every query attends to its own feature (Attn_k -> 1 for all k) and the prediction error "
    "on functions never seen in training is below eps.",
    "P4": "The Lipschitz constant L governs the dynamics: a threshold L* of order 1/(Delta delta) separates a flat "
    "regime (L < L*) from a sharp regime (L > L*).",
    "P4a": "Threshold, relative-accuracy reading: with eps relative to the initial loss and a fixed step size, the "
    "convergence time changes behaviour along L, at an L of order L* = 1/(Delta delta).",
    "P4b": "Threshold, absolute-accuracy reading: with a fixed absolute eps and a fixed step size, the convergence "
    "time changes behaviour at an L_x that scales as 1/(Delta delta) across settings.",
    "P4c": "Threshold, label-noise reading: with label noise tau > 0, the attention at the loss's optimum "
    "concentrates on the query's own feature (min_k Attn_k > 1/2) above an L_tau that scales as 1/(Delta delta) "
    "across settings.",
    "P4d": "Threshold, step-size reading: at a fixed step size, gradient descent changes behaviour (instability, or "
    "saturation in one step) above an L_x that scales as 1/(Delta delta) across settings.",
    "P5": "Flat regime: convergence time of order K log(K/eps) / (eta delta^2 L^2 Delta^2), i.e. slopes -2 in L, "
    "-2 in Delta, -1 in eta, about K log K in K.",
    "P6": "The flat regime tolerates larger step sizes; the sharp regime has larger gradients and needs smaller ones.",
    "P7": "With step sizes tuned to each regime, the flat regime converges faster when high accuracy (small eps) is "
    "asked; when L is large relative to the accuracy asked, the sharp regime is faster.",
    "P8": "All of this holds beyond orthonormal features and beyond linear functions: for general non-degenerate "
    "L-Lipschitz functions.",
    "H1": "Balanced features: two-phase convergence to near-zero error.",
    "H2": "Imbalanced features: the dominant feature converges first (one phase); the rare features converge later, "
    "through more phases.",
    "B1": "Fast phase lasts about 1/(eta L) steps; slow phase about 1/(eta L^2).",
    "B2": "Above the threshold, error <= eps + O(d/n); below it, eps + O(L^2 d / n) (n: examples).",
    "B3": "The threshold is about sqrt(d/n).",
    "B4": "Early on, the target attention alpha obeys d alpha/dt ~ eta sigma'(g) g (1 - alpha) for a score gap g: "
    "growth toward 1 at a rate of about eta g.",
    "B5": "Larger L gives more concentrated final attention, lower final loss and faster convergence "
    "(the write-up's experiment).",
    "B6": "Linear ICL converges in a single phase with no dependence on L; nonlinear ICL has two.",
    "B7": "Train with high-L examples first (a curriculum over L) to focus attention faster; small L needs more "
    "examples.",
    "R1": "Finite training sets (R1): trained on a fixed set of M prompts instead of the population loss, the model "
    "still learns in context: its error on unseen functions does not grow with M and, at the largest M, is within a "
    "factor 2 of population training.",
    "R2": "Gradient descent on separate W_K, W_Q (R2) goes through the same phases as on the merged Q: a fast rise "
    "of min_k Attn_k to 1/2, then a slower creep toward 1 (after a plateau while the small initial weights grow).",
    "R3a": "Non-uniform p_k (R3): with imbalanced features (p_1 = 0.6, the other four 0.1 each) and a nonlinear "
    "class, the dominant feature converges first and every Attn_k still converges (H2 beyond the linear case).",
    "R3b": "Token noise that is not small (R3): with sigma up to 1 (noise as large as the features themselves, "
    "Delta = sqrt 2), the trained attention still concentrates on the query's own feature (min_k Attn_k >= 1/2).",
    "R3c": "L far beyond the sharp range (R3): with L up to 100 L* and a fixed step size, gradient descent still "
    "drives every Attn_k to 1 (no saturation on a wrong pattern), and convergence to a relative accuracy does not "
    "slow down as L grows (B5's 'larger L converges faster').",
    "R3d": "Label noise: with noisy context labels y_i = f(x_i) + tau eps_i, the trained attention still converges "
    "to the query's own feature (min_k Attn_k >= 0.9) and the error on clean targets of unseen functions reaches the "
    "noise floor of averaging the own-feature labels.",
    "R4": "Convergence is logarithmic in the accuracy asked (R4): the steps to bring the loss to a fraction eps of "
    "its initial value grow like log(1/eps), as the flat-regime time K log(K/eps) / (eta delta^2 L^2 Delta^2) says, "
    "not like a power of 1/eps.",
    "R5": "The two regimes separate visibly (R5): plotted against L/L*, some reading of the threshold shows a change "
    "of behaviour at the same L/L*, of order 1, in every setting.",
    "R6": "No context token close to the query (R6): with continuous inputs the trained attention acts as a kernel "
    "smoother whose sharpness grows with L: ||Q|| increases and the attention window shrinks as L grows "
    "(kernel-regression theory with label noise: ||Q|| ~ L^(4/(m+2)), m the inputs' dimension).",
    "R7": "Deeper and multi-head transformers (R7): in a 2-layer, 4-head transformer trained on the same task, some "
    "head reproduces the paper's mechanism, Attn_k -> 1 for every k.",
    "R8": "The linear case, L = ||w|| (R8): with balanced orthonormal features (the predecessor's setting) every "
    "Attn_k converges and the error reaches eps, and the dynamics depend on L through eta L^2: the end of the fast "
    "phase T_1 scales as L^-2 (the flat-regime rate with delta = 1/sqrt(d)).",
}


def claim_rank(cid: str) -> tuple[int, str]:
    """A claim's place in the report: its row in STATEMENTS; ids missing from it come last, by id."""
    ids = list(STATEMENTS)
    return (ids.index(cid), "") if cid in ids else (len(ids), cid)


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
    interval: dict[str, list[float]] = field(default_factory=dict)  # statistic name -> [low, high]
    size: str = ""  # tiny | quick | full: the sizes the experiment ran at
    undecided_because: str = ""  # for an inconclusive verdict: what would decide it
    captions: dict[str, str] = field(default_factory=dict)  # figure path -> what to look at (optional)
    # a comparison with baselines, not a claim: no verdict; the report puts it in its own section after the claims
    comparison: bool = False

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
    id: str, criterion: str, statistic: dict, supported: bool, refuted: bool, **kw: Any
) -> ClaimResult:
    """A result for claim ``id`` (its statement from STATEMENTS), the verdict from the two conditions."""
    return ClaimResult(id, STATEMENTS.get(id, ""), criterion, statistic, verdict(bool(supported), bool(refuted)), **kw)
