"""Sweep specs: a base config plus axes, expanded into one validated Config per point.

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

import contextlib
import copy
import functools
import gc
import itertools
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator

from ..batch import warm_fused_step
from ..config import (
    Config,
    FeatureFiles,
    _loc,
    _short,
    anchor_feature_path,
    apply_overrides,
    read_yaml,
    validate_config,
)
from ..config_io import copied_along
from ..engines import batchable
from ..errors import ConfigError, UserInputError
from ..forked import ForkedCall, fork_available, single_threaded
from .kernel_step import own_step, resolve_step, with_kernel_step
from .point_text import run_name, yaml_value

MAX_POINTS = 100_000  # refuse specs that expand to more runs than this (counted before expanding)
MAX_RANGE = 100_000  # at most this many values from one linspace/logspace
# points whose validated config is kept (nothing in the toolkit changes a Config): ~7 KB each, 70 MB for 10,000; the
# processes forked to train the batches inherit them instead of validating each point again (~40 us a point)
HELD_CONFIGS = 10_000
PARALLEL_POINTS = 4096  # specs of this many points or more are expanded by two processes where this one may fork
HALF, WARMING_SHARE = 0.5, 0.35  # of the points, those this process makes (while loading the compiled step: fewer)

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
class Point:
    """One run of a sweep: its position, axis values, config hash and run name. The validated config is rebuilt
    on demand (``config``) past the first HELD_CONFIGS points: a sweep of 10^5 points keeps 10^5 small records
    in memory and HELD_CONFIGS configs, not 10^5, and a sweep of up to HELD_CONFIGS points validates each point once."""

    index: int
    axes: dict[str, Any]
    config_hash: str
    name: str
    seed: int
    make_config: Callable[[], Config] = field(repr=False)
    group: tuple = field(default=(), repr=False)  # ``batch_group`` of its config, found when it was validated

    @property
    def config(self) -> Config:
        return self.make_config()

    @classmethod
    def of(cls, index: int, axes: dict[str, Any], cfg: Config) -> Point:
        """A point made from a config already in hand."""
        h = cfg.config_hash()
        return cls(index, axes, h, run_name(axes, cfg, h), cfg.seed, lambda: cfg, batch_group(cfg))


def batch_group(cfg: Config) -> tuple:
    """Which points may share a batch, from the config alone (the driver builds no problem): the shape-defining
    settings of ``Engine.batch_key``; ``("alone",)`` for a point that cannot be batched. Points of one group whose
    engines still differ (Sigma diagonal or not, say) are split again by ``batch.plan_groups`` on the worker."""
    if not batchable(cfg):
        return ("alone",)
    e, f = cfg.engine, cfg.features
    return (e.kind, e.model_dump_json(), f.kind, f.K, cfg.task.kind, cfg.task.label_noise > 0, cfg.train.optimizer)


@dataclass
class Sweep:
    name: str
    spec: SweepSpec
    base: dict[str, Any]  # the base config as a mapping (file read, overrides applied)
    points: list[Point] = field(default_factory=list)
    fused: bool = False  # the points that allow it take the compiled kernel step (kernel_step)
    step_chosen: bool = False  # by the caller, the spec or the sweep directory, not by default

    def resolved_yaml(self) -> str:
        """The spec with its base inlined and its kernel step resolved: a self-contained copy for the sweep
        directory."""
        data = self.spec.model_dump(mode="json", exclude_none=True)
        data.update(name=self.name, base=self.base, fused=self.fused)
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


def _axes(spec: SweepSpec, base_seed: int) -> list[tuple[str, list[dict[str, Any]]]]:
    """Each axis as (its field, a list of partial assignments); the points are their cartesian
    product, counted here before anything is expanded."""
    axes = [(f"grid.{key}", [{key: v} for v in values]) for key, values in spec.grid.items()]
    seen = set(spec.grid)
    for i, group in enumerate(spec.zip):
        if not group:
            where = "zip" if len(spec.zip) == 1 else f"zip[{i}]"
            raise ConfigError(where, "an empty group (expected {key: [values], ...} with at least one key)")
        lengths = {key: len(values) for key, values in group.items()}
        if len(set(lengths.values())) > 1:
            shown = ", ".join(f"{k}: {n}" for k, n in lengths.items())
            raise ConfigError("zip", f"lists must have the same length (got {shown})")
        for key in group:
            if key in seen:
                raise ConfigError(f"zip.{key}", "is already an axis (a key may appear in one axis only)")
            seen.add(key)
        n = next(iter(lengths.values()))
        where = "zip" if len(spec.zip) == 1 else f"zip[{i}]"
        axes.append((where, [{key: values[j] for key, values in group.items()} for j in range(n)]))
    if spec.seeds is not None:
        if "seed" in seen:
            raise ConfigError("seeds", "seed is also a grid/zip axis (use one or the other)")
        seeds = list(range(base_seed, base_seed + spec.seeds)) if isinstance(spec.seeds, int) else spec.seeds
        axes.append(("seeds", [{"seed": s} for s in seeds]))
    total = 1
    for where, axis in axes:
        total *= len(axis)
        if total > MAX_POINTS:
            raise ConfigError(where, f"the spec expands to more than {MAX_POINTS} runs (the limit) at this axis "
                                     f"({len(axis)} values); split the sweep")
    return axes


def _axis_group(spec: SweepSpec, key: str) -> str:
    if key in spec.grid:
        return "grid"
    return "seeds" if key == "seed" and spec.seeds is not None else "zip"


def _point_config(spec: SweepSpec, base: dict[str, Any], axes: dict[str, Any],
                  feature_files: FeatureFiles | None = None, fused: bool = False) -> Config:
    """The validated config of one point, with the sweep's kernel step (``fused``: ``kernel_step``); an error names
    the axis (``grid.task.L``) or base field. ``feature_files``: the sweep's feature files, read once (a point
    rebuilt later gets the same numbers)."""
    overrides = [f"{k}={yaml_value(f'{_axis_group(spec, k)}.{k}', v)}" for k, v in axes.items()]
    try:
        # the base passed check_shape when the spec was read (validate_config), each value when parsed
        cfg = validate_config(apply_overrides(copied_along(base, overrides), overrides), feature_files,
                              shape_checked=True)
        return with_kernel_step(cfg, own_step(spec.overrides, axes), fused)
    except UserInputError as e:
        key = getattr(e, "field", None)
        where = f"{_axis_group(spec, key)}.{key}" if key in axes else f"base.{key}" if key else "spec"
        shown = ", ".join(f"{k}={_short(v)}" for k, v in axes.items())
        message = getattr(e, "message", str(e))
        raise ConfigError(where, f"{message} (at {shown})") from None


CountFn = Callable[[int], None]  # told the number of points of a spec (duplicates included) before they are made


def iter_axes(spec: SweepSpec, base: dict[str, Any], feature_files: FeatureFiles | None = None,
              on_count: CountFn | None = None) -> Iterator[dict[str, Any]]:
    """The axis values of every point, in order (first grid key outermost, seeds innermost),
    generated one at a time after the count check (``on_count`` is told the count first)."""
    base_cfg = validate_config(copy.deepcopy(base), feature_files)
    parts = [axis for _, axis in _axes(spec, base_cfg.seed)]
    if on_count is not None:
        on_count(math.prod(len(part) for part in parts))
    for combo in itertools.product(*parts):
        yield {k: v for part in combo for k, v in part.items()}


def expand(spec: SweepSpec, base: dict[str, Any], feature_files: FeatureFiles | None = None,
           on_count: CountFn | None = None, fused: bool = False) -> list[Point]:
    """Every point of the spec, each validated, in order, with the kernel step ``fused`` (``kernel_step``). Points
    with the same config hash are kept once. Only small records are kept (see ``Point``). Feature files are read
    once, into ``feature_files``, and every point (rebuilt later too) gets the numbers read then. ``on_count``: told
    the number of points first."""
    files: FeatureFiles = {} if feature_files is None else feature_files
    points: list[Point] = []
    with _collections_paused():
        _expand_into(points, spec, base, files, on_count, fused)
    return points


@contextlib.contextmanager
def _collections_paused() -> Iterator[None]:
    """Python's cyclic collector off meanwhile: validating points makes no cyclic garbage, and the configs kept
    (HELD_CONFIGS, ~90 objects each) made each full collection walk more of them: 0.3 s of a 10,000-point spec."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _expand_into(points: list[Point], spec: SweepSpec, base: dict[str, Any], files: FeatureFiles,
                 on_count: CountFn | None, fused: bool) -> None:
    """``expand``'s loop: the points appended to ``points``."""
    combos = list(iter_axes(spec, base, files, on_count))
    hashes: set[str] = set()
    groups: dict[tuple, tuple] = {}
    for axes, (cfg, h, name, seed, key) in zip(combos, _made(spec, base, files, fused, combos), strict=True):
        if h in hashes:
            continue
        hashes.add(h)
        keep = cfg is not None and len(points) < HELD_CONFIGS
        make = (lambda c=cfg: c) if keep else functools.partial(_point_config, spec, base, axes, files, fused)
        group = groups.setdefault(key, key)  # one tuple per group, shared by its points
        points.append(Point(len(points), axes, h, name, seed, make, group))


