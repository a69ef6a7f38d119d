"""One torch thread for a block: the toolkit's tensors are small, and on a shared CPU one thread
is faster than several that wait for each other (see docs/PERFORMANCE.md)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def single_threaded_torch() -> Iterator[None]:
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)
