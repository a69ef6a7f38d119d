"""``python -m lipschitz_icl``: the command line, with a Ctrl-C or SIGTERM during start-up (the imports
of torch and friends take seconds) ending in one line and exit 130 rather than a traceback or a
silent exit 143, SIGTERM handled like Ctrl-C from then on; once the command has ended (during the
interpreter's shutdown) a Ctrl-C is ignored and a SIGTERM ends the process with the command's own exit code, and
both are ignored in the interpreter's final teardown.

The garbage collector: off during the imports, their objects frozen afterwards (the command's collections skip
them), and the whole heap frozen once the command has ended (the teardown skips it): ~0.4 CPU-s of every command
(docs/PERFORMANCE.md, "Start-up")."""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import signal
import sys

_SIGTERM = getattr(signal, "SIGTERM", None)


def _interrupted_while_starting(signum: int, frame: object) -> None:  # noqa: ARG001
    # Nothing has been written yet: end at once, so no library's own exception handling (a bare
    # ``except`` in an import) can turn the interrupt into a traceback or swallow it.
    name = "SIGTERM" if signum == _SIGTERM else "Ctrl-C"
    sys.stderr.write(f"error: interrupted while starting ({name})\n")
    sys.stderr.flush()
    os._exit(130)


def _sigterm_as_ctrl_c(signum: int, frame: object) -> None:  # noqa: ARG001
    raise KeyboardInterrupt  # a command's own handlers (sigterm_as_interrupt, deferred_signals) take over inside


def _exit_with(code: int):
    """A SIGTERM handler for the interpreter's shutdown: end now, with the exit code the command chose."""
    def handler(signum: int, frame: object) -> None:  # noqa: ARG001
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a stream already closed by the shutdown
                stream.flush()
        os._exit(code)

    return handler


def _ignore_signals_from_here() -> None:
    """The last exit callback (registered first): from here the interpreter tears itself down, and it resets every
    Python signal handler to the default on the way, so a SIGTERM would kill a process whose job is done (-15).
    Ignored signals stay ignored through that teardown."""
    for s in (signal.SIGINT, _SIGTERM):
        if s is not None:
            signal.signal(s, signal.SIG_IGN)


def entry() -> None:
    atexit.register(_ignore_signals_from_here)  # before any library's: exit callbacks run last-registered first
    gc.disable()  # the imports (torch: ~170,000 objects) make next to no cyclic garbage; collecting costs ~0.1 CPU-s
    signals = [signal.SIGINT] + ([_SIGTERM] if _SIGTERM is not None else [])
    previous = {s: signal.getsignal(s) for s in signals}
    for s in signals:  # before any heavy import; a signal the process was started ignoring (a background job's
        if previous[s] is not signal.SIG_IGN:  # Ctrl-C) stays ignored, as it is once the command runs
            signal.signal(s, _interrupted_while_starting)
    try:
        from .cli import main  # inside the handler's reach: a signal during these imports is one line
    finally:
        signal.signal(signal.SIGINT, previous[signal.SIGINT])
        if _SIGTERM is not None and previous[_SIGTERM] is not signal.SIG_IGN:  # from here to the end of the command
            # SIGTERM is a KeyboardInterrupt, as Ctrl-C
            signal.signal(_SIGTERM, _sigterm_as_ctrl_c)
    gc.freeze()  # what the imports made is there for good: the command's collections skip it (a full one ~50 ms)
    gc.enable()
    code = 1
    try:
        try:
            main()
            code = 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
            raise
        finally:
            # the command has ended, its files written and its exit code chosen: a Ctrl-C from here on would
            # only interrupt the interpreter's shutdown (its atexit callbacks) with a traceback, and a SIGTERM
            # would end the process as killed (-15) although its job is done: the first is ignored, the second
            # ends the process at once with the command's own exit code
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            if _SIGTERM is not None:
                signal.signal(_SIGTERM, _exit_with(code))
            gc.freeze()  # the interpreter's teardown skips collecting the heap (torch's): ~0.3 s of every command
    except KeyboardInterrupt:  # one that came between the command's end and the lines above
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        sys.stderr.write("error: interrupted\n")
        sys.exit(130)


if __name__ == "__main__":
    entry()
