"""Random numbers: every draw of a run comes from a named stream derived from its seed.

A stream's generator depends on (seed, stream name) only, so adding a stream, or drawing more
from one, never shifts the numbers of another (features, kernel, counts, prompts, tests, ...).
"""

from __future__ import annotations

import hashlib

import torch


def make_generator(seed: int, stream: str) -> torch.Generator:
    """A CPU generator for one named random stream of a run (features, counts, tests, ...)."""
    digest = hashlib.sha256(f"{seed}:{stream}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") & (2**63 - 1))
