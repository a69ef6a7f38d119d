"""``python -m lipschitz_icl``: the command line, with a Ctrl-C or SIGTERM during start-up (the imports
of torch and friends take seconds) ending in one line and exit 130 rather than a traceback or a
silent exit 143, SIGTERM handled like Ctrl-C from then on, and one signal after the command has ended
(during the interpreter's shutdown) ignored."""

from __future__ import annotations

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


def entry() -> None:
    signals = [signal.SIGINT] + ([_SIGTERM] if _SIGTERM is not None else [])
    previous = {s: signal.signal(s, _interrupted_while_starting) for s in signals}  # before any heavy import
    try:
        from .cli import main  # inside the handler's reach: a signal during these imports is one line
    finally:
        signal.signal(signal.SIGINT, previous[signal.SIGINT])
        if _SIGTERM is not None:  # from here to the end of the command SIGTERM is a KeyboardInterrupt, as Ctrl-C
            signal.signal(_SIGTERM, _sigterm_as_ctrl_c)
    try:
        try:
            main()
        finally:
            # the command has ended, its files written and its exit code chosen: a Ctrl-C from here on would
            # only interrupt the interpreter's shutdown (its atexit callbacks) with a traceback
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            if _SIGTERM is not None:
                signal.signal(_SIGTERM, signal.SIG_DFL)
    except KeyboardInterrupt:  # one that came between the command's end and the lines above
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        sys.stderr.write("error: interrupted\n")
        sys.exit(130)


if __name__ == "__main__":
    entry()
