"""Start-up: `lipschitz-icl --help` lists every command without importing any command's module (papers, scipy,
matplotlib, pandas), and a command's own module is imported when it runs. Speed targets live in `bench` (k)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import lipschitz_icl as li
from lipschitz_icl.bench.registry import Size
from lipschitz_icl.bench.sections.startup import startup
from lipschitz_icl.cli import COMMANDS

QUICK = Path(__file__).resolve().parents[1] / "configs" / "quickstart.yaml"
HEAVY = ("matplotlib", "scipy", "pandas", "lipschitz_icl.papers", "lipschitz_icl.reproduce", "dask")
CHILD = """
import json, sys
sys.argv = ["lipschitz-icl", *json.loads(sys.argv[1])]
from lipschitz_icl.cli import main
try:
    main()
except SystemExit:
    pass
sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)))
"""


def _modules_after(args: list[str]) -> tuple[str, set[str]]:
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(args)], capture_output=True, text=True,
                          timeout=300, check=True)
    return proc.stdout, set(json.loads(proc.stderr.rsplit("MODULES ", 1)[1]))


def test_help_lists_every_command_without_importing_any():
    out, modules = _modules_after(["--help"])
    assert all(name in out for name in COMMANDS)
    assert "Train the one-layer softmax-attention model once" in out  # a summary read from run's source
    loaded = sorted(m for m in modules if m.startswith(HEAVY) or m.startswith("lipschitz_icl.cli."))
    assert loaded == ["lipschitz_icl.cli.common"], loaded


def test_a_command_imports_its_own_module_when_it_runs():
    out, modules = _modules_after(["theory", "--help"])
    assert "lipschitz_icl.cli.theory" in modules and "lipschitz_icl.cli.reproduce" not in modules
    assert "Usage: lipschitz-icl theory" in out


def test_training_and_writing_a_run_imports_no_pandas(tmp_path):
    """``run`` trains, records and writes (metrics.parquet with its values' digest) without pandas, whose import
    is a sixth of a short run's CPU (``arrow_np``); reading the run back makes its DataFrame."""
    for args in (["configs/quickstart.yaml", "train.steps=30"],
                 ["features.kind=sphere", "task.kind=relu_net", "engine.kind=sampled", "engine.batch=16",
                  "train.optimizer=adam", "train.steps=5", "train.log_every=2", "eval.functions=8"]):
        out = tmp_path / str(len(args))
        _, modules = _modules_after(["run", *args, "--out", str(out)])
        assert "lipschitz_icl.api" in modules and "pandas" not in modules, args
        assert li.load_run(out).metrics["step"].dtype == "int64"


def test_the_startup_section_measures_its_three_targets():
    res = startup(Size("tiny"))
    cpu = {row["command"]: row["median CPU s"] for row in res["rows"]}
    assert set(cpu) == {"import torch", "--help", "run quickstart", "run collins", "collins hand loop"}
    assert all(v > 0 for v in cpu.values())
    ratio, extra, collins = res["targets"]
    assert ratio["measured"] == cpu["--help"] / cpu["import torch"]
    assert extra["measured"] == cpu["run quickstart"] - cpu["--help"]
    assert collins["measured"] == cpu["run collins"] / cpu["collins hand loop"]


def test_the_heap_is_frozen_once_a_command_has_ended():
    """``__main__.entry`` freezes the garbage collector's heap when the command has ended, so that the
    interpreter's teardown does not traverse it (torch's: ~0.3 CPU-s of every command); the command ran first."""
    code = ("import gc, sys\nfrom lipschitz_icl.__main__ import entry\nsys.argv = ['lipschitz-icl', '--version']\n"
            "try:\n    entry()\nexcept SystemExit:\n    pass\nprint(gc.get_freeze_count())\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert proc.stdout.startswith("lipschitz-icl ") and int(proc.stdout.split()[-1]) > 10_000, proc.stdout


SPIED = """
import importlib.abc, json, os, sys
ATTEMPTS = sys.argv[2]
class Spy(importlib.abc.MetaPathFinder):  # any process, the forked lanes too: each attempt appended to a file
    def find_spec(self, name, path, target=None):
        if name == "pandas":
            with open(ATTEMPTS, "a") as fh:
                fh.write(f"{os.getpid()}\\n")
sys.meta_path.insert(0, Spy())
sys.argv = ["lipschitz-icl", *json.loads(sys.argv[1])]
from lipschitz_icl.__main__ import entry
entry()
"""


def test_a_sweep_runs_and_reports_without_pandas_in_any_process(tmp_path):
    """``sweep run`` expands, trains (in forked lanes), stores and counts its runs without importing pandas, in the
    driver or a lane (pyarrow's ``pa.array`` imports it: ``arrow_np``); reading the sweep back makes DataFrames."""
    spec = tmp_path / "s.yaml"
    spec.write_text(f"base: {QUICK}\noverrides: [train.steps=20]\ngrid:\n  task.L: [0.5, 1]\nseeds: 3\n")
    attempts = tmp_path / "pandas.txt"
    args = ["sweep", "run", str(spec), "--out", str(tmp_path / "sw"), "--workers", "2", "--batch", "2"]
    proc = subprocess.run([sys.executable, "-c", SPIED, json.dumps(args), str(attempts)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0 and "6 runs" in proc.stdout, proc.stdout + proc.stderr[-2000:]
    assert not attempts.exists(), attempts.read_text()
    from lipschitz_icl.sweep import load_index

    assert len(load_index(tmp_path / "sw")) == 6
