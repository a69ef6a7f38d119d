"""Ctrl-C and SIGTERM that are never lost: held back during a run's final writes, and latched
during training so that a library which swallows the KeyboardInterrupt cannot cancel it.

Python raises KeyboardInterrupt wherever the main thread happens to be when SIGINT arrives. When
that is inside compiled library code which checks for signals and then drops the error (pyarrow's
``Table.to_pandas`` can), the interrupt would vanish and a sweep would run to its end.
``interrupt_latch`` remembers every signal, so the training loops re-raise it at their next step.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

_SIGNALS = [signal.SIGINT] + ([signal.SIGTERM] if hasattr(signal, "SIGTERM") else [])


def _restore(old: dict[int, object]) -> None:
    for s, handler in old.items():
        signal.signal(s, handler if handler is not None else signal.SIG_DFL)


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back while the block runs (a run's final writes), then deliver them.

    A signal that arrives inside is recorded and re-raised after the block, so Ctrl-C still ends the
    program, just never between the files of a run. A no-op outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    old = {s: signal.signal(s, lambda signum, frame: pending.append(signum)) for s in _SIGNALS}
    try:
        yield
    finally:
        _restore_then_raise(old, pending)


def _restore_then_raise(old: dict[int, object], pending: list[int]) -> None:
    try:
        _restore(old)
    finally:
        for s in dict.fromkeys(pending):
            signal.raise_signal(s)


_open_latches: list[list[int]] = []  # the signals each open latch has seen and not yet raised


@contextlib.contextmanager
def interrupt_latch() -> Iterator[Callable[[], None]]:
    """Within the block, SIGINT (and SIGTERM where a Python handler turns it into an interrupt) is
    handled as before and also remembered; the yielded ``check()`` raises KeyboardInterrupt if one
    arrived since the block began (or was pending in an enclosing latch when it began). Call it at
    every step: an interrupt swallowed by library code is then raised at the next step, or when
    the block ends normally. Outside the main thread ``check`` never raises."""
    arrived: list[int] = list(_open_latches[-1]) if _open_latches else []

    def check() -> None:
        if arrived:
            arrived.clear()
            raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield check
        return
    chained = {s: signal.getsignal(s) for s in _SIGNALS}
    chained = {s: h for s, h in chained.items() if callable(h)}  # SIG_DFL / SIG_IGN stay as they are

    def handler(signum: int, frame: object) -> None:
        arrived.append(signum)
        chained[signum](signum, frame)  # the handler it replaces (default: raise KeyboardInterrupt)

    old = {s: signal.signal(s, handler) for s in chained}
    _open_latches.append(arrived)
    try:
        yield check
    finally:
        _open_latches.pop()
        _restore(old)
    check()  # the block ended normally although an interrupt arrived: it goes on to the caller
