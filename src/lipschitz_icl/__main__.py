"""``python -m lipschitz_icl``: the command line, with a Ctrl-C during start-up (the imports of
torch and friends take seconds) ending in one line and exit 130 rather than a traceback, and one
after the command has ended (during the interpreter's shutdown) ignored."""

from __future__ import annotations

import os
import signal
import sys


def _interrupted_while_starting(signum: int, frame: object) -> None:  # noqa: ARG001
    # Nothing has been written yet: end at once, so no library's own exception handling (a bare
    # ``except`` in an import) can turn the interrupt into a traceback or swallow it.
    sys.stderr.write("error: interrupted while starting\n")
    sys.stderr.flush()
    os._exit(130)


def entry() -> None:
    previous = signal.signal(signal.SIGINT, _interrupted_while_starting)
    try:
        from .cli import main  # inside the handler's reach: a Ctrl-C during these imports is one line
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        try:
            main()
        finally:
            # the command has ended, its files written and its exit code chosen: a Ctrl-C from here on would
            # only interrupt the interpreter's shutdown (its atexit callbacks) with a traceback
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    except KeyboardInterrupt:  # one that came between the command's end and the line above
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        sys.stderr.write("error: interrupted\n")
        sys.exit(130)


if __name__ == "__main__":
    entry()
