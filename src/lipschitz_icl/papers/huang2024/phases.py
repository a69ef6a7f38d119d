"""(h) the predecessor's balanced and imbalanced features (linear class, orthonormal features)."""

from __future__ import annotations

import numpy as np

from ... import plots
from ...analysis import analyze_run_object, first_step
from ...experiments.claims import ClaimResult, claim
from ...experiments.controls import Controls, case, controls, controls_from
from ...experiments.evidence import MIN_RESOLVED_STEPS, run_settings
from ...experiments.figures import captioned
from ...experiments.registry import experiment
from ...experiments.runner import Context, paper_base, rel_runs, run_group, with_overrides
from ...experiments.synthetic import PHASE_CASES, curve_steps, logistic, phases_of_curve, ramp
from ...phases import read_run_phases

STATEMENTS = {  # the claims this file tests, word for word as the report and docs/CLAIMS.md give them
    "H1": "Balanced features: two-phase convergence to near-zero error.",
    "H2": "Imbalanced features: the dominant feature converges first, in one phase; each rare feature converges later, "
    "through four phases.",
}


CAPTIONS = {  # figure stem -> what is plotted, what to look for, what would contradict the claim
    "predecessor_H1_H2": (
        "Attn_k of every feature k against step (symlog x). Left: balanced features; right: imbalanced, p_0 = 0.6 "
        "(feature 0 dominant). H1: look for all features rising fast and then approaching 1 together. H2: look for "
        "the dominant feature reaching 0.9 first and the rare features rising later along an S-shaped curve, through "
        "four phases (markers: take-off, fastest growth, saturation, convergence). A rare feature converging before "
        "the dominant, or a rare curve with fewer phases, contradicts H2; balanced curves that never approach 1 "
        "contradict H1."),
}


H2_EPS_ATTN = 0.1  # H2: a feature has converged when 1 - Attn_k <= this


