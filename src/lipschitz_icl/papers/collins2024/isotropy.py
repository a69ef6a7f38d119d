"""(d): for a rotation-invariant class the trained Q is near-isotropic (claim CL4)."""

from __future__ import annotations

import pandas as pd

from ... import plots
from ...experiments.claims import ClaimResult, claim
from ...experiments.evidence import seed_interval
from ...experiments.figures import plain_log_ticks
from ...experiments.runner import Context, rel_runs, run_group, with_overrides
from .reading import COVERS, runs_read
from .sweep import BASE, KIND, D, axis_values, collins_config, measure, seeds

STATEMENTS = {
    "CL4": "For an isotropic class the trained Q is near-isotropic: the eigenvalues of sym(Q) are nearly equal "
           "(the attention is a Nadaraya-Watson smoother with one bandwidth in every direction).",
}

CAPTIONS = {
    "collins_isotropy": (
        "The eigenvalue spread lambda_max / lambda_min of sym(Q) of the trained softmax attention against L (inputs "
        "on the sphere, a rotation-invariant class); dots are seeds, the line their medians, the dotted line the "
        "isotropic value 1; crosses: the anisotropic control class at the largest L. Look for the spread approaching 1 "
        "as ||Q|| grows with L, and the control's staying clearly above it. A spread far above 1 at the "
        "largest L (an anisotropic Q) contradicts CL4."),
}

ISOTROPIC_BELOW, ANISOTROPIC_ABOVE = 1.25, 1.5  # eigenvalue ratios: near-isotropic / clearly anisotropic


CONTROL_KIND = "aniso_linear"  # a class whose law favours the first axes: its optimal Q is not a multiple of I


def control(ctx: Context) -> tuple[list[float], list[str]]:
    """The control: the softmax model trained on CONTROL_KIND at the L axis's largest L, one run per seed;
    its eigenvalue ratios (reported beside CL4's: the statistic can tell an anisotropic Q) and run directories."""
    L = axis_values(ctx, "L")[-1]
    configs = [with_overrides(collins_config(ctx, "softmax", s, L, BASE["tau"], BASE["N"]),
                              [f"task.kind={CONTROL_KIND}", f"name=control-{CONTROL_KIND}-L{L:g}-s{s}"])
               for s in seeds(ctx)]
    runs = run_group(ctx, "collins_control", configs, "Collins: isotropy control")
    return [measure(r)["eig_ratio"] for r in runs], rel_runs(ctx, runs)


def judge_isotropy(ctx, table: pd.DataFrame, data: list[str], controls: tuple[list[float], list[str]]) -> ClaimResult:
    """CL4 from the softmax runs of the L axis (the largest L: the largest ||Q||, the least Adam noise relative
    to it), with the anisotropic control's ratios reported beside them."""
    crit = (f"Reduced softmax model on inputs uniform on S^{D - 1}, {KIND} class (its law is invariant under "
            "rotations, so the population optimum of Q is a multiple of I). Per seed, the eigenvalue ratio "
            "lambda_max / lambda_min of sym(Q) at the largest L of the L axis; a bootstrap interval of the median "
            f"over >= 5 seeds. Supported if its upper end is <= {ISOTROPIC_BELOW:g}; not supported if its lower end "
            f"is > {ANISOTROPIC_ABOVE:g} (or sym(Q) is indefinite in most seeds: no ratio); otherwise inconclusive. "
            f"Reported beside it, not judged: the same ratio for the {CONTROL_KIND} class (directions favouring the "
            "first axes), where Q need not be isotropic.")
    frame = table[(table["model"] == "softmax") & (table["axis"] == "L")]
    top = frame[frame["value"] == frame["value"].max()]
    ratios = top.sort_values("seed")["eig_ratio"].tolist()
    sup, ref, interval, covers, enough = cl4_rule(ratios)
    lo, hi = interval
    medians = frame.groupby("value")["eig_ratio"].median()
    stat = {"L": float(top["value"].max()), "eig_ratio_by_seed": ratios, "eig_ratio_median_interval": interval,
            "eig_ratio_median_by_L": dict(zip(medians.index.tolist(), medians.tolist(), strict=True)),
            "isotropic_below": ISOTROPIC_BELOW, "anisotropic_above": ANISOTROPIC_ABOVE,
            f"control_{CONTROL_KIND}_eig_ratio_by_seed": controls[0],
            f"control_{CONTROL_KIND}_median_interval": seed_interval(controls[0], COVERS)[0]}
    why = "" if sup != ref else ("fewer than 5 seeds" if not enough else
                                 f"the interval [{lo:.3g}, {hi:.3g}] lies between the two thresholds")
    return claim("CL4", crit, stat, sup, ref, figures=[_figure(ctx, frame, controls[0])],
                 runs=[*runs_read(top), *controls[1]], data=list(data), interval={"eig_ratio": interval},
                 interval_covers={"eig_ratio": covers}, undecided_because=why)


def cl4_rule(ratios: list[float]) -> tuple[bool, bool, list[float], str, bool]:
    """CL4's (supported, refuted) from the eigenvalue ratio of each seed (NaN: sym(Q) indefinite), with the
    interval of the median, what it covers and whether >= 5 seeds have a ratio: supported if its upper end is
    <= ISOTROPIC_BELOW, refuted if its lower end is > ANISOTROPIC_ABOVE or most seeds have no ratio."""
    interval, covers, enough = seed_interval(ratios, COVERS)
    lo, hi = interval
    sup = enough and hi <= ISOTROPIC_BELOW
    ref = enough and (lo > ANISOTROPIC_ABOVE or sum(r == r for r in ratios) < len(ratios) / 2)
    return sup, ref, interval, covers, enough


def _figure(ctx, frame: pd.DataFrame, control_ratios: list[float]) -> str:
    fig, axes = plots.figure(1, 1)
    ax = axes[0][0]
    med = frame.groupby("value")["eig_ratio"].median()
    ax.semilogx(frame["value"], frame["eig_ratio"], "o", alpha=0.3, ms=3)
    ax.semilogx(med.index, med.to_numpy(), "o-", color=ax.lines[-1].get_color(), label="median over seeds")
    ax.semilogx([frame["value"].max()] * len(control_ratios), control_ratios, "x", color="r",
                label=f"{CONTROL_KIND} (control)")
    ax.axhline(1.0, color="k", ls=":", lw=1, label="isotropic")
    ax.axhline(ISOTROPIC_BELOW, color="g", ls="--", lw=0.8, label=f"supported below {ISOTROPIC_BELOW:g}")
    ax.set(xlabel="L", ylabel="lambda_max / lambda_min of sym(Q)", title="isotropy of the trained Q")
    plain_log_ticks(ax, sorted(frame["value"].unique()))
    ax.legend(fontsize=7)
    return plots.save(fig, ctx.out, "collins_isotropy")
