"""``einsum``: torch.einsum with the contraction path of each (equation, shapes) found once.

For three operands or more, ``torch.einsum`` asks opt_einsum, where that package is installed, for the
pairwise contraction order (``torch.backends.opt_einsum``) on every call: 0.2-0.4 ms of Python for the
small tensors of a training step, five to seven times the contraction itself. The path depends on the equation and
the operands' shapes only, so this module keeps it and hands it to the same ATen call
(``torch._VF.einsum(equation, operands, path=...)``) that ``torch.einsum`` makes: the same
operations in the same order, the same numbers bit for bit (tests/test_contract.py), with or
without autograd. Without opt_einsum torch contracts left to right, with no path to find, and this is
``torch.einsum`` itself.
"""

from __future__ import annotations

import itertools

import torch
import torch.backends.opt_einsum as torch_opt_einsum
from torch import _VF

_PATHS: dict[tuple, list[int] | None] = {}  # (equation, shapes, strategy) -> the flattened path torch would use
_MAX_PATHS = 4096  # a bound, for a caller that contracts ever new shapes


def einsum(equation: str, *operands: torch.Tensor) -> torch.Tensor:
    """``torch.einsum(equation, *operands)`` (operands as separate tensors, the equation as a string)."""
    if len(operands) <= 2 or not torch_opt_einsum.enabled:
        return torch.einsum(equation, *operands)
    strategy = torch_opt_einsum.strategy
    key = (equation, tuple(op.shape for op in operands), strategy)
    if key not in _PATHS:
        if len(_PATHS) >= _MAX_PATHS:
            _PATHS.clear()
        _PATHS[key] = _path(equation, operands, strategy)
    return _VF.einsum(equation, operands, path=_PATHS[key])  # type: ignore[attr-defined]


def _path(equation: str, operands: tuple[torch.Tensor, ...], strategy: str | None) -> list[int] | None:
    """The flattened contraction path torch.einsum computes for these operands (None without opt_einsum)."""
    if not torch_opt_einsum.is_available():
        return None
    pairs = torch_opt_einsum.get_opt_einsum().contract_path(equation, *operands, optimize=strategy)[0]
    return [*itertools.chain.from_iterable(pairs)]
