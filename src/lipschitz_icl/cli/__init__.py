"""The command line: ``lipschitz-icl COMMAND``. The only module that parses argv or prints tables."""

from __future__ import annotations

import torch
import typer

from .. import __version__
from ..errors import UserInputError
from ..threads import thread_setting
from .analyze import analyze_command
from .bench import bench_command
from .common import OneLineUsageErrors, err, esc, widen_when_piped
from .diff import diff_command
from .evaluate import evaluate_command
from .report import report_command
from .reproduce import reproduce_command
from .run import run_command
from .sweep import sweep_app
from .theory import theory_command

app = typer.Typer(
    name="lipschitz-icl",
    help="In-context learning of nonlinear L-Lipschitz regression with one-layer softmax attention.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=OneLineUsageErrors,
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


def _summary(command) -> str:
    """The first sentence of a command's docstring on one line, for the command list of --help (rich
    keeps a docstring's own line breaks, which broke that list mid-sentence)."""
    first = " ".join((command.__doc__ or "").strip().split("\n\n")[0].split())
    return first.split(". ")[0].rstrip(".") + "."


for _name, _command in (("run", run_command), ("theory", theory_command), ("analyze", analyze_command),
                        ("diff", diff_command), ("reproduce", reproduce_command), ("report", report_command),
                        ("evaluate", evaluate_command), ("bench", bench_command)):
    app.command(_name, short_help=_summary(_command))(_command)
app.add_typer(sweep_app, name="sweep")


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
