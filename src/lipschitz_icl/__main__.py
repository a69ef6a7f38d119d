"""``python -m lipschitz_icl``: the command line, with a Ctrl-C during start-up (the imports of
torch and friends take seconds) ending in one line and exit 130 rather than a traceback."""

from __future__ import annotations

import sys


def entry() -> None:
    try:
        from .cli import main  # inside the try: a Ctrl-C during these imports is caught (not a cycle)
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted while starting\n")
        raise SystemExit(130) from None
    main()


if __name__ == "__main__":
    entry()
