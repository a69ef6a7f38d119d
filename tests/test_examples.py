"""Every script in examples/ runs at its small size (LIPSCHITZ_ICL_EXAMPLE_SIZE=small) in a
temporary directory and produces what its docstring promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def run_example(name: str, cwd: Path) -> str:
    env = {**os.environ, "LIPSCHITZ_ICL_EXAMPLE_SIZE": "small", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(EXAMPLES / name)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_every_example_is_tested():
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(
        ["quickstart_plots.py", "l_sweep_fits.py", "custom_task_claim.py"])


def test_quickstart_plots(tmp_path):
    out = run_example("quickstart_plots.py", tmp_path)
    assert "status converged" in out and "T_1 = " in out
    for name in ("curves.png", "scores.png", "score_matrix.png"):
        assert (tmp_path / "example-out" / "quickstart" / name).stat().st_size > 1000
    assert (tmp_path / "example-out" / "quickstart" / "run" / "summary.json").is_file()


def test_l_sweep_fits(tmp_path):
    out = run_example("l_sweep_fits.py", tmp_path)
    assert "flat regime: T_eps ~ L^-2.0" in out and "theory -2: inside the interval" in out
    for name in ("T_vs_L.png", "phases.png", "T_vs_Tf.png"):
        assert (tmp_path / "example-out" / "l_sweep" / name).is_file()
    assert (tmp_path / "example-out" / "l_sweep" / "sweep" / "index.sqlite").is_file()


def test_custom_task_claim(tmp_path):
    out = run_example("custom_task_claim.py", tmp_path)
    assert "softsign: L* = " in out
    assert "claim P3 on softsign: supported (2/2 runs pass)" in out


def test_examples_refuse_an_unknown_size_from_the_environment(tmp_path):
    """argparse checks --size against its choices but not a default read from the environment."""
    env = {**os.environ, "LIPSCHITZ_ICL_EXAMPLE_SIZE": "huge", "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, str(EXAMPLES / "custom_task_claim.py")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2, proc.stderr
    assert "LIPSCHITZ_ICL_EXAMPLE_SIZE must be one of full, small (got 'huge')" in proc.stderr
    assert "Traceback" not in proc.stderr
