"""``python -m lipschitz_icl``: the command line, with a Ctrl-C during start-up (the imports of
torch and friends take seconds) ending in one line and exit 130 rather than a traceback."""

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
    main()


if __name__ == "__main__":
    entry()
