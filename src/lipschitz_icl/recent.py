"""Values kept for the next configs that ask for the same: a sweep's seeds share a feature set, its step sizes a
kernel spec, its seeds and step sizes a delta. One rule for all of them (``kept``): the most recently used few are
kept, the oldest dropped; threads may share a cache (a run's numbers never depend on what was kept)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable
from typing import TypeVar

import torch

V = TypeVar("V")
_CACHES: list[dict] = []  # every cache made by new_cache, so that forget_kept can empty them all
_NUMPY_VIEWABLE = (torch.float64, torch.float32, torch.int64, torch.int32, torch.bool)  # Tensor.numpy() takes them


def new_cache() -> dict:
    """An empty cache for ``kept``, emptied by ``forget_kept``."""
    cache: dict = {}
    _CACHES.append(cache)
    return cache


def forget_kept() -> None:
    """Empty every cache made by ``new_cache`` (a registered class was defined again: what it made is stale)."""
    for cache in _CACHES:
        cache.clear()


def kept(cache: dict[Hashable, tuple[V, Hashable]], key: Hashable, make: Callable[[], V], most: int,
         keep: Callable[[V], bool] | None = None, mark: Callable[[V], Hashable] | None = None) -> V:
    """``cache[key]``, made by ``make()`` when absent, and kept as the most recent entry (unless ``keep`` says no);
    past ``most`` entries the oldest go. ``cache`` is a dict in use order, oldest first.

    A kept value that someone changed in place (its ``mark``, e.g. ``tensor_marks`` of its tensors, differs from
    the one it had when made) is made again: a number is never computed from a value the config does not say."""
    entry = cache.pop(key, None)
    if entry is not None and (mark is None or mark(entry[0]) == entry[1]):
        value, stamp = entry
    else:
        value = make()
        stamp = None if mark is None else mark(value)
    if keep is None or keep(value):
        cache[key] = (value, stamp)
        while len(cache) > most:
            cache.pop(next(iter(cache), None), None)  # with defaults: another thread may have taken it
    return value


def tensor_marks(*tensors: torch.Tensor | None) -> tuple:
    """What changes when one of ``tensors`` is changed in place: the dtype and shape of each, and one digest of the
    bytes of those on the CPU (a change made through a NumPy view too), torch's version counter elsewhere. Not a
    security digest: a change detector."""
    marks: list[Hashable] = []
    digest = hashlib.sha1(usedforsecurity=False)
    for t in tensors:
        if t is None or t.device.type != "cpu":
            marks.append(None if t is None else (t._version, t.data_ptr()))
            continue
        if t.is_contiguous() and not t.requires_grad and t.dtype in _NUMPY_VIEWABLE:
            data = t.numpy()  # its bytes as they are (a C-contiguous buffer): no copy, no reshaped views
        else:
            data = t.detach().contiguous().reshape(-1).view(torch.uint8).numpy()
        digest.update(data)
        marks.append((t.dtype, tuple(t.shape)))
    return (*marks, digest.digest())
