"""CLI messages: user text with rich markup is printed as written, and every error is one line."""

from __future__ import annotations

import os

import pytest
from rich.console import Console
from rich.table import Table
from typer.testing import CliRunner

from lipschitz_icl.cli import app, common
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


# --------------------------------------------------------------------------- bad input exits 2, not 1


LONG = "a" * 300
DEEP = "/".join(["a"] * 2000)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "r"
    result = runner.invoke(app, ["run", *SMALL, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.parametrize("bad", [LONG, f"x/{LONG}/y", DEEP, "é" * 200])
def test_out_paths_the_file_system_cannot_take_exit_2(bad, run_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for args, option in ((["run", *SMALL, "--out", bad], "--out"), (["theory", "--json", f"{bad}/t.json"], "--json"),
                         (["evaluate", str(run_dir), "--prompts", "4", "--out", bad], "--out"),
                         (["reproduce", "paper", "--quick", "--out", bad], "--out")):
        line = one_error_line(runner.invoke(app, args))
        assert line.startswith(f"error: {option} ") and "allowed" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("name", "content", "expect"), [
    ("metrics.parquet", b"not parquet", "not a Parquet file"),
    ("metrics.parquet", b"", "not a Parquet file"),
    ("summary.json", b'{"status":', "not JSON"),
    ("summary.json", b"[1, 2]", "not a JSON object"),
    ("summary.json", b"\xff\xfe", "not JSON"),
])
def test_corrupt_run_files_are_named(name, content, expect, run_dir, tmp_path):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(run_dir, bad)
    (bad / name).write_bytes(content)
    for args in (["analyze", str(bad)], ["evaluate", str(bad), "--prompts", "4"]):
        line = one_error_line(runner.invoke(app, args))
        assert f"{bad / name}: corrupt" in line and expect in line


def test_plain_pickle_params_is_one_line(run_dir, tmp_path):
    import pickle
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(run_dir, bad)
    (bad / "params.pt").write_bytes(pickle.dumps({"Q": [1.0, 2.0]}, protocol=4))
    line = one_error_line(runner.invoke(app, ["evaluate", str(bad), "--prompts", "4"]))
    assert "params.pt" in line


def test_warnings_are_shown_after_success_and_dropped_on_error():
    import warnings

    import typer

    from lipschitz_icl.cli.common import user_errors
    from lipschitz_icl.errors import UserInputError

    with pytest.warns(UserWarning, match="kept for a command that succeeds"), user_errors():
        warnings.warn("kept for a command that succeeds", UserWarning, stacklevel=1)
    with warnings.catch_warnings(record=True) as seen, pytest.raises(typer.Exit), user_errors():
        warnings.simplefilter("always")
        warnings.warn("dropped", UserWarning, stacklevel=1)
        raise UserInputError("bad")
    assert [str(w.message) for w in seen] == []


@pytest.mark.parametrize("command", ["analyze", "evaluate"])
def test_run_dir_names_too_long_to_exist_exit_2(command):
    line = one_error_line(runner.invoke(app, [command, LONG]))
    assert "no such run directory" in line


def test_a_table_written_to_a_pipe_keeps_every_digit(monkeypatch, tmp_path):
    """Not a terminal: tables are as wide as they need (up to PIPED_WIDTH), never cut to '0.00…'."""
    monkeypatch.delenv("COLUMNS", raising=False)
    result = runner.invoke(app, ["theory", "configs/quickstart.yaml"])
    assert result.exit_code == 0, result.output
    table = Table(*[f"column {i}" for i in range(10)])
    table.add_row(*[f"{1.2345678e-33 * (i + 1):.6g}" for i in range(10)])
    with common.out.capture() as captured:
        common.out.print(table)
    assert common.out.width == common.PIPED_WIDTH
    assert "…" not in captured.get() and "1.23457e-33" in captured.get()
