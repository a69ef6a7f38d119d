"""A sweep spec's points: each one's axis values, validated config, hash and run name (``expand``), by this process
alone or, for a large spec where this process may fork, with a forked helper validating the later points meanwhile.
The points keep small records; the configs of the first HELD_CONFIGS are kept too (see ``Point``)."""

from __future__ import annotations

import contextlib
import copy
import functools
import gc
import itertools
import math
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..batch import warm_fused_step
from ..config import Config, FeatureFiles, _short, apply_overrides, validate_config
from ..config_io import copied_along
from ..engines import batchable, stackable
from ..errors import ConfigError, UserInputError
from ..forked import ForkedCall, fork_available, single_threaded
from .kernel_step import own_step, with_kernel_step
from .point_text import run_name, yaml_value

if TYPE_CHECKING:
    from .spec import SweepSpec

MAX_POINTS = 100_000  # refuse specs that expand to more runs than this (counted before expanding)
# points whose validated config is kept (nothing in the toolkit changes a Config): ~7 KB each, 70 MB for 10,000; the
# processes forked to train the batches inherit them instead of validating each point again (~40 us a point)
HELD_CONFIGS = 10_000
PARALLEL_POINTS = 4096  # specs of this many points or more are expanded by two processes where this one may fork
HALF, WARMING_SHARE = 0.5, 0.2  # of the points, those this process makes (while loading the compiled step: fewer)


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
    settings of ``Engine.batch_key`` (of runs that take their steps together: ``Engine.stackable``); ``("alone",)``
    for a point that can be neither. Points of one group whose engines still differ (Sigma diagonal or not, say)
    are split again by ``batch.plan_groups`` on the worker."""
    e, f = cfg.engine, cfg.features
    if stackable(cfg):  # runs that take their steps together: one shape and one task evaluation (``stack_key``)
        return ("stacked", e.model_dump_json(), cfg.prompt.model_dump_json(), cfg.model.kind, f.kind, f.d,
                cfg.task.model_dump_json(exclude={"label_noise"}), cfg.task.label_noise > 0)
    if not batchable(cfg):
        return ("alone",)
    return (e.kind, e.model_dump_json(), f.kind, f.K, cfg.task.kind, cfg.task.label_noise > 0, cfg.train.optimizer)


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


class PointConfigs:
    """``_point_config`` of a spec's points, made cheaply for points that differ from one made already in their seed
    only (a ``seeds:`` axis): that config, its template (validated once per other axis values, the last TEMPLATES
    kept), with the point's seed (``model_copy``: ~4 us instead of ~45; the copies share the template's sections,
    and nothing changes a Config once made). A seed that Config's own rule refuses takes the whole validation, which
    raises its error as before. Pickled without its templates."""

    TEMPLATES = 256

    def __init__(self, spec: SweepSpec, base: dict[str, Any], files: FeatureFiles, fused: bool) -> None:
        self.spec, self.base, self.files, self.fused = spec, base, files, fused
        self._templates: OrderedDict[tuple, Config] = OrderedDict()
        self._seeds: dict[int, bool] = {}  # seed -> whether Config takes it

    def __call__(self, axes: dict[str, Any]) -> Config:
        seed = axes.get("seed")
        if type(seed) is not int or not self._seed_taken(seed):
            return _point_config(self.spec, self.base, axes, self.files, self.fused)
        key = tuple((k, type(v), repr(v)) for k, v in axes.items() if k != "seed")
        template = self._templates.get(key)
        if template is None:
            template = self._templates[key] = _point_config(self.spec, self.base, axes, self.files, self.fused)
            if len(self._templates) > self.TEMPLATES:
                self._templates.popitem(last=False)
        else:
            self._templates.move_to_end(key)
        return template if template.seed == seed else template.model_copy(update={"seed": seed})

    def _seed_taken(self, seed: int) -> bool:
        if seed not in self._seeds:
            try:
                Config.model_validate({"seed": seed})
                self._seeds[seed] = True
            except ValidationError:
                self._seeds[seed] = False
        return self._seeds[seed]

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_templates": OrderedDict(), "_seeds": {}}


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
    configs = PointConfigs(spec, base, files, fused)
    for axes, (cfg, h, name, seed, key) in zip(combos, _made(configs, combos), strict=True):
        if h in hashes:
            continue
        hashes.add(h)
        keep = cfg is not None and len(points) < HELD_CONFIGS
        make = (lambda c=cfg: c) if keep else functools.partial(configs, axes)
        group = groups.setdefault(key, key)  # one tuple per group, shared by its points
        points.append(Point(len(points), axes, h, name, seed, make, group))


Made = tuple[Config | None, str, str, int, tuple]  # (the config or None, its hash, run name, seed, batch_group)


def _made(configs: PointConfigs, combos: list[dict[str, Any]]) -> list[Made]:
    """Each point of ``combos`` validated: by this process alone, or for a spec of PARALLEL_POINTS or more where
    this process may fork (``forked.single_threaded``), the later points by a forked helper at the same time (their
    configs not kept: rebuilt when their runs start), while this one loads the compiled step the points take
    (``batch.warm_fused_step``: the processes that train them are forked from this one) and makes the first points.
    Where the helper fails (a point that does not validate), its points are made here: the first error in spec
    order is raised, as without the helper."""
    def made(i: int) -> Made:  # the config itself only where it may be kept: a large spec holds small records
        cfg = configs(combos[i])
        h = cfg.config_hash()
        return cfg if i < HELD_CONFIGS else None, h, run_name(combos[i], cfg, h), cfg.seed, batch_group(cfg)

    if len(combos) < PARALLEL_POINTS or not (fork_available() and single_threaded()):
        return [made(i) for i in range(len(combos))]
    cut = int(len(combos) * (WARMING_SHARE if configs.fused else HALF))
    helper = ForkedCall(lambda part: [made(i)[1:] for i in part], range(cut, len(combos)))
    try:
        mine = [made(0)]
        first = mine[0][0]  # kept: HELD_CONFIGS > 0
        if first is not None and first.engine.fused:  # the first point's step: compiled
            warm_fused_step([first.engine.dtype])
        mine += [made(i) for i in range(1, cut)]
        try:
            theirs: list[Made] = [(None, *record) for record in helper.result()]
        except Exception:  # noqa: BLE001 - made again here, where the first error is raised in order
            theirs = [made(i) for i in range(cut, len(combos))]
    finally:
        helper.end()
    return mine + theirs
