"""Running an experiment's configs: through the sweep engine when it is available, writing each
run under ``<out>/runs/<group>/``, and reporting progress to a callback."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..api import Run, write_run
from ..batch import run_many
from ..config import Config, apply_overrides, load_config, validate_config
from .sizes import FULL, QUICK, Sizes

ProgressHook = Callable[[str, int, int], None]  # (label, done, total)


@dataclass
class Context:
    out: Path
    quick: bool
    seed: int = 0
    workers: int = 1
    progress: ProgressHook | None = None
    sizes: Sizes | None = None  # default: QUICK or FULL by ``quick``
    run_dirs: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.sizes is None:
            self.sizes = QUICK if self.quick else FULL

    def tick(self, label: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(label, done, total)


def base_config(overrides: list[str] | None = None, **sections) -> Config:
    """The quickstart setting (K = 5 orthonormal features, d = 5, N = 50, linear, L = 2, eta = 1)
    with overrides. Defined here in code so that reproduce does not depend on a file."""
    data = {
        "features": {"kind": "orthonormal", "K": 5, "d": 5},
        "prompt": {"N": 50},
        "task": {"kind": "linear", "L": 2.0},
        "engine": {"kind": "kernel", "draws": 256},
        "train": {"optimizer": "gd", "lr": 1.0, "steps": 20000, "eps": 1e-3, "log_every": 10},
    }
    for key, value in sections.items():
        data.setdefault(key, {}).update(value)
    return validate_config(apply_overrides(data, list(overrides or [])))


def with_overrides(cfg: Config, overrides: list[str]) -> Config:
    return cfg.with_overrides(overrides)


def run_group(ctx: Context, group: str, configs: list[Config], label: str | None = None) -> list[Run]:
    """Run configs (each with a unique ``name``) and write them under out/runs/<group>/<name>.

    Kernel-engine runs that share a shape are trained together as one tensor program
    (``batch.run_many``: identical numbers to one-by-one runs); with ``ctx.workers > 1`` the
    group goes through the Dask sweep engine instead."""
    label = label or group
    group_dir = ctx.out / "runs" / group
    total = len(configs)
    ctx.tick(label, 0, total)
    if ctx.workers > 1:
        results = _run_on_dask(ctx, group_dir, configs, label)
    else:
        results = run_many(configs, progress=lambda done, n: ctx.tick(label, done, n))
        for i, (cfg, r) in enumerate(zip(configs, results, strict=True)):
            write_run(r, group_dir / (cfg.name or f"run{i}"))
    ctx.run_dirs.extend(str(r.dir.relative_to(ctx.out)) for r in results if r.dir is not None)
    ctx.tick(label, total, total)
    return results


def _run_on_dask(ctx: Context, group_dir: Path, configs: list[Config], label: str) -> list[Run]:
    from ..api import load_run
    from ..sweep import run_configs

    index = run_configs(configs, group_dir, workers=ctx.workers,
                        progress=lambda done, failed, n: ctx.tick(label, done + failed, n))
    name_of = dict(zip(index["config_hash"], index["name"], strict=True))
    return [load_run(group_dir / "runs" / name_of[cfg.config_hash()]) for cfg in configs]


def rel_runs(ctx: Context, runs: list[Run]) -> list[str]:
    return [str(r.dir.relative_to(ctx.out)) for r in runs if r.dir is not None]


def experiment(*claim_ids: str):
    """Decorator for an experiment: records which claims it tests (so a failure can be reported
    against them) and sets each result's wall time and experiment name."""

    def wrap(fn):
        @functools.wraps(fn)
        def wrapper(ctx: Context):
            start = time.perf_counter()
            results = fn(ctx)
            for r in results:
                r.wall_s = round(time.perf_counter() - start, 2)
                r.experiment = r.experiment or fn.__name__
            return results

        wrapper.claims = list(claim_ids)
        return wrapper

    return wrap


__all__ = ["Context", "base_config", "load_config", "rel_runs", "run_group", "experiment", "with_overrides"]
