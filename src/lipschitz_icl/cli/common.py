"""Shared CLI pieces: consoles, one-line errors, overrides, progress bars, signal handling."""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import sys
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import numpy as np
import pyarrow as pa
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

from ..config_io import clip, path_kind
from ..errors import TaskEvaluationError, UserInputError, cli_message

out = Console()  # tables and results
err = Console(stderr=True)  # progress and messages
PIPED_WIDTH = 240  # columns for tables and messages written to a file or a pipe


def widen_when_piped() -> None:
    """Give a file or a pipe tables at full width (up to PIPED_WIDTH columns), never squeezed into
    rich's default 80 with numbers cut to ``0.00…``; a COLUMNS variable, when set, still decides."""
    for console in (out, err):
        if not console.is_terminal and "COLUMNS" not in os.environ:
            console.width = PIPED_WIDTH


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


def cell(value: object, digits: int = 4) -> str:
    """A value as a table cell: numbers to ``digits`` significant digits, yes/no, ``-`` for none,
    lists joined by commas. Plain text: escape it with ``esc`` where it goes through rich."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    if isinstance(value, list):
        return ", ".join(cell(v, digits) for v in value)
    return str(value)


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


MAX_NAME_BYTES = 255  # the longest file or folder name common file systems take
MAX_PATH_CHARS = 4096  # the longest path Linux takes (PATH_MAX)
MAX_PATH_DEPTH = 256  # folders created one inside another (each level is a recursion in mkdir)


def check_out_path(path: Path | None, option: str) -> None:
    """Refuse an output path the file system cannot take, before anything is run or written."""
    if path is None:
        return
    text, parts = str(path), Path(path).parts
    long_part = next((p for p in parts if len(p.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES), None)
    if long_part is not None:
        raise UserInputError(f"{option} {clip(text)}: the name {clip(long_part, 40)} is longer than "
                             f"{MAX_NAME_BYTES} bytes (allowed: names of at most {MAX_NAME_BYTES} bytes)")
    if len(text) > MAX_PATH_CHARS or len(parts) > MAX_PATH_DEPTH:
        raise UserInputError(f"{option} {clip(text)}: {len(text)} characters in {len(parts)} folders (allowed: at "
                             f"most {MAX_PATH_CHARS} characters and {MAX_PATH_DEPTH} folders)")
    if "\x00" in text:
        raise UserInputError(f"{option} {clip(text)}: holds a NUL byte")


def check_run_dir(run_dir: Path) -> None:
    """Refuse a run directory argument that does not name a folder (a name too long to exist included)."""
    kind = path_kind(run_dir)
    if kind != "dir":
        raise UserInputError(f"{clip(run_dir)}: " + ("no such run directory" if kind == "missing" else
                                                    "not a run directory (not a folder)"))


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


def progress_bar(transient: bool = True, eta: bool = False, auto_refresh: bool = True) -> Progress:
    """A progress bar on stderr (hidden when stderr is not a terminal); ``eta`` adds the time left. Without
    ``auto_refresh`` no thread redraws it: the caller's ``refresh()`` does (a process that forks runs no other
    thread, ``forked.single_threaded``)."""
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
        disable=not err.is_terminal and not forced_progress(),
        auto_refresh=auto_refresh,
    )


class StopEta:
    """Time left to the expected stop of a run, from its recorded losses: while the loss decays
    geometrically toward the target eps (eps x the first loss with eps_mode relative), the steps to eps are
    extrapolated from the slope of log loss against step over the last ``window`` records, and capped by
    the budget. No estimate (None) while the loss does not fall or fewer than three records exist:
    a time to the budget alone would say nothing about when the run stops."""

    def __init__(self, eps: float, budget: int, relative: bool = False, window: int = 6,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.eps, self.budget, self.relative, self.clock = eps, budget, relative, clock
        self.points: deque[tuple[int, float, float]] = deque(maxlen=window)  # (step, log loss, time)
        self.target: float | None = None  # the loss at which the run stops: eps, or eps x the first loss

    def update(self, step: int, loss: float) -> float | None:
        """Record (step, loss) now; seconds left to the expected stop, or None without an estimate."""
        if not (math.isfinite(loss) and loss > 0):
            return None
        if self.target is None:
            self.target = self.eps * loss if self.relative else self.eps
        self.points.append((step, math.log(loss), self.clock()))
        if len(self.points) < 3:
            return None
        steps, logs, times = (np.array(col, dtype=float) for col in zip(*self.points, strict=True))
        if steps[-1] <= steps[0]:
            return None
        slope = float(np.polyfit(steps, logs, 1)[0])  # d log(loss) / d step over the window
        if slope >= 0:
            return None
        to_eps = max(0.0, (math.log(self.target) - logs[-1]) / slope)
        left = min(to_eps, max(0.0, self.budget - steps[-1]))
        return left * (times[-1] - times[0]) / (steps[-1] - steps[0])


def format_eta(seconds: float | None) -> str:
    """``eta 1:02:03`` (or ``eta 4:05``), or nothing when there is no estimate."""
    if seconds is None:
        return ""
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"eta {hours}:{minutes:02d}:{secs:02d}" if hours else f"eta {minutes}:{secs:02d}"


def forced_progress() -> bool:
    """LIPSCHITZ_ICL_PROGRESS=1: bars even when stderr is not a terminal."""
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
    fault 1; Ctrl-C or SIGTERM 130. LIPSCHITZ_ICL_DEBUG=1 re-raises unexpected errors (traceback).
    Warnings raised on the way (a library's, say torch's about a foreign pickle) are held back: shown
    after a command that succeeds, dropped when it fails, so an error stays one line."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            yield
    except _CLI_EXITS:
        raise
    except UserInputError as e:
        fail(cli_message(e), 2)  # the command line's words (--force), where the API's differ (force=True)
    except pa.ArrowException as e:  # a metrics file that is corrupt past its footer
        fail(f"a Parquet file is corrupt ({e})", 2)
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
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
