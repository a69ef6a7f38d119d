"""(h) the predecessor's balanced and imbalanced features (linear class, orthonormal features)."""

from __future__ import annotations

from ... import plots
from ...analysis import analyze_run_object, first_step
from ...experiments.claims import ClaimResult, claim
from ...experiments.figures import captioned
from ...experiments.registry import experiment
from ...experiments.runner import Context, paper_base, rel_runs, run_group, with_overrides

STATEMENTS = {  # the claims this file tests, word for word as the report and docs/CLAIMS.md give them
    "H1": "Balanced features: two-phase convergence to near-zero error.",
    "H2": "Imbalanced features: the dominant feature converges first (one phase); the rare features converge later, "
    "through more phases.",
}


CAPTIONS = {  # figure stem -> what is plotted, what to look for, what would contradict the claim
    "predecessor_H1_H2": (
        "Attn_k of every feature k against step (symlog x). Left: balanced features; right: imbalanced, p_0 = 0.6 "
        "(feature 0 dominant). H1: look for all features rising fast and then approaching 1 together. H2: look for "
        "the dominant feature reaching 0.9 first and the rare features rising later, through more phases (overtaking "
        "their strongest competitor, then 1/2, then 0.9). A rare feature converging before the dominant contradicts "
        "H2; balanced curves that never approach 1 contradict H1."),
}


H2_EPS_ATTN = 0.1  # H2: a feature has converged when 1 - Attn_k <= this


@experiment("H1", "H2", suites=("paper",), statements=STATEMENTS)
@captioned(CAPTIONS)
def exp_predecessor(ctx: Context) -> list[ClaimResult]:
    """(h) the predecessor's balanced and imbalanced features (linear class, orthonormal features)."""
    crit1 = ("Balanced features (uniform p), L = 2: supported if the analysis finds 2 phases and the final loss is "
             "<= eps (near-zero error); not supported if it finds 1 phase or the run does not converge.")
    crit2 = ("Imbalanced features (p_max = 0.6 on feature 0). Phases after Huang, Cheng, Liang (ICML 2024: one "
             "phase for the dominant feature, four for a rare one, set by the competing strengths of two attention "
             "weights; their exact boundaries are not reproduced, this is the project's reading): for a query of "
             "feature k, its own-feature attention Attn_k and "
             "its attention on the strongest other feature (the dominant feature 0 for a rare k). Phase boundaries: "
             "(i) Attn_k overtakes that competitor, (ii) Attn_k reaches 1/2, (iii) 1 - Attn_k <= "
             f"{H2_EPS_ATTN:g} (converged); the phases are the non-empty intervals [0, i), [i, ii), [ii, iii) (an "
             "event already true at step 0 opens none). Supported if the dominant feature converges (iii) first and "
             "every rare feature has more phases than the dominant; not supported if a rare feature converges first. "
             "A rare feature not converged within the budget is censored and ranks after the dominant.")
    S = ctx.sizes
    cfg = paper_base(ctx, f"train.steps={S.budget * 2}")
    bal = with_overrides(cfg, ["name=balanced"])
    imb = with_overrides(cfg, ["name=imbalanced", "features.probs=imbalanced", "features.p_max=0.6"])
    r_bal, r_imb = run_group(ctx, "predecessor", [bal, imb], "(h) balanced / imbalanced")
    a_bal = analyze_run_object(r_bal)
    events = _competition_events(r_imb)
    per_phase = {k: phase_count(ev) for k, ev in events.items()}
    conv = {k: ev[2] for k, ev in events.items()}
    rare = [t for k, t in conv.items() if k != 0]
    dominant_first = conv[0] is not None and all(t is None or t > conv[0] for t in rare)
    rare_first = any(t is not None and (conv[0] is None or t < conv[0]) for t in rare)
    more_phases = all(per_phase[k] > per_phase[0] for k in per_phase if k != 0)
    fig = _predecessor_figure(ctx, r_bal, r_imb)
    return [
        claim("H1", crit1, {"n_phases": a_bal["n_phases"], "final_loss": r_bal.summary["final_loss"],
                            "status": r_bal.summary["status"]},
              a_bal["n_phases"] == 2 and r_bal.summary["status"] == "converged",
              a_bal["n_phases"] < 2 or r_bal.summary["status"] != "converged", figures=[fig],
              runs=rel_runs(ctx, [r_bal])),
        claim("H2", crit2, {"events_by_feature": {k: list(ev) for k, ev in events.items()},
                            "phases_by_feature": per_phase, "converged_step_by_feature": conv,
                            "status": r_imb.summary["status"]},
              dominant_first and more_phases, rare_first, figures=[fig], runs=rel_runs(ctx, [r_imb]),
              censored=sum(t is None for t in conv.values()),
              undecided_because="" if (dominant_first and more_phases) != rare_first else (
                  "the dominant feature did not converge within the budget" if conv[0] is None else
                  "the dominant converged first but a rare feature has no more phases than it"),
              notes="The phase counts follow from the start (Attn_k(0) = p_k: the dominant starts above 1/2 and "
                    "above every competitor); the order of convergence is what the run decides."),
    ]


def phase_count(events: tuple[int | None, ...]) -> int:
    """Phases [0, e1), [e1, e2), ... that have begun and are not empty (an open end: under way at the budget)."""
    return sum(1 for a, b in zip((0, *events), events, strict=False) if a is not None and (b is None or b > a))


def _competition_events(run) -> dict[int, tuple[int | None, int | None, int | None]]:
    """Per feature k, the first recorded steps at which (i) Attn_k exceeds the query's largest attention
    on another feature, (ii) Attn_k >= 1/2, (iii) 1 - Attn_k <= H2_EPS_ATTN (None: not reached)."""
    att, cross = run.attention(), run.per_feature("attn_cross")
    steps = att.index.to_numpy()
    out = {}
    for k in att.columns:
        own = att[k].to_numpy()
        rival = cross[[c for c in cross.columns if c[0] == k]].to_numpy().max(axis=1)
        out[int(k)] = (first_step(steps, own - rival, 0.0, above=True), first_step(steps, own, 0.5, above=True),
                       first_step(steps, own, 1 - H2_EPS_ATTN, above=True))
    return out


def _predecessor_figure(ctx, r_bal, r_imb) -> str:
    fig, axes = plots.figure(2, 1)
    for ax, r, title in ((axes[0][0], r_bal, "balanced features"), (axes[0][1], r_imb, "imbalanced (p_0 = 0.6)")):
        att = r.attention()
        for k, c in zip(att.columns, plots.colors(len(att.columns)), strict=True):
            ax.plot(att.index, att[k], color=c, label=f"Attn_{k}" + (" (dominant)" if k == 0 and r is r_imb else ""))
        ax.set(title=title, xlabel="step", xscale="symlog", ylim=(0, 1.02))
        ax.legend(fontsize=7)
    return plots.save(fig, ctx.out, "predecessor_H1_H2")


