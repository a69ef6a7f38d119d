"""(f) the whole-job wall time of ``lipschitz-icl reproduce all --quick``, once that command exists."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time

from ...reproduce import available_suites
from ..common import child_env
from ..registry import Size, register


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
    if size.quick:
        return {"rows": [{"command": "reproduce all --quick", "wall s": "skipped (run bench without --quick)"}],
                "targets": [], "notes": ["too long for the 2-minute quick bench"]}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "lipschitz_icl", "reproduce", "all", "--quick"], cwd=tmp,
                              env=child_env(), capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
    return {"rows": [{"command": "reproduce all --quick", "wall s": wall, "exit code": proc.returncode}],
            "targets": [], "notes": []}
