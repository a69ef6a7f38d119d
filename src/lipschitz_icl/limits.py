"""Size limits checked before anything is allocated.

A run, an evaluation or a kernel estimate whose working set would exceed ``max_elements()`` tensor
elements (default 2**29: 4 GiB in float64) is refused with a one-line error naming the field. The
limit is read from the environment when it is checked, so a bad value is reported as bad input
(exit 2) by the command that uses it, never at import time."""

from __future__ import annotations

import math
import os

from .errors import ConfigError

MAX_ENV = "LIPSCHITZ_ICL_MAX_ELEMENTS"
DEFAULT_MAX_ELEMENTS = 2**29


def env_number(name: str) -> tuple[str, float] | None:
    """The environment variable ``name`` as (its text, its value as a number, NaN where it is not one);
    None where it is unset or empty (the caller's default)."""
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        return text, float(text)
    except ValueError:
        return text, math.nan


def max_elements() -> int:
    """The element limit: ``$LIPSCHITZ_ICL_MAX_ELEMENTS`` (a positive whole number, such as 2000000000
    or 1e10) or, when unset or empty, 2**29."""
    given = env_number(MAX_ENV)
    if given is None:
        return DEFAULT_MAX_ELEMENTS
    text, value = given
    if not (math.isfinite(value) and value >= 1 and value == math.floor(value)):
        raise ConfigError(MAX_ENV, f"{text[:40]!r} is not a positive whole number of tensor elements "
                                   f"(allowed: e.g. 2000000000 or 1e10; unset for the default {DEFAULT_MAX_ELEMENTS})")
    return int(value)
