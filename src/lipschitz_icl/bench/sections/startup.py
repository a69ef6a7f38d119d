"""(k) start-up: the CPU seconds of `lipschitz-icl --help` and of a quickstart `run`, each against `import torch`,
fresh processes interleaved so that a loaded machine slows all three alike."""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from ..common import REPO_ROOT, child_env
from ..registry import Size, Target, register

HELP_OVER_TORCH = 1.5  # `--help` at most 1.5x the CPU of importing torch
RUN_EXTRA_CPU_S = 2.0  # a quickstart `run` at most 2 CPU-s more than `--help`


def child_cpu_s(args: list[str]) -> float:
    """User + system CPU seconds of one child process (``python`` with ``args``), read from RUSAGE_CHILDREN."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, *args], capture_output=True, env=child_env(), check=True, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _commands(out: Path) -> dict[str, list[str]]:
    quickstart = REPO_ROOT / "configs" / "quickstart.yaml"
    run_args = [str(quickstart)] if quickstart.exists() else []  # the defaults are the quickstart's setting
    return {"import torch": ["-c", "import torch"], "--help": ["-m", "lipschitz_icl", "--help"],
            "run quickstart": ["-m", "lipschitz_icl", "run", *run_args, "--out", str(out / "run"), "--force"]}


@register("startup", "(k) start-up: `--help` and a quickstart `run` against `import torch` (CPU seconds)", order=7)
def startup(size: Size) -> dict:
    repeats = size.pick(5, 3, 1)
    with tempfile.TemporaryDirectory() as tmp:
        commands = _commands(Path(tmp))
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(repeats):  # interleaved: each round runs the three once
            for name, args in commands.items():
                cpu[name].append(child_cpu_s(args))
    median = {name: statistics.median(values) for name, values in cpu.items()}
    help_ratio = median["--help"] / median["import torch"]
    run_extra = median["run quickstart"] - median["--help"]
    rows = [{"command": name, "median CPU s": median[name], "runs": len(cpu[name])} for name in commands]
    return {
        "rows": rows,
        "targets": [
            Target("(k) `--help` CPU / `import torch` CPU", help_ratio, "<=", HELP_OVER_TORCH, "x").as_dict(),
            Target("(k) quickstart `run` CPU - `--help` CPU", run_extra, "<=", RUN_EXTRA_CPU_S, " s").as_dict(),
        ],
        "notes": [f"medians of {repeats} fresh processes each, interleaved; CPU = user + system of the child"],
    }
