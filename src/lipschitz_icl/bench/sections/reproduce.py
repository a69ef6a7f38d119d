"""(f) the whole-job wall time of ``lipschitz-icl reproduce all --quick``, per experiment and in all: the
experiments that test the claims an earlier build had, against that build's own experiments timed in the same run
(like for like: the same claims, each build's ``wall_s`` per experiment from its claims.json), and the whole
command against QUICK_TARGET_S.

From a git checkout that holds the baseline commit, the section exports it (``git archive``) and
times its ``reproduce all --quick`` right after this build's; elsewhere (an installed package, a
shallow clone) it falls back to the whole-command figure recorded then, and says so.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from ...reproduce import available_suites
from ..common import REPO_ROOT, child_env
from ..registry import Size, Target, register

# The commit the performance issue was filed on, and its `reproduce all --quick` as recorded then on
# the 2-core development machine (71-80 s in three runs; the best), used only when it cannot be timed.
BASELINE_COMMIT = "4030d5d"
BASELINE_WALL_S = 71.8
# the claims that build had (its claims.json); an experiment testing none of them landed since
BASELINE_CLAIMS = frozenset("P1 P2 P3 P4 P5 P6 P7 P8 H1 H2 B1 B2 B3 B4 B5 B6 B7 R1 R2 R3a R3b R3c R3d R6 R7 R8".split())
QUICK_TARGET_S = 180.0  # `reproduce all --quick`, every suite, on a 2-core machine (the performance issue's target)


def reproduce_available() -> bool:
    """Whether this build has suites for ``reproduce all`` to run (the experiments registry)."""
    return bool(available_suites())


@register("reproduce", "(f) wall time of `reproduce all --quick`", order=6)
def reproduce(size: Size) -> dict:
    return {**_reproduce(size), "device": "cpu"}  # the command's own configs say where its runs train


def _reproduce(size: Size) -> dict:
    if not reproduce_available():
        return {"rows": [{"command": "reproduce all --quick", "wall s": "not available"}], "targets": [],
                "notes": ["the reproduce command does not exist in this build"]}
    if size.tiny:
        return {"rows": [{"command": "reproduce all --quick", "wall s": "skipped at the tiny size"}],
                "targets": [], "notes": ["minutes long: run by bench --quick and bench"]}
    with tempfile.TemporaryDirectory(prefix="bench-reproduce-") as tmp:
        wall, returncode = time_reproduce(Path(tmp) / "now", child_env())
        per_experiment = experiment_times(Path(tmp) / "now" / "out" / "claims.json")
        baseline = baseline_source(Path(tmp) / "baseline")
        if baseline is None:
            return summarise(wall, returncode, per_experiment, BASELINE_WALL_S, timed=False)
        env = {**os.environ, "PYTHONPATH": str(baseline / "src")}
        baseline_wall, baseline_code = time_reproduce(Path(tmp) / "baseline-run", env)
        baseline_experiments = experiment_times(Path(tmp) / "baseline-run" / "out" / "claims.json")
    if baseline_code != 0 or not baseline_experiments:
        return summarise(wall, returncode, per_experiment, BASELINE_WALL_S, timed=False)
    same_then = sum(secs for secs, _ in baseline_experiments.values())
    return summarise(wall, returncode, per_experiment, baseline_wall, timed=True, same_then=same_then)


def time_reproduce(workdir: Path, env: dict[str, str]) -> tuple[float, int]:
    """Wall seconds and exit code of ``reproduce all --quick`` in a child Python (``env`` says which
    build it imports), writing into ``workdir/out``."""
    workdir.mkdir(parents=True)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "lipschitz_icl", "reproduce", "all", "--quick", "--out",
                           str(workdir / "out")], cwd=workdir, env=env, capture_output=True, text=True, check=False)
    return time.perf_counter() - t0, proc.returncode


def baseline_source(dest: Path) -> Path | None:
    """The baseline commit's files exported into ``dest``, or None outside a git checkout that holds it."""
    try:
        archive = subprocess.run(["git", "-C", str(REPO_ROOT), "archive", BASELINE_COMMIT, "src"],
                                 capture_output=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return dest if (dest / "src" / "lipschitz_icl").is_dir() else None


def experiment_times(claims_json: Path) -> dict[str, tuple[float, list[str]]]:
    """experiment -> (wall s, its claim ids), from a reproduce output's claims.json ({} if absent)."""
    try:
        claims = json.loads(claims_json.read_text(encoding="utf-8"))["claims"]
    except (OSError, ValueError, KeyError):
        return {}
    wall: dict[str, float] = {}
    ids: dict[str, list[str]] = defaultdict(list)
    for claim in claims:
        name = claim.get("experiment") or claim["id"]
        wall[name] = max(wall.get(name, 0.0), float(claim.get("wall_s") or 0.0))  # one figure per experiment
        ids[name].append(claim["id"])
    return {name: (wall[name], ids[name]) for name in sorted(wall, key=wall.get, reverse=True)}


def summarise(wall: float, returncode: int, per_experiment: dict[str, tuple[float, list[str]]],
              baseline_s: float, timed: bool, same_then: float | None = None) -> dict:
    """Rows per experiment and the two targets: the experiments of the baseline's claims now against the
    baseline's own (``same_then``: the sum of its experiments' wall time, timed in this run; None: its
    whole-command figure ``baseline_s``, recorded then), and the whole command against QUICK_TARGET_S."""
    rows = [{"experiment": name, "claims": " ".join(ids), "wall s": secs,
             "landed since the baseline": not BASELINE_CLAIMS.intersection(ids)}
            for name, (secs, ids) in per_experiment.items()]
    new_s = sum(r["wall s"] for r in rows if r["landed since the baseline"])
    same_now = sum(r["wall s"] for r in rows if not r["landed since the baseline"])
    landed = sum(1 for r in rows if r["landed since the baseline"] is True)
    rows.append({"experiment": "whole command", "claims": f"exit code {returncode}", "wall s": wall,
                 "landed since the baseline": ""})
    rows.append({"experiment": f"whole command at the baseline ({BASELINE_COMMIT})",
                 "claims": "timed in this run" if timed else "recorded on the development machine",
                 "wall s": baseline_s, "landed since the baseline": ""})
    then = same_then if same_then is not None else baseline_s
    what_then = "its experiments" if same_then is not None else "its whole command"
    why_same = (f"the experiments of the baseline's {len(BASELINE_CLAIMS)} claims take {same_now:.0f} s now against "
                f"{then:.0f} s for {what_then}; their budgets and caps were since set in rescaled time so that no "
                "verdict is censored")
    why_whole = (f"{new_s:.0f} s of the {wall:.0f} s go to the {landed} experiments that landed since the baseline, "
                 f"{same_now:.0f} s to those of its claims")
    source = "timed in this run" if timed else "the figure recorded then: this run has no git checkout to time it"
    same, whole = same_now / then, wall / QUICK_TARGET_S
    return {
        "rows": rows,
        "targets": [
            Target(f"(f) the baseline's claims' experiments now / at the baseline ({BASELINE_COMMIT})", same, "<=",
                   1.0, "x", why=why_same if same > 1 else "").as_dict(),
            Target(f"(f) `reproduce all --quick` wall time / {QUICK_TARGET_S:.0f} s", whole, "<=", 1.0, "x",
                   why=why_whole if whole > 1 else "").as_dict(),
        ],
        "notes": [f"baseline: commit {BASELINE_COMMIT}, {baseline_s:.1f} s for the whole command ({source})",
                  why_same, why_whole],
    }