@experiment("H1", "H2", suites=("paper",), statements=STATEMENTS)
@captioned(CAPTIONS)
def exp_predecessor(ctx: Context) -> list[ClaimResult]:
    """(h) the predecessor's balanced and imbalanced features (linear class, orthonormal features)."""
    crit1 = ("Balanced features (uniform p), L = 2: supported if the phase reading (phases.py: T_1 >= 10 steps, a "
             "rise of -log(1 - min_k Attn_k) that does not decelerate by more than 1.5x before T_1, then a rate over "
             "[5 T_1, 10 T_1] below 1/3 of the fast one) finds 2 phases and the final loss is <= eps (near-zero "
             "error); not supported if it finds 1 phase or the run does not converge; inconclusive when it cannot "
             "read the run (T_1 < 10 steps, or the run stops before 10 T_1).")
    crit2 = ("Imbalanced features (p_max = 0.6 on feature 0). Phases of the own-feature attention Attn_k of a query "
             "of feature k, this project's reading of Huang, Cheng, Liang's four phases (their exact boundaries were "
             "not reachable), defined from the dynamics: with the growth rate r = dAttn_k/dt and its change a = "
             "dr/dt over the logged steps, the events are (i) take-off: the largest a before (ii); (ii) fastest "
             "growth: the largest r; (iii) saturation: the most negative a after (ii); (iv) convergence: 1 - Attn_k "
             f"<= {H2_EPS_ATTN:g}; (ii) and (iii) are sought before (iv). An event in the first {MIN_RESOLVED_STEPS} "
             "steps counts as at 0 (it cannot be told from the start). The phases are the non-empty intervals [0, "
             "i), [i, ii), [ii, iii), [iii, iv) (the last under way when (iv) is not reached). Supported if the "
             "dominant feature converges first in one phase and every rare feature has four; not supported if a "
             "rare feature converges first, or the dominant has more than one phase, or a rare feature that "
             "converged has fewer than four; otherwise inconclusive. A rare feature not converged within the budget "
             "is censored and ranks after the dominant.")
    S = ctx.sizes
    cfg = paper_base(ctx, f"train.steps={S.budget * 2}")
    bal = with_overrides(cfg, ["name=balanced"])
    imb = with_overrides(cfg, ["name=imbalanced", "features.probs=imbalanced", "features.p_max=0.6"])
    r_bal, r_imb = run_group(ctx, "predecessor", [bal, imb], "(h) balanced / imbalanced")
    a_bal = read_run_phases(r_bal.metrics, r_bal.summary["T_1"])
    events = growth_events_by_feature(r_imb)
    per_phase = {k: phase_count(ev) for k, ev in events.items()}
    conv = {k: ev[3] for k, ev in events.items()}
    sup2, ref2 = h2_rule(events)
    fig = _predecessor_figure(ctx, r_bal, r_imb, events)
    return [
        claim("H1", crit1, {"n_phases": a_bal.n_phases, "phase_reading": a_bal.why, "final_loss":
                            r_bal.summary["final_loss"], "status": r_bal.summary["status"],
                            "old_rate_ratio_n_phases": analyze_run_object(r_bal)["n_phases"]},
              *h1_rule(a_bal.n_phases, r_bal.summary["status"] == "converged"), figures=[fig],
              runs=rel_runs(ctx, [r_bal]), settings=run_settings([r_bal])),
        claim("H2", crit2, {"events_by_feature": {k: list(ev) for k, ev in events.items()},
                            "phases_by_feature": per_phase, "converged_step_by_feature": conv,
                            "competition_events_by_feature": {k: list(ev) for k, ev in
                                                              _competition_events(r_imb).items()},
                            "status": r_imb.summary["status"]},
              sup2, ref2, figures=[fig], runs=rel_runs(ctx, [r_imb]), settings=run_settings([r_imb]),
              censored=sum(t is None for t in conv.values()),
              undecided_because="" if sup2 != ref2 else (
                  "the dominant feature did not converge within the budget" if conv[0] is None else
                  "a rare feature has not converged and shows fewer than four phases so far"),
              notes="Events (take-off, fastest growth, saturation, convergence) per feature in events_by_feature; "
                    "competition_events_by_feature keeps the earlier reading (overtaking the strongest rival, 1/2, "
                    "convergence), which can give at most three phases. The dominant's single phase follows largely "
                    "from its start: Attn_0(0) = p_0 = 0.6, already past the fastest growth of an S-shaped rise."),
    ]


def h1_rule(n_phases: int | None, converged: bool) -> tuple[bool, bool]:
    """H1's (supported, refuted): two phases and converged; one phase or not converged (None: not read)."""
    return n_phases == 2 and converged, n_phases == 1 or not converged


@controls("H1")
def h1_controls() -> Controls:
    """H1's rule on synthetic converged curves: one smooth law (nulls) and a steady rise then a creep (planted)."""
    def read(curve, how: str):
        n, why = phases_of_curve(curve)
        return case(*h1_rule(n, True), {"n_phases": n, "phase_reading": why}, how)

    return controls_from(PHASE_CASES, read)


def h2_rule(events: dict[int, tuple[int | None, ...]]) -> tuple[bool, bool]:
    """H2's (supported, refuted) from each feature's growth events (feature 0 the dominant one)."""
    per_phase = {k: phase_count(ev) for k, ev in events.items()}
    conv = {k: ev[3] for k, ev in events.items()}
    rare = [t for k, t in conv.items() if k != 0]
    dominant_first = conv[0] is not None and all(t is None or t > conv[0] for t in rare)
    rare_first = any(t is not None and (conv[0] is None or t < conv[0]) for t in rare)
    four = all(per_phase[k] == 4 for k in per_phase if k != 0)
    too_few = any(per_phase[k] < 4 and conv[k] is not None for k in per_phase if k != 0)
    return dominant_first and per_phase[0] == 1 and four, rare_first or per_phase[0] > 1 or too_few


