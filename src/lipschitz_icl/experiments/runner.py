"""Running an experiment's configs: through the sweep engine when it is available, writing each
run under ``<out>/runs/<group>/``, and reporting progress to a callback. Also the base configs
the experiments start from and the wrapper that runs one with a single torch thread."""

from __future__ import annotations

import functools
import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .. import NUMERICS_REVISION, __version__
from ..api import Run, load_run, write_run
from ..batch import RunsInterrupted, run_many
from ..config import Config, apply_overrides, load_config, validate_config
from ..engines import batchable
from ..engines.kernel import KernelEngine
from ..errors import UserInputError
from ..forked import fork_available
from ..problem import build_problem
from ..store import SUMMARY_FILE, atomic_write_text, read_summary
from ..sweep import load_runs, run_configs
from ..theory import flat_time_scale, theory_of
from ..threads import single_threaded_torch
from ..tracking import write_events
from .lanes import run_in_lanes
from .sizes import Sizes, sizes

ProgressHook = Callable[[str, int, int], None]  # (label, done, total)
HELD_ROWS = 2**22  # a written run of more tidy rows (~200 MB) is read back from its directory when asked for


@dataclass
class Context:
    out: Path
    quick: bool
    seed: int = 0
    workers: int = 1
    progress: ProgressHook | None = None
    jobs: int = 1  # experiments run at a time, each in a forked process (checkpoint.side_by_side; 1: here), and the
    # forked processes a group's unbatched runs share (lanes.run_in_lanes)
    sizes: Sizes | None = None  # default: QUICK or FULL by ``quick``
    run_dirs: list[str] = field(default_factory=list)
    fused: bool = False  # kernel-engine runs that allow it take the compiled step (engine.fused; numba), and
    # gd_layers on the exact engine its compiled loss and gradient (ExactEngine.compiled)
    resume: bool = False  # reuse the finished runs already in out/runs (same config hash, version, numerics)
    exact_counts: bool = False  # base configs take engine.counts=exact (a refinement: no count draws)
    tracker: str | None = None  # --tracker: each run written under out/runs gets its event files (tracking.py)
    reused_runs: int = 0  # runs reused so far (resume), for the log
    trained_runs: int = 0  # runs trained and written so far

    def __post_init__(self) -> None:
        if self.sizes is None:
            self.sizes = sizes(self.quick)

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

    Each run is written the moment it stops, so an interrupt (or a kill) keeps every finished run;
    with ``ctx.resume`` a run directory that already holds a finished run of the same config (config
    hash, package version) is reused instead of trained. Kernel-engine runs that share a shape are
    trained together as one tensor program (``batch.run_many``: identical numbers to one-by-one runs);
    with ``ctx.workers > 1`` the runs go through the Dask sweep engine instead and are written in the
    same layout; runs that no batch takes (the sampled engine's, the neural models') train in ``ctx.jobs`` forked
    processes when that is above 1 (``lanes.run_in_lanes``), with the same numbers. On Ctrl-C the runs that ended
    (an interrupted one with status ``interrupted``) are written before the KeyboardInterrupt goes on."""
    label = label or group
    if ctx.fused:
        configs = [with_fused_step(c) for c in configs]
    group_dir = ctx.out / "runs" / group
    total = len(configs)
    names = [cfg.name or f"run{i}" for i, cfg in enumerate(configs)]
    results: list[Run | None] = [_reusable(group_dir / n, c) if ctx.resume else None for n, c in zip(names, configs,
                                                                                                    strict=True)]
    ctx.reused_runs += sum(r is not None for r in results)
    todo = [i for i, r in enumerate(results) if r is None]
    ctx.tick(label, total - len(todo), total)

    def finished(j: int, run: Run | None) -> None:  # j indexes todo
        if run is None:
            return
        i = todo[j]
        results[i] = run
        write_run(run, group_dir / names[i])
        if ctx.tracker is not None:  # the run's metrics reach this process when it ends: written then
            write_events(ctx.tracker, run.dir, run.config.to_yaml(), run.table())
        _let_go_if_long(run)
        ctx.trained_runs += run.summary.get("status") != "interrupted"
        ctx.tick(label, sum(r is not None for r in results), total)

    pending = [configs[i] for i in todo]
    try:
        if ctx.workers > 1 and pending:
            for j, run in enumerate(_run_on_dask(ctx, group_dir, pending, label)):
                finished(j, run)
        elif ctx.jobs > 1 and len(pending) > 1 and fork_available() and not any(map(batchable, pending)):
            run_in_lanes(pending, ctx.jobs, finished)  # runs trained one by one anyway: over the cores (lanes.py)
        elif pending:
            for j, run in enumerate(run_many(pending, on_run=finished)):
                if results[todo[j]] is None:  # a run_many that reports only at the end
                    finished(j, run)
    except RunsInterrupted as stop:  # keep what ended before the interrupt (run_many wrote most already)
        for j, run in enumerate(stop.runs):
            if run is not None and results[todo[j]] is None:
                finished(j, run)
        raise
    lost = [n for r, n in zip(results, names, strict=True) if r is None]
    if lost:  # a sweep point that left no run directory: nothing to judge a claim by
        raise RuntimeError(f"runs of {group} left no result: {', '.join(lost[:5])}")
    ctx.run_dirs.extend(str((group_dir / n).relative_to(ctx.out)) for n in names)
    ctx.tick(label, total, total)
    for r, n in zip(results, names, strict=True):
        r.dir = group_dir / n
    return results  # type: ignore[return-value]


FINISHED_STATUSES = ("converged", "trivial", "budget", "diverged")  # a run that ended normally


def _let_go_if_long(run: Run) -> Run:
    """``run`` (written), its metrics read back from its directory when asked for if it has more than HELD_ROWS rows."""
    if run.table().num_rows > HELD_ROWS:
        run.keep_metrics_on_disk()
    return run


def _reusable(run_dir: Path, cfg: Config) -> Run | None:
    """The finished run in ``run_dir`` when it is ``cfg``'s (same config hash, package version and numerics
    revision), else None (missing, interrupted, failed, from another config or version: it is trained again)."""
    try:  # read_summary: a file nested too deeply or of ill-typed fields is bad input, then trained again
        summary = read_summary(run_dir) if (run_dir / SUMMARY_FILE).is_file() else {}
        versions = summary.get("versions", {})
        if (summary.get("status") not in FINISHED_STATUSES or summary.get("config_hash") != cfg.config_hash()
                or (versions.get("lipschitz_icl"), versions.get("numerics")) != (__version__, str(NUMERICS_REVISION))):
            return None
        return _let_go_if_long(load_run(run_dir))  # as when it was trained
    except (OSError, ValueError, AttributeError, TypeError, UserInputError):
        return None


def _run_on_dask(ctx: Context, group_dir: Path, configs: list[Config], label: str) -> list[Run]:
    """Train ``configs`` through the Dask sweep engine in a scratch sweep beside the group's runs, and
    return them as Runs (the caller writes them in the group's own layout; every recorded row: ``curves="full"``)."""
    scratch = group_dir / ".sweep"
    shutil.rmtree(scratch, ignore_errors=True)  # a previous attempt's: its finished runs were written already
    try:
        run_configs(configs, scratch, workers=ctx.workers, curves="full",
                    progress=lambda done, failed, n: ctx.tick(label, done + failed, n))
    except KeyboardInterrupt:
        raise RunsInterrupted(_sweep_runs(scratch, configs, finished_only=True)) from None
    runs = _sweep_runs(scratch, configs, finished_only=False)
    shutil.rmtree(scratch, ignore_errors=True)
    return runs


def _sweep_runs(scratch: Path, configs: list[Config], finished_only: bool) -> list[Run | None]:
    """The runs of a scratch sweep in the order of ``configs`` (a failed point's too, unless
    ``finished_only``, which also leaves out runs of another version); None for one it did not store."""
    try:
        runs = load_runs(scratch, finished_only=finished_only)
    except UserInputError:
        return [None] * len(configs)
    by_hash = {r.summary.get("config_hash"): r for r in runs}
    if finished_only:
        by_hash = {h: r for h, r in by_hash.items()
                   if r.summary.get("versions", {}).get("lipschitz_icl") == __version__}
    return [by_hash.get(c.config_hash()) for c in configs]


def with_fused_step(cfg: Config) -> Config:
    """The config with ``engine.fused: true`` where the kernel engine allows it (within 1e-12 of
    the unfused step, docs/PERFORMANCE.md), else unchanged."""
    return cfg.with_overrides(["engine.fused=true"]) if KernelEngine.fusable(cfg) else cfg


def write_data(ctx: Context, name: str, frame: pd.DataFrame) -> str:
    """Write an experiment's own table (what it trained outside the run engine) as out/data/NAME.csv
    and return its path relative to the output directory, for ``ClaimResult.data``."""
    path = ctx.out / "data" / f"{name}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, frame.to_csv(index=False))
    return str(path.relative_to(ctx.out))


def rel_runs(ctx: Context, runs: list[Run]) -> list[str]:
    return [str(r.dir.relative_to(ctx.out)) for r in runs if r.dir is not None]


def paper_base(ctx: Context, *extra: str) -> Config:
    """The quickstart setting at the context's sizes (draws B, step budget, logging) and seed: the
    starting point of the paper, write-up and linear suites."""
    S = ctx.sizes
    return base_config([f"engine.draws={S.draws}", f"train.steps={S.budget}", f"train.log_every={S.log_every}",
                        f"seed={ctx.seed}", *_counts(ctx), *extra])


def _counts(ctx: Context) -> list[str]:
    """The counts law of the context's base configs: exact in a refinement that asks for it, else draws."""
    return ["engine.counts=exact"] if ctx.exact_counts else []


def kernel_base(ctx: Context, *extra: str) -> Config:
    """The quickstart setting on the kernel engine (K = 5 orthonormal, d = 5, N = 50, GD) at the
    extensions' sizes."""
    S = ctx.sizes
    return base_config([f"engine.draws={S.draws}", f"train.steps={S.ext_kernel_steps}",
                        f"train.log_every={S.ext_log_every}", f"task.kernel_samples={S.kernel_samples}",
                        f"eval.functions={S.test}", f"seed={ctx.seed}", *_counts(ctx), *extra])


def sampled_base(ctx: Context, *extra: str) -> Config:
    """A small sampled-engine setting: K = 4 orthonormal features in d = 4, N = 16, linear L = 2."""
    S = ctx.sizes
    return base_config([
        "features.K=4", "features.d=4", "prompt.N=16", "engine.kind=sampled", f"engine.batch={S.batch}",
        f"train.steps={S.sampled_steps}", f"train.log_every={S.ext_log_every}", f"eval.functions={S.test}",
        f"task.kernel_samples={S.kernel_samples}", f"seed={ctx.seed}", *extra,
    ])


# The rescaled time s = eta L^2 t the quickstart trajectory (K = 5 orthonormal, linear, B = 32) needs to bring
# its loss to a relative eps, read off the trainer's exact T_rel (tests/test_budgets.py re-measures it). Under
# f = L g every (eta, L) of that geometry follows this one trajectory in s (docs/CLAIMS_METHOD.md).
QUICKSTART_S = {10**-1.5: 828.0, 1e-2: 1908.0, 1e-3: 14044.0, 1e-4: 127680.0}
QUICKSTART_ETA_L2 = 4.0  # eta L^2 of the quickstart (eta = 1, L = 2)
BUDGET_MARGIN = 3.0  # a run's budget is this many times the time its geometry's scale predicts


def rescaled_time_to(eps_rel: float) -> float:
    """The quickstart's rescaled time s to a relative eps, log-log interpolated in QUICKSTART_S
    (extrapolated with the end segments' slopes)."""
    xs = sorted(QUICKSTART_S, reverse=True)
    lx, ly = np.log(xs), np.log([QUICKSTART_S[x] for x in xs])
    e = math.log(eps_rel)
    i = int(np.clip(np.searchsorted(-lx, -e), 1, len(xs) - 1))
    slope = (ly[i] - ly[i - 1]) / (lx[i] - lx[i - 1])
    return float(math.exp(ly[i - 1] + slope * (e - lx[i - 1])))


def flat_scale_of(cfg: Config, eps_rel: float) -> float:
    """T_f = K log(K/eps) / (eta delta^2 L^2 Delta^2) of the config (theory.flat_time_scale)."""
    problem = build_problem(cfg)
    th = theory_of(problem)
    return flat_time_scale(problem.features.K, eps_rel, cfg.train.lr, th.delta, th.L, th.Delta)


def budget_steps(cfg: Config, eps_rel: float, cap: int, margin: float = BUDGET_MARGIN) -> int:
    """A run's step budget in the theory's time scale: margin x the steps the quickstart needs to
    reach eps_rel in rescaled time s = eta L^2 t, times the flat-regime scale T_f of the run's
    setting relative to the quickstart's (so a run of the quickstart geometry gets margin x s(eps) /
    (eta L^2), and a slower geometry proportionally more), capped at ``cap``. A run that does not
    reach its target within it is censored (``censored_runs``)."""
    ref = base_config([f"engine.draws={cfg.engine.draws}"])
    ratio = flat_scale_of(cfg, eps_rel) / flat_scale_of(ref, eps_rel)
    steps = margin * rescaled_time_to(eps_rel) / QUICKSTART_ETA_L2 * ratio
    return int(max(1, math.ceil(min(cap, steps))))  # a degenerate class (delta = 0) has T_f = inf: the cap


def with_budget(cfg: Config, eps_rel: float, cap: int, margin: float = BUDGET_MARGIN) -> Config:
    """The config with its budget from ``budget_steps`` and its target loss eps_rel x the initial loss."""
    steps = budget_steps(cfg, eps_rel, cap, margin)
    return with_overrides(cfg, ["train.eps_mode=relative", f"train.eps={eps_rel:g}", f"train.steps={steps}"])


def censored_runs(runs: list[Run], event: str = "T_eps") -> list[str]:
    """Names of the runs whose ``event`` (a summary field: T_eps, T_1) was not reached."""
    return [r.config.name or "" for r in runs if r.summary.get(event) is None]


def grid(values: list[float], n: int) -> list[float]:
    """n values spread over ``values`` (its ends always included)."""
    if n >= len(values):
        return list(values)
    idx = np.unique(np.round(np.linspace(0, len(values) - 1, max(n, 2))).astype(int))
    return [values[i] for i in idx]


def single_threaded(fn):
    """Run an experiment with one torch thread (its problems are tiny)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with single_threaded_torch():
            return fn(*args, **kwargs)

    return wrapper


__all__ = [
    "BUDGET_MARGIN", "Context", "base_config", "budget_steps", "censored_runs", "flat_scale_of", "grid",
    "kernel_base", "load_config", "paper_base", "rel_runs", "rescaled_time_to", "run_group", "sampled_base",
    "single_threaded", "with_budget", "with_fused_step", "with_overrides", "write_data",
]
