"""(a) flat regime, (b) sharp regime: loss and attention against step; P1 two phases."""

from __future__ import annotations

from ... import plots
from ...analysis import analyze_run_object
from ...experiments.claims import ClaimResult, claim
from ...experiments.controls import Controls, controls
from ...experiments.evidence import run_settings
from ...experiments.figures import captioned
from ...experiments.measure import L_star_of
from ...experiments.registry import experiment
from ...experiments.runner import Context, censored_runs, paper_base, rel_runs, run_group, with_budget, with_overrides
from ...experiments.synthetic import share_controls
from ...phases import read_run_phases

STATEMENTS = {  # the claims this file tests, word for word as the report and docs/CLAIMS.md give them
    "P1": "Two phases: a query's attention to tokens of its own feature rises fast at first, then creeps toward 1.",
}


CAPTIONS = {  # figure stem -> what is plotted, what to look for, what would contradict the claim
    "regimes_flat": (
        "Flat regime: three runs at L = 0.3, 0.5 and 0.7 L*, each trained to a relative eps of 1e-3. Top: loss "
        "against step (linear, then log y); bottom: min_k Attn_k (solid; mean dashed) and 1 - min_k Attn_k (log y). "
        "Look for two phases: a steep early rise of min_k Attn_k to about 1/2 (T_1), then a slow creep toward 1 "
        "(a fast drop, then a shallower decline on the log panels). One smooth decay from the start, with no change "
        "of rate, would contradict P1."),
    "regimes_sharp": (
        "Sharp regime: three runs at L = 1.5, 3 and 6 L*, each trained to a relative eps of 1e-3. Top: loss "
        "against step (linear, then log y); bottom: min_k Attn_k (solid; mean dashed) and 1 - min_k Attn_k (log y). "
        "Look for the same two phases as in the flat regime, a fast rise to about 1/2 and then a slow creep toward "
        "1, reached in fewer steps. One smooth decay from the start, with no change of rate, would contradict P1."),
}


def _curves_figure(ctx: Context, runs, title: str, stem: str) -> str:
    fig, axes = plots.figure(2, 2)
    cols = plots.colors(len(runs))
    for run, c in zip(runs, cols, strict=True):
        label = f"L={run.config.task.L:.3g}"
        loss = run.series("loss")
        amin, amean = run.series("attn_min"), run.series("attn_mean")
        for ax in axes[0]:
            ax.plot(loss.index, loss.values, color=c, label=label)
        axes[0][1].set_yscale("log")
        axes[1][0].plot(amin.index, amin.values, color=c, label=f"{label} min")
        axes[1][0].plot(amean.index, amean.values, color=c, ls="--")
        axes[1][1].plot(amin.index, 1 - amin.values, color=c)
        axes[1][1].set_yscale("log")
    axes[0][0].set(title=f"{title}: loss", xlabel="step")
    axes[0][1].set(title="loss (log y)", xlabel="step")
    axes[1][0].set(title="min_k Attn_k (solid), mean (dashed)", xlabel="step", ylim=(0, 1.02))
    axes[1][1].set(title="1 - min_k Attn_k (log y)", xlabel="step")
    axes[0][0].legend(fontsize=7)
    return plots.save(fig, ctx.out, stem)


