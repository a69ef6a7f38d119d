"""The command line: ``lipschitz-icl COMMAND``. The only module that parses argv or prints tables."""

from __future__ import annotations

import torch
import typer

from .. import __version__
from ..threads import configured_threads
from .analyze import analyze_command
from .bench import bench_command
from .common import OneLineUsageErrors, widen_when_piped
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


app.command("run")(run_command)
app.command("theory")(theory_command)
app.command("analyze")(analyze_command)
app.add_typer(sweep_app, name="sweep")
app.command("reproduce")(reproduce_command)
app.command("report")(report_command)
app.command("evaluate")(evaluate_command)
app.command("bench")(bench_command)


def main() -> None:
    # the thread policy (one torch thread unless LIPSCHITZ_ICL_THREADS says otherwise): threads.py
    torch.set_num_threads(configured_threads())
    app()
