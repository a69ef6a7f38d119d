"""The command line: ``lipschitz-icl COMMAND``. The only module that parses argv or prints tables."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import click
import torch
import typer

from .. import __version__
from ..errors import UserInputError
from ..threads import thread_setting
from .common import OneLineUsageErrors, err, esc, widen_when_piped

# command -> (module of this package, the function or typer app it holds). A command's module (and what it
# imports: the papers, scipy, matplotlib, pandas) is imported only when that command runs or shows its own
# --help, so `lipschitz-icl --help` and a plain `run` do not pay for the others' imports.
COMMANDS = {"run": ("run", "run_command"), "theory": ("theory", "theory_command"),
            "analyze": ("analyze", "analyze_command"), "diff": ("diff", "diff_command"),
            "reproduce": ("reproduce", "reproduce_command"), "report": ("report", "report_command"),
            "evaluate": ("evaluate", "evaluate_command"), "bench": ("bench", "bench_command"),
            "export": ("export", "export_command"), "sweep": ("sweep", "sweep_app")}


def _first_sentence(text: str) -> str:
    """The first sentence of a docstring or help text on one line, for the command list of --help (rich keeps
    a docstring's own line breaks, which broke that list mid-sentence)."""
    first = " ".join((text or "").strip().split("\n\n")[0].split())
    return first.split(". ")[0].rstrip(".") + "."


def _summary(name: str) -> str:
    """A command's one-line help, read from its module's source without importing it: the docstring of its
    function, or the ``help=`` of its typer app."""
    module, attr = COMMANDS[name]
    tree = ast.parse((Path(__file__).parent / f"{module}.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == attr:
            return _first_sentence(ast.get_docstring(node) or "")
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == attr for t in node.targets):
            helps = [k.value for k in getattr(node.value, "keywords", []) if k.arg == "help"]
            return _first_sentence(helps[0].value if helps and isinstance(helps[0], ast.Constant) else "")
    return ""


def _load(name: str) -> click.Command:
    """The click command of ``name``, built from its module (imported now)."""
    module, attr = COMMANDS[name]
    obj = getattr(importlib.import_module(f".{module}", __package__), attr)
    if isinstance(obj, typer.Typer):
        command = typer.main.get_group(obj)
    else:
        single = typer.Typer(add_completion=False)
        single.command(name)(obj)  # its one-line summary is for the root's list only (LazyCommands.get_command)
        command = typer.main.get_command(single)
    command.name = name
    return command


class LazyCommands(OneLineUsageErrors):
    """The root group: the command list of --help from each command's source, a command loaded when used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        """A stand-in with the command's one-line help, for the command list (``resolve_command`` runs the real
        one)."""
        return click.Command(name, short_help=_summary(name), help=_summary(name)) if name in COMMANDS else None

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None,
                                                                             list[str]]:
        name = click.utils.make_str(args[0])
        if name in COMMANDS:
            try:
                command = _load(name)  # the command's imports (seconds): still starting
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM (a KeyboardInterrupt from here on): one line, not typer's
                err.print("[bold red]error:[/] interrupted while starting", highlight=False)  # silent exit 130
                raise SystemExit(130) from None
            return name, command, args[1:]
        return super().resolve_command(ctx, args)


app = typer.Typer(
    name="lipschitz-icl",
    help="In-context learning of nonlinear L-Lipschitz regression with one-layer softmax attention.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=LazyCommands,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"lipschitz-icl {__version__} (torch {torch.__version__})")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the package and torch versions."
    ),
) -> None:
    """In-context learning of nonlinear L-Lipschitz regression with one-layer softmax attention.

    Start with `lipschitz-icl run configs/quickstart.yaml`; every command has --help.
    """
    widen_when_piped()




def main() -> None:
    # the thread policy (one torch thread unless LIPSCHITZ_ICL_THREADS says otherwise): threads.py
    try:
        threads, warning = thread_setting()
    except UserInputError as e:  # outside the app: one line and exit 2 here
        err.print(f"[bold red]error:[/] {esc(str(e))}", highlight=False, soft_wrap=True)
        raise SystemExit(2) from None
    if warning is not None:
        err.print(f"[yellow]warning:[/] {esc(warning)}", highlight=False, soft_wrap=True)
    torch.set_num_threads(threads)
    app()
