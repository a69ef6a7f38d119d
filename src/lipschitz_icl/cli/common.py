"""Shared CLI pieces: consoles, one-line errors, overrides, progress bars, signal handling."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
from collections.abc import Iterator
from typing import Any

import click
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from typer.core import TyperGroup

from ..config_io import path_kind
from ..errors import TaskEvaluationError, UserInputError

out = Console()  # tables and results
err = Console(stderr=True)  # progress and messages


# characters that would break the one-line message: controls, and what str.splitlines splits on
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(message: str) -> str:
    """``message`` as one printable line: control characters and undecodable bytes escaped."""
    text = message.encode("utf-8", "backslashreplace").decode("utf-8")
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def esc(value: object) -> str:
    """Any user text (a path, a name, a value, an error) made safe to print through rich: one line,
    markup such as ``[/x]`` or ``[Errno 28]`` shown as written. Use it on every piece of user text in
    a message, table title or cell."""
    return escape(one_line(str(value)))


def fail(message: str, code: int = 2) -> None:
    """Print one line naming what is wrong and exit (2: bad input, 1: runtime failure, 130: interrupted)."""
    err.print(f"[bold red]error:[/] {esc(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


# click's usage errors, from click itself and from the copy typer may vendor
_CLICK_ERRORS = tuple(
    {click.ClickException, *(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")}
)
_CLICK_ABORTS = tuple({click.exceptions.Abort, typer.Abort})


class OneLineUsageErrors(TyperGroup):
    """The root command's group: click's usage errors (an unknown option, a missing argument, a bad
    option value) print as one line, like every other error, instead of a usage box."""

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except _CLICK_ERRORS as e:
            if type(e).__name__ == "NoArgsIsHelpError":  # the help was printed already
                sys.exit(e.exit_code)
            ctx = getattr(e, "ctx", None)
            path = ctx.command_path if ctx is not None else self.name or "lipschitz-icl"
            hint = f" (see '{path} --help')"
            err.print(f"[bold red]error:[/] {esc(e.format_message())}{esc(hint)}", highlight=False, soft_wrap=True)
            sys.exit(e.exit_code)
        except _CLICK_ABORTS:
            err.print("[bold red]error:[/] aborted", highlight=False)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)  # a command's typer.Exit(code) comes back as code


def split_config_and_overrides(config: str | None, overrides: list[str] | None) -> tuple[str | None, list[str]]:
    """``run key=value`` (no config file) is allowed: a first argument with '=' that is not a
    file is an override."""
    rest = list(overrides or [])
    if config is not None and "=" in config and path_kind(config) == "missing":
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
    return os.environ.get("LIPSCHITZ_ICL_PROGRESS") == "1"


# the CLI framework's own ways out (typer may vendor its own click): never turned into errors
_CLI_EXITS: tuple[type[BaseException], ...] = tuple(
    {typer.Exit, typer.Abort, click.exceptions.Exit, click.ClickException, click.exceptions.Abort,
     getattr(getattr(typer, "exceptions", None), "TyperException", typer.Exit)}
)


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn every error into one line on stderr and an exit code, never a traceback:
    bad input (UserInputError, ConfigError) 2; a task class returning NaN, a failed write, any other
    fault 1; Ctrl-C or SIGTERM 130. LIPSCHITZ_ICL_DEBUG=1 re-raises unexpected errors (traceback)."""
    try:
        yield
    except _CLI_EXITS:
        raise
    except UserInputError as e:
        fail(str(e), 2)
    except TaskEvaluationError as e:
        fail(str(e), 1)
    except OSError as e:
        fail(f"I/O error: {e}", 1)
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except MemoryError:
        fail("out of memory (choose smaller sizes)", 1)
    except Exception as e:
        if os.environ.get("LIPSCHITZ_ICL_DEBUG") == "1":
            raise
        fail(f"unexpected {type(e).__name__}: {e} (set LIPSCHITZ_ICL_DEBUG=1 for a traceback)", 1)


def is_stdout_tty() -> bool:
    return sys.stdout.isatty()
