"""The torch thread policy of the toolkit, shared by the command line and ``li.run``.

The toolkit's tensors are small: on a shared CPU one thread is faster than several that wait for
each other (measured: the quickstart took 35 s with torch's default threads on a busy 2-core
machine, 1.1 s with one; see docs/PERFORMANCE.md). So every run uses ``LIPSCHITZ_ICL_THREADS``
torch threads (default 1; raise it for large d, N or K), and ``li.run(..., threads=N)`` overrides.
Inside ``reproduce`` and sweeps every run takes one thread whatever the variable says (the number of
threads changes float reductions, and one job's sessions must give the same numbers).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

from .errors import UserInputError

THREADS_ENV = "LIPSCHITZ_ICL_THREADS"


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def thread_setting() -> tuple[int, str | None]:
    """``LIPSCHITZ_ICL_THREADS`` (1 when unset or empty) and a warning when it was clamped to the cores.

    Not a whole number of at least 1 (``²``, ``-1``, ``0``, ``2.5``, ``four``) is bad input (UserInputError,
    naming the variable and what is allowed); more than the cores (``100000``, ``99999999999999999999``) is
    clamped to the cores, since torch would try to start that many threads."""
    text = os.environ.get(THREADS_ENV, "").strip()
    if not text:
        return 1, None
    if not (text.isascii() and text.isdigit()) or int(text[:32]) < 1:
        raise UserInputError(f"{THREADS_ENV}={text[:32]!r}: must be a whole number of torch threads from 1 to "
                             f"{cores()} (this machine's cores)")
    n = int(text[:32]) if len(text) <= 32 else cores() + 1
    if n > cores():
        return cores(), f"{THREADS_ENV}={text[:32]} is more than the {cores()} cores here: using {cores()} threads"
    return n, None


def configured_threads() -> int:
    """``LIPSCHITZ_ICL_THREADS`` as torch threads (see ``thread_setting``): 1 when unset."""
    return thread_setting()[0]


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """``n`` torch threads for a block, then the previous number."""
    old = torch.get_num_threads()
    torch.set_num_threads(max(1, int(n)))
    try:
        yield
    finally:
        torch.set_num_threads(old)


@contextlib.contextmanager
def single_threaded_torch() -> Iterator[None]:
    with torch_threads(1):
        yield
