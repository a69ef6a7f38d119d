"""Shared CLI pieces: consoles, one-line errors, overrides, progress bars, signal handling."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from ..errors import UserInputError

out = Console()  # tables and results
err = Console(stderr=True)  # progress and messages


def fail(message: str, code: int = 2) -> None:
    """Print one line naming what is wrong and exit (2: bad input, 1: runtime failure)."""
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def split_config_and_overrides(config: str | None, overrides: list[str] | None) -> tuple[str | None, list[str]]:
    """``run key=value`` (no config file) is allowed: a first argument with '=' that is not a
    file is an override."""
    rest = list(overrides or [])
    if config is not None and "=" in config and not Path(config).exists():
        return None, [config, *rest]
    return config, rest


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM ends a run like Ctrl-C does (status ``interrupted``, metrics kept)."""

    def handler(signum, frame):  # noqa: ARG001
        raise KeyboardInterrupt

    try:
        old = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not in the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def progress_bar(transient: bool = True, eta: bool = False) -> Progress:
    """A progress bar on stderr (hidden when stderr is not a terminal); ``eta`` adds the time left."""
    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
    ]
    if eta:
        columns += [TextColumn("eta"), TimeRemainingColumn()]
    return Progress(
        *columns,
        console=err,
        transient=transient,
        disable=not err.is_terminal and not _force_progress(),
    )


def _force_progress() -> bool:
    import os

    return os.environ.get("LIPSCHITZ_ICL_PROGRESS") == "1"


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn the toolkit's input errors into one line and exit code 2."""
    try:
        yield
    except UserInputError as e:
        fail(str(e), 2)


def is_stdout_tty() -> bool:
    return sys.stdout.isatty()
