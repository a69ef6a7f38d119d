"""The torch thread policy of the toolkit, shared by the command line and ``li.run``.

The toolkit's tensors are small: on a shared CPU one thread is faster than several that wait for
each other (measured: the quickstart took 35 s with torch's default threads on a busy 2-core
machine, 1.1 s with one; see docs/PERFORMANCE.md). So every run uses ``LIPSCHITZ_ICL_THREADS``
torch threads (default 1; raise it for large d, N or K), and ``li.run(..., threads=N)`` overrides.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

THREADS_ENV = "LIPSCHITZ_ICL_THREADS"


def configured_threads() -> int:
    """``LIPSCHITZ_ICL_THREADS`` as a positive integer; 1 when unset or not a positive integer."""
    text = os.environ.get(THREADS_ENV, "1").strip()
    return max(1, int(text)) if text.isdigit() else 1


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
