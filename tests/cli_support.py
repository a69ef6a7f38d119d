"""Shared by the CLI tests: invoke the command line in-process and check a refusal."""

from __future__ import annotations

from typer.testing import CliRunner

from lipschitz_icl.cli import app

runner = CliRunner()


def refused(args: list[str]) -> str:
    """Run the CLI; it must exit 2 with one line on stderr and no traceback. Returns the line."""
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]
