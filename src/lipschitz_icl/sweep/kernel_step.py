"""The kernel step of a sweep's points: the compiled step (``engine.fused: true``, numba) or the torch step.

A spec's ``fused:`` (``sweep run --fused / --no-fused``, ``run_sweep(fused=...)``) chooses it for every point whose
config allows it (``KernelEngine.fusable``: kernel engine, gd or sgd in S space, CPU, drawn or mean-field counts);
by default the compiled step where numba can be imported and the runs train on this machine, as ``reproduce`` does
(the torch step on a scheduler's or a cluster's workers). A point whose spec sets ``engine.fused`` (an override or an
axis) keeps it; a base config's value does not count (``own_step``). The step enters each point's config, hence its
config hash: a sweep directory keeps the step it was made with when it is run again without a choice
(``with_dir_step``), so that its points keep their hashes and rows.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..config import Config
from ..engines.kernel import KernelEngine
from ..errors import UserInputError
from ..numba_support import numba_problem, resolve_fused

if TYPE_CHECKING:
    from .spec import Sweep

SPEC_FILE = "sweep.yaml"  # the spec a sweep directory keeps, its base inlined (Sweep.resolved_yaml)


def resolve_step(asked: bool | None, spec_fused: bool | None, local: bool = True, option: str = "fused"
                 ) -> tuple[bool, bool]:
    """(the compiled step or not, whether it was chosen): ``asked`` (the caller's ``option``), else the spec's
    ``fused:``, else, not chosen, the compiled step where numba can be imported and the runs train on this machine
    (``local``; a Dask scheduler's or a cluster's workers may lack numba: the torch step). Choosing the compiled
    step without numba, or anything but true, false or None, is one line."""
    if asked is not None and not isinstance(asked, bool):
        raise UserInputError(f"{option}: {asked!r} is not allowed (allowed: True, False or None)")
    if asked is not None:
        return resolve_fused(asked, option, "--no-fused" if option.startswith("--") else f"{option}=False"), True
    if spec_fused is not None:
        return resolve_fused(spec_fused, "fused", "fused: false"), True
    return local and resolve_fused(None), False


def own_step(overrides: list[str], axes: dict[str, Any]) -> bool:
    """Whether a point's spec sets ``engine.fused`` itself (an override or an axis). A base config's value does
    not count: one printed by ``run --print-config`` holds every field, ``engine.fused: false`` among them."""
    return "engine.fused" in axes or any(o.split("=", 1)[0].strip() == "engine.fused" for o in overrides)


def with_kernel_step(cfg: Config, own: bool, fused: bool) -> Config:
    """``cfg`` (a point's validated config) with ``engine.fused: true`` when the sweep takes the compiled step, the
    point allows it and its spec sets no ``engine.fused`` of its own (``own``)."""
    if fused and not own and not cfg.engine.fused and KernelEngine.fusable(cfg):
        cfg.engine.fused = True
    return cfg


def stored_spec(sweep_dir: Path) -> dict[str, Any] | None:
    """The spec a sweep directory keeps (sweep.yaml), or None when it has no readable one."""
    try:
        data = yaml.safe_load((sweep_dir / SPEC_FILE).read_text())
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def made_with(stored: dict[str, Any] | None, name: str) -> bool | None:
    """The step sweep ``name`` was run with in a directory, from the spec the directory keeps (``fused:``; a spec
    written before that field: false, the only step sweeps took then), or None when it keeps no readable spec of
    that sweep (another sweep's folder is refused later, by ``check_sweep_dir``)."""
    return None if stored is None or stored.get("name") != name else stored.get("fused") is True


def with_dir_step(sweep: Sweep, sweep_dir: Path) -> Sweep:
    """``sweep`` with the kernel step ``sweep_dir`` was made with, when neither its caller nor its spec chose one:
    run again, a sweep directory keeps its points' config hashes and rows. One made with the compiled step where
    numba is gone is refused, unless none of its points took that step."""
    made = None if sweep.step_chosen else made_with(stored_spec(sweep_dir), sweep.name)
    if made is None:
        return sweep
    if made == sweep.fused:  # chosen by the directory now: a second call (the CLI's, then run_sweep's) reads nothing
        return dataclasses.replace(sweep, step_chosen=True)
    kept = sweep.with_step(made)
    problem = numba_problem() if made else None
    if problem is not None and [p.config_hash for p in kept.points] != [p.config_hash for p in sweep.points]:
        raise UserInputError(f"{sweep_dir}: made with the compiled kernel step, which {problem}; allowed: "
                             "--no-fused (its points trained again with the torch step, beside the first)")
    return kept
