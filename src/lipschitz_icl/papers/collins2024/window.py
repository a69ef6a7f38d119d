"""(a)-(c): the trained softmax attention's sharpness ||Q|| and window r_1/2 along L, the label noise tau and
the context size N (claims CL1, CL2, CL3)."""

from __future__ import annotations

import pandas as pd

from ... import plots
from ...experiments.claims import ClaimResult, claim
from ...experiments.figures import plain_log_ticks
from .reading import DOWN, UP, direction, runs_read
from .sweep import BASE, DRAW_DTYPE, KIND, D

STATEMENTS = {  # the claims this file tests, in this project's words
    "CL1": "Trained softmax attention sharpens with the Lipschitz bound: on continuous inputs ||Q|| grows and the "
           "attention window shrinks as L grows.",
    "CL2": "The window widens with the label noise: as tau grows the trained softmax attention averages over more "
           "context tokens.",
    "CL3": "The window shrinks as the context grows: with more context tokens N the trained softmax attention "
           "narrows its window.",
}

CAPTIONS = {
    "collins_window": (
        "Trained softmax attention on inputs uniform on the sphere: ||Q||_2 (circles) and the window r_1/2 "
        "(squares) against L (left), the label noise tau (middle) and the context size N (right), log-log; "
        "lines join the medians over seeds, dots are single seeds. Look for ||Q|| rising and the window "
        "falling with L, the window rising with tau and falling with N. A window that widens with L or N, or "
        "narrows with tau, contradicts CL1-CL3."),
}

AXIS_LABEL = {"L": "L", "tau": "label noise tau", "N": "context size N"}


def _rule(axis: str, what: str) -> str:
    return (f"Reduced softmax model (Q^(0) = 0) on inputs uniform on S^{D - 1}, {KIND} class, Adam on fresh "
            f"prompts (drawn in {DRAW_DTYPE}); the {axis} axis through L = {BASE['L']:g}, tau = {BASE['tau']:g}, "
            f"N = {BASE['N']}. "
            f"Per seed, the log-log slopes of {what} against {axis} and the worst local slope (between "
            "successive values); bootstrap intervals of their medians over >= 5 seeds. Supported if the worst "
            "local slope's interval lies wholly on the claimed side of 0; not supported if the slope's or the "
            "worst local slope's interval lies wholly on the other side; otherwise (or with fewer than 5 seeds) "
            "inconclusive. The fitted slope is read (slope_read) only if the pooled relation passes the "
            "local-slope lack-of-fit test.")


def window_rule(readings: dict[str, dict]) -> tuple[bool, bool]:
    """CL1-CL3's (supported, refuted) from their direction readings (``reading.direction``): supported if every
    reading goes the claimed way, refuted if any goes the other way."""
    return all(r["supported"] for r in readings.values()), any(r["refuted"] for r in readings.values())


def _claim(cid: str, crit: str, readings: dict[str, dict], figure: str) -> ClaimResult:
    sup, ref = window_rule(readings)
    enough = all(r["enough"] for r in readings.values())
    why = "" if sup != ref else ("fewer than 5 seeds" if not enough else
                                 "the worst local slope's interval straddles 0: some step along the axis is flat "
                                 "within the seeds' spread")
    return claim(cid, crit, readings, sup, ref, figures=[figure], undecided_because=why,
                 interval={f"{name}_slope": r["slope_interval"] for name, r in readings.items()},
                 interval_covers={f"{name}_slope": r["interval_covers"] for name, r in readings.items()})


def judge_window(ctx, table: pd.DataFrame, data: list[str]) -> list[ClaimResult]:
    """CL1-CL3 from the softmax rows of the sweep's table."""
    soft = table[table["model"] == "softmax"]
    on = {axis: soft[soft["axis"] == axis] for axis in ("L", "tau", "N")}
    fig = _figure(ctx, on)
    results = [
        _claim("CL1", _rule("L", "||Q||_2 (claimed: rises) and of the window r_1/2 (claimed: falls)"),
               {"Q_norm": direction(on["L"], "Q_norm", UP), "window": direction(on["L"], "window", DOWN)}, fig),
        _claim("CL2", _rule("tau", "the window r_1/2 (claimed: rises)"),
               {"window": direction(on["tau"], "window", UP)}, fig),
        _claim("CL3", _rule("N", "the window r_1/2 (claimed: falls)"),
               {"window": direction(on["N"], "window", DOWN)}, fig),
    ]
    results[1].statistic["Q_norm"] = direction(on["tau"], "Q_norm", DOWN)  # reported, not judged
    results[1].notes = ("Under f = L g (every class here) Adam's trajectory depends on (L, tau) only through tau / L "
                        "(the loss only scales by L^2), so the tau axis reads the L axis's settings in reverse: CL2 "
                        "is not evidence independent of CL1.")
    for r, axis in zip(results, ("L", "tau", "N"), strict=True):
        r.runs, r.data = runs_read(on[axis]), list(data)
    return results


def _figure(ctx, on: dict[str, pd.DataFrame]) -> str:
    fig, axes = plots.figure(3, 1)
    for ax, (axis, frame) in zip(axes[0], on.items(), strict=True):
        values = sorted(frame["value"].unique())
        for quantity, marker, label in (("Q_norm", "o", "||Q||_2"), ("window", "s", "window r_1/2")):
            med = frame.groupby("value")[quantity].median()
            ax.loglog(med.index, med.to_numpy(), marker + "-", label=label)
            ax.loglog(frame["value"], frame[quantity], marker, alpha=0.25, ms=3, color=ax.lines[-1].get_color())
        ax.set(xlabel=AXIS_LABEL[axis], title=f"along {axis}")
        plain_log_ticks(ax, values)
        ax.legend(fontsize=7)
    return plots.save(fig, ctx.out, "collins_window")