Made = tuple[Config | None, str, str, int, tuple]  # (the config or None, its hash, run name, seed, batch_group)


def _made(spec: SweepSpec, base: dict[str, Any], files: FeatureFiles, fused: bool,
          combos: list[dict[str, Any]]) -> list[Made]:
    """Each point of ``combos`` validated: by this process alone, or for a spec of PARALLEL_POINTS or more where
    this process may fork (``forked.single_threaded``), the later points by a forked helper at the same time (their
    configs not kept: rebuilt when their runs start), while this one loads the compiled step the points take
    (``batch.warm_fused_step``: the processes that train them are forked from this one) and makes the first points.
    Where the helper fails (a point that does not validate), its points are made here: the first error in spec
    order is raised, as without the helper."""
    def made(axes: dict[str, Any]) -> Made:
        cfg = _point_config(spec, base, axes, files, fused)
        h = cfg.config_hash()
        return cfg, h, run_name(axes, cfg, h), cfg.seed, batch_group(cfg)

    if len(combos) < PARALLEL_POINTS or not (fork_available() and single_threaded()):
        return [made(axes) for axes in combos]
    cut = int(len(combos) * (WARMING_SHARE if fused else HALF))
    helper = ForkedCall(lambda part: [made(axes)[1:] for axes in part], combos[cut:])
    try:
        mine = [made(combos[0])]
        if mine[0][0].engine.fused:  # the first point's step: compiled
            warm_fused_step([mine[0][0].engine.dtype])
        mine += [made(axes) for axes in combos[1:cut]]
        try:
            theirs: list[Made] = [(None, *record) for record in helper.result()]
        except Exception:  # noqa: BLE001 - made again here, where the first error is raised in order
            theirs = [made(axes) for axes in combos[cut:]]
    finally:
        helper.end()
    return mine + theirs


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
