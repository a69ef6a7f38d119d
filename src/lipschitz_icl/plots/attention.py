"""One prompt's attention: the query's weight on each context token, coloured by the token's feature."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .. import attention as attention_data
from ..api import Run
from .style import as_runs, new_figure, run_label

FEATURE_COLORS = "tab10"


def attention_map(run: Run | str | Path, prompt: int | Mapping[str, Any] = 0) -> Figure:
    """The query's attention over the N context tokens of one prompt (``li.attention_map``), one panel per
    layer and head (a single panel for the one-layer models), a bar per token in context order, coloured
    by the token's feature; the query's own feature is named in the title and its tokens' bars are edged
    in black; the dotted line is uniform attention 1/N.

    What to look at: a trained model in the paper's regime puts nearly all its weight on the tokens of
    the query's own feature (edged bars), spread evenly among them; a head that attends elsewhere does
    not implement the paper's mechanism. For ``linear_attention`` the weights are not a softmax (they may
    be negative and need not sum to 1)."""
    (item,) = as_runs(run)
    table = attention_data.attention_map(item, prompt)
    heads = table[["layer", "head"]].drop_duplicates().to_numpy()
    n_layers, n_heads = int(heads[:, 0].max()) + 1, int(heads[:, 1].max()) + 1
    width = 6.4 if n_heads == 1 else 3.4
    fig, axes = new_figure(n_heads, n_layers, width=width, height=2.6 if n_layers > 1 else 3.4)
    cmap = colormaps[FEATURE_COLORS]
    K = item.config.features.K
    q = int(table["query_feature"].iloc[0])
    for (layer, head), rows in table.groupby(["layer", "head"]):
        ax = axes[layer, head]
        colours = [cmap(int(f) % cmap.N) for f in rows["feature"]]
        edges = ["black" if int(f) == q else "none" for f in rows["feature"]]
        ax.bar(rows["token"], rows["attention"], color=colours, edgecolor=edges, linewidth=0.8, width=0.9)
        ax.axhline(1.0 / len(rows), color="gray", ls=":", lw=1)
        mass = rows.loc[rows["feature"] == q, "attention"].sum()
        where = f"L{layer}H{head}: " if len(heads) > 1 else ""  # as in the metric names, attn_self@L0H1
        ax.set(title=f"{where}{mass:.2f} on feature {q}", xlabel="context token i", ylabel="attention")
        ax.grid(False, axis="x")
    shown = sorted(set(np.unique(table["feature"])) | {q})
    handles = [Patch(color=cmap(f % cmap.N), label=f"feature {f}" + (" (query's)" if f == q else ""))
               for f in shown if f < K]
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 5), fontsize=8)
    y_hat, target = table.attrs.get("y_hat"), table.attrs.get("target")
    said = f"y_hat = {y_hat:.3g}" + (f", f(x_q) = {target:.3g}" if target is not None else "")
    fig.suptitle(f"{run_label(item)}: prompt {prompt if not isinstance(prompt, Mapping) else '(given)'}, "
                 f"query of feature {q}; {said}", fontsize=10)
    return fig
