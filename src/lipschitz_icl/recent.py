"""Values kept for the next configs that ask for the same: a sweep's seeds share a feature set, its step sizes a
kernel spec, its seeds and step sizes a delta. One rule for all of them (``kept``): the most recently used few are
kept, the oldest dropped; threads may share a cache (a run's numbers never depend on what was kept)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

V = TypeVar("V")


def kept(cache: dict[Hashable, V], key: Hashable, make: Callable[[], V], most: int,
         keep: Callable[[V], bool] | None = None) -> V:
    """``cache[key]``, made by ``make()`` when absent, and kept as the most recent entry (unless ``keep`` says no);
    past ``most`` entries the oldest go. ``cache`` is a dict in use order, oldest first."""
    value = cache.pop(key, None)
    if value is None:
        value = make()
    if keep is None or keep(value):
        cache[key] = value
        while len(cache) > most:
            cache.pop(next(iter(cache), None), None)  # with defaults: another thread may have taken it
    return value
