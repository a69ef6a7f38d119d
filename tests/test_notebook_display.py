"""Jupyter is friendly ground: in a fresh kernel (nbclient + ipykernel, the inline backend Jupyter
starts with), importing ``lipschitz_icl.plots`` changes neither the backend nor any rcParam nor
imports pyplot; the user's own pyplot figures still display inline (an image/png output) after it;
a toolkit figure that is a cell's value displays as a PNG, not as ``<Figure size ...>``; and no
toolkit figure is left in pyplot's figure manager."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "configs" / "quickstart.yaml"
TINY = ["train.eps=2e-2", "engine.draws=32", "eval.functions=32", "train.log_every=5"]

SNAPSHOT = ("import sys, matplotlib\n"
            f"sys.path.insert(0, {str(ROOT / 'src')!r})\n"
            "def rc():  # dict.items: reading rcParams['backend'] through [] would resolve (and import) pyplot\n"
            "    return {k: repr(v) for k, v in dict.items(matplotlib.rcParams)}\n")
IMPORT = ("before, backend = rc(), matplotlib.get_backend()\n"
          "import lipschitz_icl as li\n"
          "from lipschitz_icl import plots\n"
          "changed = {k: (v, rc()[k]) for k, v in before.items() if rc()[k] != v}\n"
          "assert not changed, changed\n"
          "assert matplotlib.get_backend() == backend, matplotlib.get_backend()\n"
          "print(backend)")
RUN = f"run = li.run({str(QUICKSTART)!r}, {TINY!r}, write=False)"
USER_PLOT = "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()"
USER_FIGURE_NO_SHOW = "fig, ax = plt.subplots()\nax.plot([3, 1, 2]);"  # the inline backend shows it at cell end
TOOLKIT = "plots.training_curves(run)"
OPEN = "print(plt.get_fignums())"

ORDERS = {  # cells of each notebook, and the cells whose outputs must hold a PNG
    "plots imported before pyplot": [SNAPSHOT, IMPORT, RUN, TOOLKIT, USER_PLOT, "plots.score_heatmap(run)",
                                     USER_FIGURE_NO_SHOW, OPEN],
    "pyplot imported first": [SNAPSHOT, "import matplotlib.pyplot as plt\nplt.plot([0, 1]);", IMPORT, USER_PLOT,
                              RUN, TOOLKIT, USER_FIGURE_NO_SHOW, OPEN],
}
PNG_CELLS = {USER_PLOT, TOOLKIT, "plots.score_heatmap(run)", USER_FIGURE_NO_SHOW,
             "import matplotlib.pyplot as plt\nplt.plot([0, 1]);"}


def execute(cells: list[str]):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in cells]
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
                            ).execute()
    return nb


def outputs_of(cell) -> tuple[set[str], str]:
    """(the MIME types of its display and result outputs, its text/plain and stream text)."""
    kinds, text = set(), ""
    for o in cell.outputs:
        kinds |= set(o.get("data", {}))
        text += o.get("text", "") + o.get("data", {}).get("text/plain", "")
    return kinds, text


@pytest.mark.parametrize("order", list(ORDERS))
def test_plots_leave_the_session_alone_and_figures_show_inline(order):
    nb = execute(ORDERS[order])
    by_source = {c.source: outputs_of(c) for c in nb.cells}
    assert "inline" in by_source[IMPORT][1]  # the kernel's own backend, kept after the import
    for src in PNG_CELLS & set(ORDERS[order]):
        kinds, text = by_source[src]
        assert "image/png" in kinds, f"{order}: {src!r} showed no image ({kinds}, {text!r})"
    assert "<Figure size" not in by_source[TOOLKIT][1] or "image/png" in by_source[TOOLKIT][0]
    assert by_source[OPEN][1].strip() == "[]"  # the inline backend closed its figures; ours were never in it


def test_importing_plots_imports_no_pyplot():
    nb = execute([SNAPSHOT, "from lipschitz_icl import plots\nprint('matplotlib.pyplot' in sys.modules)"])
    assert outputs_of(nb.cells[1])[1].strip() == "False"
