"""(f) the whole-job wall time of ``lipschitz-icl reproduce all --quick``, once that command exists."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import Size, register


def reproduce_available() -> bool:
    from ..cli import app

    names = {c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands}
    return "reproduce" in names or any(g.name == "reproduce" for g in app.registered_groups)


@register("reproduce", "(f) wall time of `reproduce all --quick`", order=6)
def reproduce(size: Size) -> dict:
    if not reproduce_available():
        return {"rows": [{"command": "reproduce all --quick", "wall s": "not available"}], "targets": [],
                "notes": ["the reproduce command does not exist in this build"]}
    if size.quick:
        return {"rows": [{"command": "reproduce all --quick", "wall s": "skipped (run bench without --quick)"}],
                "targets": [], "notes": ["too long for the 2-minute quick bench"]}
    src = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "lipschitz_icl", "reproduce", "all", "--quick"], cwd=tmp,
                              env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
    return {"rows": [{"command": "reproduce all --quick", "wall s": wall, "exit code": proc.returncode}],
            "targets": [], "notes": []}
