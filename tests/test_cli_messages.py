"""CLI messages: user text with rich markup is printed as written, and every error is one line."""

from __future__ import annotations

import os

import pytest
from rich.console import Console
from typer.testing import CliRunner

from lipschitz_icl.cli import app
from lipschitz_icl.cli.common import esc

runner = CliRunner()
SMALL = ["train.steps=5", "engine.draws=8", "eval.functions=8"]
MARKUP = ["[/x]", "[Errno 28]", "[bold]b[/bold]", "[red]", "a[/]b", "[link]", "\\[/q]", "ü[/ñ]"]


def one_error_line(result, code: int = 2) -> str:
    assert result.exit_code == code, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


@pytest.mark.parametrize("text", MARKUP)
def test_esc_prints_markup_as_written(text):
    console = Console(width=200, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(f"[bold]x:[/] {esc(text)}")
    assert console.export_text().strip() == f"x: {text}"


def test_out_with_markup_prints_the_path(tmp_path):
    out = tmp_path / "res[" / "x]"
    result = runner.invoke(app, ["run", *SMALL, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "res[/x]" in result.stdout.replace("\n", "")


def test_theory_of_a_file_with_markup_in_its_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c[").mkdir()
    (tmp_path / "c[" / "q].yaml").write_text("train: {steps: 5}\n")
    result = runner.invoke(app, ["theory", "c[/q].yaml"])
    assert result.exit_code == 0, result.output
    assert "c[/q].yaml" in result.stdout


@pytest.mark.parametrize("text", MARKUP)
def test_error_text_with_markup_is_kept(text, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = one_error_line(runner.invoke(app, ["run", f"{text}.yaml"]))
    assert f"{text}.yaml: no such file" in line
    line = one_error_line(runner.invoke(app, ["run", f"task.kind={text!r}"]))
    assert "task.kind" in line and text.replace("\\", "\\\\") in line


@pytest.mark.parametrize("args", [
    ["run", "--bogus"], ["evaluate"], ["evaluate", "x", "--prompts", "abc"], ["theory", "--iters", "0"],
    ["analyze"], ["sweep", "run"], ["run", "--out"],
])
def test_usage_errors_are_one_line(args):
    line = one_error_line(runner.invoke(app, args))
    assert line.startswith("error: ") and "--help" in line


def test_usage_error_with_markup_is_one_line():
    line = one_error_line(runner.invoke(app, ["run", "--[/x]"]))
    assert "--[/x]" in line
