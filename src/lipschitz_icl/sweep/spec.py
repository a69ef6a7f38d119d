"""Sweep specs: a base config plus axes, expanded into one validated Config per point (``expansion``).

    name: l_sweep                      # optional; default: the spec file's stem
    base: ../quickstart.yaml           # a config file (relative to the spec file) or an inline mapping
    overrides: [train.steps=5000]      # optional key=value overrides applied to the base
    grid:                              # cartesian product, first key outermost
      task.L: logspace(-1, 1, 10)      # 10 values from 0.1 to 10
      train.lr: [0.5, 1.0]
    zip:                               # lock-step: equal-length lists, one point per position
      features.K: [3, 5]
      features.d: [3, 5]
    seeds: 3                           # innermost axis: seed = base seed + 0, 1, 2 (or a list)
    params: true                       # write each run's params.pt (default)
    curves: summary                    # per run: every scalar and Attn_k at every record, the K x K blocks at the
                                       # first and last (default); full: every recorded row
    fused: true                        # the compiled kernel step where a point allows it (default: where numba
                                       # can be imported); false: the torch step (see kernel_step)

Range strings are read by a small regular-expression parser (never ``eval``):
``linspace(a, b, n)`` is n evenly spaced values from a to b; ``logspace(a, b, n)`` is 10**x for
x in linspace(a, b, n), as in numpy.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator

from ..config import FeatureFiles, _loc, _short, anchor_feature_path, apply_overrides, read_yaml, validate_config
from ..errors import ConfigError, UserInputError
from .expansion import MAX_POINTS, CountFn, Point, batch_group, expand
from .kernel_step import resolve_step

__all__ = ["MAX_POINTS", "MAX_RANGE", "NAME_PATTERN", "Point", "Sweep", "SweepSpec", "batch_group", "expand",
           "load_sweep", "parse_range"]

MAX_RANGE = 100_000  # at most this many values from one linspace/logspace

_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_RANGE = re.compile(rf"^\s*(linspace|logspace)\(\s*({_NUM})\s*,\s*({_NUM})\s*,\s*(\d+)\s*\)\s*$")
_AXIS_HELP = "expected a list of values or 'linspace(a, b, n)' / 'logspace(a, b, n)'"


def parse_range(text: str) -> list[float]:
    """``linspace(a, b, n)`` or ``logspace(a, b, n)`` -> the list of n values (12 significant digits)."""
    m = _RANGE.match(text)
    if m is None:
        raise ValueError(f"{_AXIS_HELP} (got {text!r})")
    kind, a, b, n = m.group(1), float(m.group(2)), float(m.group(3)), int(m.group(4))
    if not 1 <= n <= MAX_RANGE:
        raise ValueError(f"{kind}: n must be between 1 and {MAX_RANGE} (got {n})")
    xs = [a] if n == 1 else [a + (b - a) * i / (n - 1) for i in range(n)]
    if kind == "logspace":
        if max(abs(a), abs(b)) > 300:
            raise ValueError(f"logspace: exponents must be within [-300, 300] (got {a:g}, {b:g})")
        xs = [10.0**x for x in xs]
    return [float(f"{x:.12g}") for x in xs]  # drop float noise such as 0.30000000000000004


def _axes_mapping(where: str, value: Any) -> dict[str, list[Any]]:
    """``{dotted.key: values}`` with each value a non-empty list or a range string."""
    if not isinstance(value, dict):
        raise ConfigError(where, f"expected a mapping of config keys to values (got {type(value).__name__})")
    out: dict[str, list[Any]] = {}
    for key, values in value.items():
        if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*", key):
            raise ConfigError(f"{where}.{key}", "an axis must be a dotted config key such as task.L")
        if isinstance(values, str):
            try:
                values = parse_range(values)
            except ValueError as e:
                raise ConfigError(f"{where}.{key}", str(e)) from None
        if not isinstance(values, list):
            raise ConfigError(f"{where}.{key}", f"{_AXIS_HELP} (got {type(values).__name__})")
        if not values:
            raise ConfigError(f"{where}.{key}", "lists no values")
        out[key] = values
    return out


class SweepSpec(BaseModel):
    """The validated YAML of a sweep spec (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, description="sweep name (default: the spec file's stem)")
    base: Any = Field(default_factory=dict, description="config file (relative to the spec) or inline config")
    overrides: list[str] = Field(default_factory=list, description="key=value overrides on the base")
    grid: Any = Field(default_factory=dict, description="cartesian axes: {key: values}")
    zip: Any = Field(default_factory=list, description="lock-step axes: {key: values} or a list of such groups")
    seeds: Any = Field(None, description="n (seeds base+0..n-1) or a list of seeds")

    params: bool = Field(True, description="write each run's trained parameters (params.pt)")
    curves: Literal["summary", "full"] = Field(
        "summary", description="what is stored of each run's curves: summary (every scalar and Attn_k at every "
        "record; A, B and attn_cross at the first and last record) or full (every recorded row)")
    fused: StrictBool | None = Field(
        None, description="the kernel step of the points that allow it: true, compiled (engine.fused, numba); "
        "false, torch; default: compiled where numba can be imported and the runs train here (a point whose override "
        "or axis sets engine.fused keeps it)")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(NAME_PATTERN, v):
            raise ValueError("name may use letters, digits, '.', '_' and '-' (max 128)")
        return v

    @field_validator("base")
    @classmethod
    def _base(cls, v: Any) -> Any:
        if not isinstance(v, str | dict):
            raise ConfigError("base", f"expected a config file path or a mapping (got {type(v).__name__})")
        return v

    @field_validator("grid")
    @classmethod
    def _grid(cls, v: Any) -> dict[str, list[Any]]:
        return _axes_mapping("grid", v or {})

    @field_validator("zip")
    @classmethod
    def _zip(cls, v: Any) -> list[dict[str, list[Any]]]:
        groups = v if isinstance(v, list) else [v] if v else []
        where = "zip" if not isinstance(v, list) else "zip[{}]"
        return [_axes_mapping(where.format(i), g) for i, g in enumerate(groups)]

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: Any) -> int | list[int] | None:
        if v is None:
            return None
        if isinstance(v, int) and not isinstance(v, bool):
            if not 1 <= v <= MAX_RANGE:
                raise ConfigError("seeds", f"must be between 1 and {MAX_RANGE} (got {v})")
            return v
        if isinstance(v, list) and v and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in v):
            return v
        raise ConfigError("seeds", f"expected a count n >= 1 or a non-empty list of seeds >= 0 (got {v!r})")


NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"


@dataclass
class Sweep:
    name: str
    spec: SweepSpec
    base: dict[str, Any]  # the base config as a mapping (file read, overrides applied)
    points: list[Point] = field(default_factory=list)
    fused: bool = False  # the points that allow it take the compiled kernel step (kernel_step)
    step_chosen: bool = False  # by the caller, the spec or the sweep directory, not by default

    def resolved_yaml(self, curves: str | None = None) -> str:
        """The spec with its base inlined and its kernel step resolved: a self-contained copy for the sweep
        directory; ``curves``: what the command stores of each run's curves (None: the spec's)."""
        data = self.spec.model_dump(mode="json", exclude_none=True)
        data.update(name=self.name, base=self.base, fused=self.fused, curves=curves or self.spec.curves)
        data.pop("overrides", None)
        return yaml.safe_dump(data, sort_keys=False)

    def with_step(self, fused: bool) -> Sweep:
        """The same sweep with the compiled kernel step or not, as chosen (its points expanded again if the step
        differs)."""
        points = self.points if fused == self.fused else expand(self.spec, self.base, fused=fused)
        return Sweep(self.name, self.spec, self.base, points, fused, True)


def _spec_error(err: ValidationError) -> ConfigError:
    first = err.errors()[0]
    inner = (first.get("ctx") or {}).get("error")
    if isinstance(inner, ConfigError):
        return inner
    # the config's helpers: keys and values shown on one line, however odd (newlines, long text)
    loc = _loc(first["loc"], keys=first["type"] in ("extra_forbidden", "string_type"))
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        msg = f"unknown key (allowed: {', '.join(SweepSpec.model_fields)})"
    elif first["type"] not in ("value_error",) and not isinstance(first.get("input"), dict | list):
        msg += f" (got {_short(first.get('input'))})"
    return ConfigError(loc or "spec", msg)


def load_sweep(spec: str | Path | dict[str, Any], name: str | None = None, on_count: CountFn | None = None,
               fused: bool | None = None, local: bool = True, option: str = "fused") -> Sweep:
    """Read and validate a spec (a YAML path or a mapping) and expand its points (``on_count``: told their
    number first, so that a caller can get workers ready meanwhile) with the kernel step ``fused`` (the caller's
    ``option``; default: the spec's ``fused:``, else the compiled step where numba can be imported and the runs
    train on this machine, ``local``; ``kernel_step``). Errors are ``UserInputError`` with one line: the spec
    file, the field, what is wrong."""
    where = ""
    root = Path.cwd()
    if isinstance(spec, str | Path):
        where = f"{spec}: "
        root = Path(spec).resolve().parent
        name = name or Path(spec).stem
        data = read_yaml(spec)
    else:
        data = spec
    if not isinstance(data, dict):
        raise UserInputError(f"{where}a sweep spec must be a mapping (base, grid, zip, seeds)")
    try:
        try:
            parsed = SweepSpec.model_validate(data)
        except ValidationError as e:
            raise _spec_error(e) from None
        if isinstance(parsed.base, str):
            base_path = (root / parsed.base) if not Path(parsed.base).is_absolute() else Path(parsed.base)
            if not base_path.is_file():
                raise ConfigError("base", f"config file {parsed.base!r} not found (paths are relative to the spec)")
            base = read_yaml(base_path) or {}
            if not isinstance(base, dict):
                raise ConfigError("base", f"{parsed.base} must hold a mapping of config keys")
            anchor_feature_path(base, base_path.parent)  # a relative features.path: beside the base file
        else:
            base = copy.deepcopy(parsed.base)
            anchor_feature_path(base, root)
        base = apply_overrides(base, parsed.overrides)
        feature_files: FeatureFiles = {}
        try:
            base_cfg = validate_config(copy.deepcopy(base), feature_files)
        except ConfigError as e:
            raise ConfigError(f"base.{e.field}", e.message) from None
        if base_cfg.features.kind == "file":  # read once: its absolute path and digest go with every point
            base["features"] = {**base.get("features", {}), "path": base_cfg.features.path,
                                "file_sha256": base_cfg.features.file_sha256}
        sweep_name = parsed.name or name or "sweep"
        if not re.fullmatch(NAME_PATTERN, sweep_name):  # e.g. '..' from a spec file named '...yaml'
            raise ConfigError("name", f"{sweep_name!r} (the spec file's name) is not a usable sweep name: give "
                                      "name: in the spec (letters, digits, '.', '_', '-'; max 128)")
        step, chosen = resolve_step(fused, parsed.fused, local, option)
        points = expand(parsed, base, feature_files, on_count, step)
    except UserInputError as e:
        raise UserInputError(f"{where}{e}") from None
    return Sweep(sweep_name, parsed, base, points, step, chosen)
