"""The kernel step of a sweep's points: the compiled step (``engine.fused: true``, numba) or the torch step.

A spec's ``fused:`` (``sweep run --fused / --no-fused``, ``run_sweep(fused=...)``) chooses it for every point whose
config allows it (``KernelEngine.fusable``: kernel engine, gd or sgd in S space, CPU, drawn or mean-field counts);
by default the compiled step where numba can be imported, as ``reproduce`` does. A point whose own config sets
``engine.fused`` (its base, an override or an axis) keeps it. The step enters each point's config, hence its config
hash: a sweep directory keeps the step it was made with when it is run again without a choice (``made_with``), so
that its points keep their hashes and rows.
"""

from __future__ import annotations

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


def resolve_step(asked: bool | None, spec_fused: bool | None) -> tuple[bool, bool]:
    """(the compiled step or not, whether it was chosen): ``asked`` (the caller's), else the spec's ``fused:``,
    else the compiled step where numba can be imported (not chosen). Choosing it without numba is one line."""
    if asked is not None:
        return resolve_fused(asked, "--fused", "--no-fused"), True
    if spec_fused is not None:
        return resolve_fused(spec_fused, "fused", "fused: false"), True
    return resolve_fused(None), False


def with_kernel_step(cfg: Config, base: dict[str, Any], axes: dict[str, Any], fused: bool) -> Config:
    """``cfg`` (a point's validated config, of ``base`` and ``axes``) with ``engine.fused: true`` when the sweep
    takes the compiled step, the point allows it and sets no ``engine.fused`` of its own."""
    own = "engine.fused" in axes or "fused" in (base.get("engine") or {})
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


def made_with(stored: dict[str, Any] | None) -> bool | None:
    """The step a sweep directory was run with, from the spec it keeps (``fused:``; a spec written before that
    field: false, the only step sweeps took then), or None when it keeps no readable spec."""
    return None if stored is None else stored.get("fused") is True


def with_dir_step(sweep: Sweep, sweep_dir: Path) -> Sweep:
    """``sweep`` with the kernel step ``sweep_dir`` was made with, when neither its caller nor its spec chose one:
    run again, a sweep directory keeps its points' config hashes and rows."""
    made = None if sweep.step_chosen else made_with(stored_spec(sweep_dir))
    if made is None or made == sweep.fused:
        return sweep
    problem = numba_problem() if made else None
    if problem is not None:
        raise UserInputError(f"{sweep_dir}: made with the compiled kernel step, which {problem}; allowed: "
                             "--no-fused (its points trained again with the torch step, beside the first)")
    return sweep.with_step(made)
