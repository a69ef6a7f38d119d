"""The command line: ``lipschitz-icl COMMAND``. The only module that parses argv or prints tables."""

from __future__ import annotations

import typer

from .bench import bench_command
from .run import run_command

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
app.command("bench")(bench_command)


def main() -> None:
    app()
