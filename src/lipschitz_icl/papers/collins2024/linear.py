"""(e): trained linear attention cannot adapt its window (claim CL5)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ... import plots
from ...experiments.claims import ClaimResult, claim
from ...experiments.evidence import power_law, seed_interval
from ...experiments.figures import plain_log_ticks
from .reading import COVERS, DOWN, direction, per_seed, runs_read
from .sweep import KIND

STATEMENTS = {
    "CL5": "Trained linear attention cannot adapt its window: its error does not change along L and N as the softmax "
           "model's does, and it is worse than softmax attention wherever the function is nonlinear.",
}

CAPTIONS = {
    "collins_linear": (
        "Error on unseen functions of trained softmax attention, trained linear attention and Nadaraya-Watson with "
        "the best fixed bandwidth, against L (left) and the context size N (right), log-log, medians over seeds "
        "(dots: seeds). Look for linear attention above softmax everywhere, rising faster with L and not falling "
        "with N. Linear attention as good as softmax somewhere, or following its curves, contradicts CL5."),
}

FOLLOWS_WITHIN = 0.25  # two log-error changes across an axis within this of each other: the curves follow


def _growth(frame: pd.DataFrame) -> dict[int, float]:
    """Per seed, log(error at the axis's last value / error at its first value)."""
    lo, hi = frame["value"].min(), frame["value"].max()
    out = {}
    for seed, g in frame.groupby("seed"):
        first, last = g.loc[g["value"] == lo, "error"], g.loc[g["value"] == hi, "error"]
        out[int(seed)] = float(np.log(last.iloc[0] / first.iloc[0])) if len(first) and len(last) else math.nan
    return out


def _growth_gap(table: pd.DataFrame, axis: str) -> list[float]:
    """Per seed, linear's log-error change across ``axis`` minus softmax's."""
    on = table[table["axis"] == axis]
    lin, soft = _growth(on[on["model"] == "linear"]), _growth(on[on["model"] == "softmax"])
    return [lin[s] - soft[s] for s in sorted(lin) if s in soft]


def judge_linear(ctx, table: pd.DataFrame, data: list[str]) -> ClaimResult:
    """CL5 from the linear and softmax runs of the sweep, matched by setting and seed."""
    crit = (f"Trained linear attention and the reduced softmax model, both from 0, same prompts ({KIND}: nonlinear). "
            "(i) Per seed, the smallest over every setting of error(linear) / error(softmax); (ii) per seed, the "
            "change of log error across the L axis (last value over first), linear's minus softmax's; (iii) the same "
            "across the N axis. Bootstrap intervals of the medians over >= 5 seeds. Supported if (i)'s lower end "
            "is > 1 and (ii)'s and (iii)'s lower ends are > 0 (linear's error grows faster with L and falls slower "
            f"with N); not supported if (i)'s upper end is < 1, or (ii)'s and (iii)'s intervals both lie within "
            f"+-{FOLLOWS_WITHIN:g} (its curves follow softmax's); otherwise inconclusive.")
    pair = table.pivot_table(index=["axis", "value", "seed"], columns="model", values="error").dropna()
    pair["ratio"] = pair["linear"] / pair["softmax"]
    ratio = per_seed(pair.reset_index(), "ratio", np.min)
    gaps = {axis: _growth_gap(table, axis) for axis in ("L", "tau", "N")}
    sup, ref, ivs = cl5_rule(ratio, gaps)
    enough = all(iv[2] for iv in ivs.values())
    lin_L = table[(table["model"] == "linear") & (table["axis"] == "L")]
    stat = {"intervals": {k: iv[0] for k, iv in ivs.items()}, "min_ratio_by_seed": ratio, "growth_gap_by_seed": gaps,
            "error_power_law": {f"{m}_{a}": power_law(f["value"].tolist(), f["error"].tolist()).as_dict()
                                for (m, a), f in table.groupby(["model", "axis"])},
            "linear_window_along_L": direction(lin_L, "window", DOWN)}
    why = "" if sup != ref else ("fewer than 5 seeds" if not enough else
                                 "an interval straddles its threshold (the ratio 1 or a growth gap 0)")
    return claim("CL5", crit, stat, sup, ref, figures=[_figure(ctx, table)], runs=runs_read(table), data=list(data),
                 interval={k: iv[0] for k, iv in ivs.items()}, interval_covers={k: iv[1] for k, iv in ivs.items()},
                 undecided_because=why,
                 notes="The tau axis's gap is reported, not judged: under f = L g it is the L axis read backwards.")


def cl5_rule(ratio: list[float], gaps: dict[str, list[float]]) -> tuple[bool, bool, dict[str, tuple]]:
    """CL5's (supported, refuted) from per-seed values: the smallest error(linear) / error(softmax) over the
    settings and, per axis (L, tau, N), linear's log-error change minus softmax's; with each one's seed_interval
    (interval, covers, enough). Supported if the ratio's and the L and N gaps' lower ends are above 1, 0, 0;
    refuted if the ratio's upper end is below 1 or both gaps lie within +-FOLLOWS_WITHIN (tau: reported only)."""
    ivs = {"ratio": seed_interval(ratio, COVERS), **{f"growth_gap_{a}": seed_interval(g, COVERS)
                                                     for a, g in gaps.items()}}
    enough = all(iv[2] for iv in ivs.values())
    (r_lo, r_hi), (l_lo, l_hi), (n_lo, n_hi) = (ivs[k][0] for k in ("ratio", "growth_gap_L", "growth_gap_N"))
    sup = enough and r_lo > 1 and l_lo > 0 and n_lo > 0
    follows = all(-FOLLOWS_WITHIN <= v <= FOLLOWS_WITHIN for v in (l_lo, l_hi, n_lo, n_hi))
    return sup, enough and (r_hi < 1 or follows), ivs


def _figure(ctx, table: pd.DataFrame) -> str:
    fig, axes = plots.figure(2, 1)
    for ax, axis in zip(axes[0], ("L", "N"), strict=True):
        on = table[table["axis"] == axis]
        curves = [(on[on["model"] == "softmax"], "error", "o-", "softmax attention"),
                  (on[on["model"] == "linear"], "error", "s-", "linear attention"),
                  (on[on["model"] == "softmax"], "nw_error", "^--", "NW, best fixed h")]
        for frame, column, style, label in curves:
            med = frame.groupby("value")[column].median()
            ax.loglog(med.index, med.to_numpy(), style, label=label)
            if column == "error":
                ax.loglog(frame["value"], frame[column], style[0], alpha=0.25, ms=3,
                          color=ax.lines[-1].get_color())
        ax.set(xlabel=axis, ylabel="error on unseen functions", title=f"along {axis}")
        plain_log_ticks(ax, sorted(on["value"].unique()))
        ax.legend(fontsize=7)
    return plots.save(fig, ctx.out, "collins_linear")
