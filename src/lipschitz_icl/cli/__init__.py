"""The command line: ``lipschitz-icl COMMAND``. The only module that parses argv or prints tables."""

from __future__ import annotations

import typer

from .run import run_command
from .sweep import sweep_app

app = typer.Typer(
    name="lipschitz-icl",
    help="In-context learning of nonlinear L-Lipschitz regression with one-layer softmax attention.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """In-context learning of nonlinear L-Lipschitz regression with one-layer softmax attention.

    Start with `lipschitz-icl run configs/quickstart.yaml`; every command has --help.
    """


app.command("run")(run_command)
app.add_typer(sweep_app, name="sweep")


def main() -> None:
    app()