@controls("H2")
def h2_controls() -> Controls:
    """H2's rule on synthetic imbalanced runs: the dominant feature 1 - 0.4 e^(-t/250) (one phase from 0.6, the
    same in every case), two rare ones converging after it."""
    t = curve_steps()

    def read(rare_curves, how: str):
        events = {0: growth_events(t, 1 - 0.4 * np.exp(-t / 250))}
        events.update({k: growth_events(t, curve) for k, curve in enumerate(rare_curves, start=1)})
        return case(*h2_rule(events), {"phases_by_feature": {k: phase_count(ev) for k, ev in events.items()}}, how)

    def stalled(rate: float) -> np.ndarray:  # flat at 0.1 until step 1000, then an S-shaped rise
        return np.where(t < 1000, 0.1, logistic(np.maximum(t - 1000, 0), start=0.1, rate=rate))

    return Controls(
        null=read([logistic(t, 0.1, 2e-3), logistic(t, 0.1, 1.5e-3)],
                  "rare features each one logistic from 0.1 (one S-shaped law: no distinct phases)"),
        planted=read([stalled(2e-3), stalled(1.5e-3)],
                     "rare features that stall at 0.1 for 1000 steps, then take off, grow, saturate and converge"),
        extra={"null_ramp": read([ramp(t, 8000), ramp(t, 9000)], "rare features each a straight line to 1")})


def phase_count(events: tuple[int | None, ...]) -> int:
    """Phases [0, e1), [e1, e2), ... that have begun and are not empty (an open end: under way at the budget)."""
    return sum(1 for a, b in zip((0, *events), events, strict=False) if a is not None and (b is None or b > a))


def growth_events(steps: np.ndarray, own: np.ndarray) -> tuple[int | None, int | None, int | None, int | None]:
    """(take-off, fastest growth, saturation, convergence) of one own-attention curve Attn_k(t) on the logged
    ``steps``: the largest change of the growth rate before the fastest growth, the largest growth rate, the
    most negative change after it, and the first step with 1 - Attn_k <= H2_EPS_ATTN (None: not reached);
    the first three are sought up to convergence (or the end) and an event before MIN_RESOLVED_STEPS is 0."""
    t = np.asarray(steps, dtype=float)
    if len(t) < 3:
        return None, None, None, None
    converged = first_step(t, own, 1 - H2_EPS_ATTN, above=True)
    end = len(t) if converged is None else int(np.searchsorted(t, converged)) + 1
    rate = np.gradient(own, t, edge_order=2)  # r = dAttn_k/dt (second order at the ends too)
    change = np.gradient(rate, t, edge_order=2)  # a = dr/dt
    fastest = int(np.argmax(rate[:end]))
    take_off = int(np.argmax(change[:fastest + 1]))
    saturation = fastest + int(np.argmin(change[fastest:end]))

    def at(i: int) -> int:
        return 0 if t[i] < MIN_RESOLVED_STEPS else int(t[i])

    return at(take_off), at(fastest), at(saturation), converged


def growth_events_by_feature(run) -> dict[int, tuple[int | None, ...]]:
    """``growth_events`` of every feature's own attention in ``run``."""
    att = run.attention()
    return {int(k): growth_events(att.index.to_numpy(), att[k].to_numpy()) for k in att.columns}


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


def _predecessor_figure(ctx, r_bal, r_imb, events: dict[int, tuple[int | None, ...]]) -> str:
    fig, axes = plots.figure(2, 1)
    for ax, r, title in ((axes[0][0], r_bal, "balanced features"), (axes[0][1], r_imb, "imbalanced (p_0 = 0.6)")):
        att = r.attention()
        for k, c in zip(att.columns, plots.colors(len(att.columns)), strict=True):
            ax.plot(att.index, att[k], color=c, label=f"Attn_{k}" + (" (dominant)" if k == 0 and r is r_imb else ""))
            marks = [e for e in events.get(int(k), ()) if e is not None] if r is r_imb else []
            ax.plot(marks, np.interp(marks, att.index.to_numpy(), att[k].to_numpy()), "|", color=c, ms=9)
        ax.set(title=title, xlabel="step", xscale="symlog", ylim=(0, 1.02))
        ax.legend(fontsize=7)
    return plots.save(fig, ctx.out, "predecessor_H1_H2")


