"""Shared by the config fuzzers: run ``lipschitz-icl run`` on a malformed config and check the refusal."""

from __future__ import annotations

import contextlib
import re
import tempfile
from collections import Counter
from pathlib import Path
from unittest import mock

import yaml
from hypothesis import HealthCheck, settings
from typer.testing import CliRunner

from lipschitz_icl.cli import app

runner = CliRunner()
FUZZED: Counter[str] = Counter()  # examples run, per strategy (checked by the last test)
FUZZ = settings(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def fuzz(n: int) -> settings:
    return settings(FUZZ, max_examples=n)


class ConfigAccepted(Exception):
    """Raised when a malformed config gets as far as creating its run directory."""


def _tripwire(*args, **kwargs):
    raise ConfigAccepted(f"config accepted: prepare_run_dir{args}")


# something a message must say about what is allowed or why the input is refused
ALLOWED_HINT = re.compile(
    r"allowed|should|must|expected|at most|at least|need|no such|not |unknown|malformed|too |refused|larger|"
    r"coincide|match|sum|number|mapping|UTF-8|nested|holds|choose", re.I)


def refuse(files: dict[str, bytes], args: list[str], expect: list[str], strategy: str) -> str:
    """Run ``lipschitz-icl run *args`` in a fresh folder holding ``files``; check the refusal."""
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        for name, data in files.items():
            Path(name).parent.mkdir(parents=True, exist_ok=True)
            Path(name).write_bytes(data)
        before = sorted(str(p) for p in Path(".").rglob("*"))
        with mock.patch("lipschitz_icl.api.prepare_run_dir", _tripwire):
            result = runner.invoke(app, ["run", *args])
        after = sorted(str(p) for p in Path(".").rglob("*"))
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    context = f"args={args!r} stderr={result.stderr!r} stdout={result.stdout[:300]!r} exc={result.exception!r}"
    assert result.exit_code == 2, context
    assert len(lines) == 1, context
    assert lines[0].startswith("error: "), context
    assert any(e in lines[0] for e in expect), f"expected one of {expect}: {context}"
    assert ALLOWED_HINT.search(lines[0]), context
    assert "Traceback" not in result.output, context
    assert after == before, f"files created: {set(after) - set(before)}"
    FUZZED[strategy] += 1
    return lines[0]


def dump(data) -> bytes:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode("utf-8")
