"""(k) start-up: the CPU seconds of `lipschitz-icl --help` and of a quickstart `run`, each against `import torch`, and
of a 400-step Collins-config `run` against the same run written by hand (``benchmarks/collins_hand_loop.py``, in a
source checkout), fresh processes interleaved so that a loaded machine slows them all alike."""

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
COLLINS_OVER_HAND = 1.0  # the 400-step Collins-config `run` no more CPU than the hand-written loop
HAND_LOOP = REPO_ROOT / "benchmarks" / "collins_hand_loop.py"
COLLINS_RUN = ["features.kind=sphere", "features.d=3", "prompt.N=32", "task.kind=relu_net", "model.kind=reduced",
               "engine.kind=sampled", "engine.batch=512", "train.optimizer=adam", "train.steps=400",
               "train.log_every=40", "eval.functions=2048"]  # the hand loop's run (its docstring)


def child_cpu_s(args: list[str]) -> float:
    """User + system CPU seconds of one child process (``python`` with ``args``), read from RUSAGE_CHILDREN."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, *args], capture_output=True, env=child_env(), check=True, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _commands(out: Path) -> dict[str, list[str]]:
    quickstart = REPO_ROOT / "configs" / "quickstart.yaml"
    run_args = [str(quickstart)] if quickstart.exists() else []  # the defaults are the quickstart's setting
    commands = {"import torch": ["-c", "import torch"], "--help": ["-m", "lipschitz_icl", "--help"],
                "run quickstart": ["-m", "lipschitz_icl", "run", *run_args, "--out", str(out / "run"), "--force"]}
    if HAND_LOOP.is_file():  # a source checkout: the Collins run against its hand-written loop
        commands["run collins"] = ["-m", "lipschitz_icl", "run", *COLLINS_RUN, "--out", str(out / "c"), "--force"]
        commands["collins hand loop"] = [str(HAND_LOOP)]
    return commands


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
    targets = [Target("(k) `--help` CPU / `import torch` CPU", help_ratio, "<=", HELP_OVER_TORCH, "x").as_dict(),
               Target("(k) quickstart `run` CPU - `--help` CPU", run_extra, "<=", RUN_EXTRA_CPU_S, " s").as_dict()]
    notes = [f"medians of {repeats} fresh processes each, interleaved; CPU = user + system of the child"]
    if "run collins" in median:
        targets.append(Target("(k) 400-step Collins `run` CPU / hand-written loop CPU",
                              median["run collins"] / median["collins hand loop"], "<=", COLLINS_OVER_HAND,
                              "x").as_dict())
    else:
        notes.append(f"no {HAND_LOOP.relative_to(REPO_ROOT)} here (an installed package): the Collins run not timed")
    return {"rows": rows, "targets": targets, "notes": notes}
