"""Every notebook in notebooks/ (jupytext percent scripts) runs at its small size in a fresh Jupyter kernel
(nbclient + ipykernel), each cell without error; its figures display as PNGs and pass the layout checks of
the other figures (tests/figure_layout.py: no overlapping tick labels, no clipped title). The wall time of
each notebook is printed (``pytest -s``)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

jupytext = pytest.importorskip("jupytext")
nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
# notebook -> the least number of figures it shows
EXPECTED = {"tour.py": 4, "threshold.py": 3, "own_claim.py": 1}

LAYOUT_CHECK = f"""
import gc, json, sys, warnings
sys.path.insert(0, {str(ROOT / 'tests')!r})
from matplotlib.figure import Figure
from figure_layout import layout_problems
with warnings.catch_warnings():  # isinstance on every live object wakes torch's deprecated aliases
    warnings.simplefilter("ignore")
    figures = [f for f in gc.get_objects() if isinstance(f, Figure)]
print(json.dumps({{"figures": len(figures), "problems": [p for f in figures for p in layout_problems(f)]}}))
"""


def test_every_notebook_is_tested():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_runs_at_its_small_size(name, tmp_path, monkeypatch):
    monkeypatch.setenv("LIPSCHITZ_ICL_EXAMPLE_SIZE", "small")
    monkeypatch.setenv("LIPSCHITZ_ICL_NOTEBOOK_OUT", str(tmp_path))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    nb = jupytext.read(NOTEBOOKS / name)
    nb.cells.append(nbformat.v4.new_code_cell(LAYOUT_CHECK))
    start = time.perf_counter()
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    print(f"\n{name}: {time.perf_counter() - start:.1f} s at the small size")
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    pngs = sum("image/png" in o.get("data", {}) for o in outputs)
    assert pngs >= EXPECTED[name], f"{name}: {pngs} figures shown"
    bare = [o["data"]["text/plain"] for o in outputs if "<Figure size" in o.get("data", {}).get("text/plain", "")
            and "image/png" not in o["data"]]
    assert not bare, f"{name}: figures shown as text: {bare}"
    printed = [o["text"] for o in nb.cells[-1].outputs if o.get("name") == "stdout"]
    report = json.loads(printed[-1])
    assert report["figures"] >= EXPECTED[name] and report["problems"] == [], report