@experiment("P1", suites=("paper",), statements=STATEMENTS)
@captioned(CAPTIONS)
def exp_regimes(ctx: Context) -> list[ClaimResult]:
    """(a) flat regime, (b) sharp regime: loss and attention against step; P1 two phases."""
    S = ctx.sizes
    criterion = ("For 3 values of L below L* and 3 above, each run trained to the same relative eps "
                 f"({P1_EPS:g}) with its budget in rescaled time s = eta L^2 t (3x what the theory's scale needs), "
                 "T_1 the trainer's exact step and every step recorded up to it, the phase reading (phases.py) "
                 "finds 2 phases when T_1 >= 10 steps, the rise of r = -log(1 - min_k Attn_k) does not decelerate "
                 "by more than 1.5x between the halves of [0, T_1], and the rate of r over [5 T_1, 10 T_1] is below "
                 "1/3 of the rate over [0, T_1]; 1 phase when T_1 is resolved and the window read but the rise "
                 "decelerates or the later rate is not 3x slower. Supported if >= 80% of the six runs show 2 phases; "
                 "not supported if <= 20%; a run it cannot read (T_1 < 10 steps, or stopped before 10 T_1: "
                 "censored) counts both ways, and the verdict stands only if it holds either way.")
    cfg = paper_base(ctx)
    L_star = L_star_of(cfg)
    factors = {"flat": (0.3, 0.5, 0.7), "sharp": (1.5, 3.0, 6.0)}
    runs = {}
    for regime, fs in factors.items():
        configs = [with_budget(with_overrides(cfg, [f"task.L={f * L_star:.6g}", f"name={regime}-L{f * L_star:.3g}"]),
                               P1_EPS, cap=25 * S.budget) for f in fs]  # the budget is never the cap
        runs[regime] = run_group(ctx, f"regimes-{regime}", configs, f"(a,b) {regime} regime")
    figs = [_curves_figure(ctx, runs[r], f"{r} regime", f"regimes_{r}") for r in runs]
    all_runs = runs["flat"] + runs["sharp"]
    censored = sorted(set(censored_runs(all_runs, "T_1") + censored_runs(all_runs, "T_eps")))
    reads = {r.config.name: read_run_phases(r.metrics, r.summary["T_1"]) for r in all_runs}
    two = sum(p.n_phases == 2 for p in reads.values())
    open_ = sorted(n for n, p in reads.items() if p.n_phases is None)  # unreadable: counted both ways
    lo, hi = two / len(all_runs), (two + len(open_)) / len(all_runs)
    stat = {"L_star": L_star, "runs_reaching_T1": sum(r.summary["T_1"] is not None for r in all_runs),
            "fraction_two_phases": lo if not open_ else None, "fraction_two_phases_bounds": [lo, hi],
            "n_phases_by_L": {f"{r.config.task.L:.3g}": reads[r.config.name].n_phases for r in all_runs},
            "creep_slower_by_L": {f"{r.config.task.L:.3g}": _slower(reads[r.config.name]) for r in all_runs},
            "unread_runs": open_, "censored_runs": censored,
            "old_rate_ratio_n_phases_by_L": {f"{r.config.task.L:.3g}": analyze_run_object(r)["n_phases"]
                                             for r in all_runs},
            "s_T1_by_L": {f"{r.config.task.L:.3g}": _rescaled(r, "T_1") for r in all_runs},
            "s_Teps_by_L": {f"{r.config.task.L:.3g}": _rescaled(r, "T_eps") for r in all_runs}}
    return [claim("P1", criterion, stat, *p1_rule(lo, hi), figures=figs, runs=rel_runs(ctx, all_runs),
                  forced_reason=FORCED_P1, censored=len(set(censored) | set(open_)),
                  settings=run_settings(all_runs), interval={"fraction_two_phases": [lo, hi]},
                  interval_covers={"fraction_two_phases": "the runs the reading cannot read counted as 1 or as 2 "
                                   "phases (bounds, not an interval over randomness)"},
                  undecided_because="" if lo >= 0.8 or hi <= 0.2 else
                  "the share of two-phase runs lies between the margins (or censored runs could move it across "
                  "one); the shape of the one trajectory in s at small steps decides it")]


P1_EPS = 1e-3  # relative eps of P1's runs


def p1_rule(lo: float, hi: float) -> tuple[bool, bool]:
    """P1's (supported, refuted) from the share of two-phase runs (censored runs counted as 1 and as 2 phases)."""
    return lo >= 0.8, hi <= 0.2


@controls("P1")
def p1_controls() -> Controls:
    """P1's rule on six synthetic runs: one curve at six time scales (t -> t / scale)."""
    return share_controls(p1_rule, "fraction_two_phases_bounds", "runs")


def _slower(reading) -> float | None:
    """How many times slower the creep is than the fast phase (None when the reading has no rates)."""
    if not reading.fast_rate or not reading.slow_rate:
        return None
    return reading.fast_rate / reading.slow_rate


FORCED_P1 = ("f = L g: at a relative eps the six runs are one trajectory in s = eta L^2 t (up to step "
             "discretisation at large eta L^2), so the split by L below and above L* is fixed; only that "
             "trajectory's shape is measured")


def _rescaled(run, event: str) -> float | None:
    """s = eta L^2 T of a summary event time (None when not reached)."""
    t = run.summary[event]
    return None if t is None else t * run.config.train.lr * run.config.task.L ** 2


