"""The evaluation figure: error against the number of context examples, one panel per class."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from ..evaluate import MODEL
from .files import save_png
from .style import colors, new_figure

ORACLE = "Bayes (Sigma)"  # knows the class's kernel and the feature ids: drawn dashed, as a reference
FLOOR = 1e-6  # relative to the largest error of a panel


def evaluation_figure(table: pd.DataFrame, path: str | Path, title: str = "") -> Path:
    """The figure of ``draw_evaluation`` written as one PNG at ``path``."""
    return save_png(draw_evaluation(table, title), path)


def draw_evaluation(table: pd.DataFrame, title: str = "") -> Figure:
    """Log-log error (with +-1 se bars) against n_context, one line per method and one panel per class;
    the model in black, the Bayes predictor dashed, contexts beyond the training N shaded."""
    classes = list(dict.fromkeys(table["class"]))
    fig, axes = new_figure(len(classes), 1, width=4.2 + 2.4 / len(classes), height=3.2, layout=None)
    methods = [m for m in dict.fromkeys(table["method"]) if m != MODEL]
    cols = dict(zip(methods, colors(len(methods)), strict=True))
    for ax, cls in zip(axes[0], classes, strict=True):
        sub = table[table["class"] == cls]
        floor = FLOOR * float(sub.error.max()) if len(sub) else FLOOR  # exact fits (error ~ 0) drawn here
        for method in [MODEL, *methods]:
            rows = sub[sub.method == method].sort_values("n_context")
            style = {"color": "black", "lw": 2.2, "zorder": 5} if method == MODEL else {"color": cols[method], "lw": 1}
            if method == ORACLE:
                style["ls"] = "--"
            err = rows.error.clip(lower=floor)
            upper = rows.se.where(rows.error > floor, 0.0)
            lower = upper.clip(upper=err - floor)  # a bar below the floor would stretch the log axis to ~0
            ax.errorbar(rows.n_context, err, yerr=[lower.to_numpy(), upper.to_numpy()], marker="o", ms=3,
                        capsize=2, label=method, **style)
        beyond = sub[sub["beyond_N"]] if "beyond_N" in sub else sub.iloc[:0]
        if len(beyond):  # length generalisation: n past the training N, shaded
            ax.axvspan(float(beyond.n_context.min()), float(beyond.n_context.max()), color="grey", alpha=0.12,
                       label="n > training N")
        ax.axhline(floor, color="grey", lw=0.6, ls=":", label="floor: smaller errors drawn on it")
        ax.set(xscale="log", yscale="log", xlabel="context examples n", ylabel="error 1/2 E[(y_hat - f(x_q))^2]",
               title=f"{title} {cls}".strip())
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))  # beside the panels, off the curves
    return fig
