"""How a sweep point is written down: an axis value as config text (``yaml_value``), and the run directory name
of a point (``run_name``: its axis values, then its whole config hash)."""

from __future__ import annotations

import functools
import math
from typing import Any

import yaml

from ..api import default_run_name
from ..config import Config, _short
from ..errors import ConfigError
from ..store import safe_name


def yaml_value(where: str, value: Any) -> str:
    """A value as YAML text that ``apply_overrides`` reads back unchanged (``where``: its field); numbers,
    booleans and text remembered (an axis value recurs at every point of the other axes)."""
    if isinstance(value, int | float | str | bool):
        return _scalar_yaml(where, value)
    return _yaml_text(where, value)


@functools.lru_cache(maxsize=4096, typed=True)  # typed: 1, 1.0 and True are three values
def _scalar_yaml(where: str, value: Any) -> str:
    return _yaml_text(where, value)


def _yaml_text(where: str, value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(where, f"must be a finite number (got {value!r})")
    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 30).strip()
    text = text.removesuffix("...").strip()
    if yaml.safe_load(text) != value:
        raise ConfigError(where, f"value {_short(value)} cannot be written as a config value")
    return text


def _describe(axes: dict[str, Any]) -> str:
    parts = []
    for key, value in axes.items():
        short = key.rsplit(".", 1)[-1]
        shown = f"{value:.4g}".replace("+", "") if isinstance(value, float) else str(value)  # 1e+06 -> 1e06
        parts.append(f"{short}{shown}")
    return safe_name("-".join(parts))[:96]


def run_name(axes: dict[str, Any], cfg: Config, config_hash: str | None = None) -> str:
    """A run directory name: the axis values, then the whole config hash (``config_hash``: computed already),
    so distinct configs never share a directory."""
    desc = _describe(axes) or (safe_name(cfg.name) if cfg.name else default_run_name(cfg))
    return f"{desc}-{config_hash or cfg.config_hash()}"
