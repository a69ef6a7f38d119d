"""Running a sweep's points: in-process, in processes forked from this one (``forked_batches``; an embedded Dask
``LocalCluster`` where the platform cannot fork or this process runs other threads), on a Dask cluster at a
scheduler address, or on Dask workers in SLURM / PBS jobs (``jobqueue``).

Workers compute and return results (the summary and the metrics as parquet bytes); only this
driver writes run directories (atomically, through ``store.write_run_files``) and the index,
as results arrive. A killed sweep therefore leaves whole files and whole index rows only, and
running it again picks up the runs whose rows are not finished.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import NUMERICS_REVISION
from ..config import Config
from ..errors import UserInputError
from ..forked import fork_available, not_inherited, single_threaded
from ..store import atomic_write_text
from .dask_backend import close_client, open_local_cluster, run_on_dask, warm_fork_server
from .forked_batches import run_forked_batches
from .index import FINISHED, INDEX_FILE, RUNS_DIR, Index, load_index
from .jobqueue import ClusterPlan, checked_plan, connect
from .kernel_step import SPEC_FILE, resolve_step, stored_spec, with_dir_step
from .local import flush_every, run_in_process
from .planning import DEFAULT_BATCH, MAX_BATCH, plan_batches
from .results import RESULTS_DIR, check_curves, remove_unnamed
from .spec import Point, Sweep, load_sweep
from .storing import BatchStore, ProgressFn
from .worker import Keep, failed_summary

if TYPE_CHECKING:
    import pandas as pd

NUMERICS_FILE = "numerics.txt"  # the NUMERICS_REVISION the sweep's finished rows were computed under
LOCK_FILE = ".lock"

def default_workers() -> int:
    """One worker per core this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# --------------------------------------------------------------------------- backends


def _failed_result(point: Point, error: str) -> dict[str, Any]:
    data = point.config.model_dump(mode="json")
    return {"summary": failed_summary(data, error), "metrics": None, "params": None, "elapsed_s": None}


# --------------------------------------------------------------------------- the driver


@contextlib.contextmanager
def _exclusive(sweep_dir: Path) -> Iterator[None]:
    """One driver per sweep directory (an advisory lock on ``.lock``; none where fcntl is missing)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(sweep_dir / LOCK_FILE, "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise UserInputError(f"{sweep_dir}: another sweep is writing to this directory") from None
        with not_inherited(fh.fileno()):  # a forked batch's process would hold the lock until it ends
            yield


def is_running(sweep_dir: str | Path) -> bool:
    """Whether a sweep driver holds the directory's lock right now."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return False
    lock = Path(sweep_dir) / LOCK_FILE
    if not lock.is_file():
        return False
    with open(lock) as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False


def _remove_stale_temp_files(sweep_dir: Path) -> None:
    """Temporary files of atomic writes that a killed driver left behind (never a finished file)."""
    for tmp in itertools.chain(sweep_dir.glob(".*.tmp"), sweep_dir.glob(f"{RUNS_DIR}/*/.*.tmp")):
        tmp.unlink(missing_ok=True)


def _select(points: Sequence[Point], statuses: dict[str, str], retry_failed: bool, force: bool) -> list[Point]:
    def wanted(status: str | None) -> bool:
        if force or status is None:
            return True
        if status == "failed":
            return retry_failed
        return status not in FINISHED  # pending, interrupted

    return [p for p in points if wanted(statuses.get(p.config_hash))]


def _spec_name(sweep_dir: Path) -> str | None:
    data = stored_spec(sweep_dir)
    return None if data is None else data.get("name")


def check_sweep_dir(sweep_dir: Path, name: str | None, force: bool) -> None:
    """Refuse an output folder that holds anything but this sweep (a sweep named ``name``; for a
    list of configs, any sweep without a spec), unless ``force``: a sweep never writes over the
    user's own files."""
    if sweep_dir.exists() and not sweep_dir.is_dir():
        raise UserInputError(f"--out {sweep_dir}: exists and is not a directory")
    if force or not sweep_dir.is_dir() or not any(sweep_dir.iterdir()):
        return
    if (sweep_dir / INDEX_FILE).is_file() and (_spec_name(sweep_dir) == name or _killed_at_start(sweep_dir)):
        return
    what = f"a sweep named {name}" if name else "a sweep of configs"
    raise UserInputError(f"--out {sweep_dir}: holds files that are not {what} (choose an empty or new folder, "
                         "or pass --force to write into it)")


def _killed_at_start(sweep_dir: Path) -> bool:
    """A sweep killed before it wrote sweep.yaml: only its lock, its index and an empty runs/ (a spec is
    written before any run starts), so the next sweep may take the folder over."""
    sweep_files = {LOCK_FILE, INDEX_FILE, f"{INDEX_FILE}-wal", f"{INDEX_FILE}-shm", f"{INDEX_FILE}-journal", RUNS_DIR,
                   RESULTS_DIR}
    runs = sweep_dir / RUNS_DIR
    return (not (sweep_dir / SPEC_FILE).exists() and {p.name for p in sweep_dir.iterdir()} <= sweep_files
            and (not runs.exists() or (runs.is_dir() and not any(runs.iterdir()))))


def execute_points(
    points: Sequence[Point],
    out: str | Path,
    workers: int | None = None,
    scheduler: str | None = None,
    retry_failed: bool = False,
    force: bool = False,
    progress: ProgressFn | None = None,
    spec_yaml: str | None = None,
    name: str | None = None,
    keep: Keep = Keep(),
    batch: int | None = DEFAULT_BATCH,
    run_dirs: bool = False,
    plan: ClusterPlan | None = None,
    rows: bool = True,
) -> pd.DataFrame | None:
    """Run the points that have no finished row in ``out``'s index; return their index rows (``rows`` False:
    None, and pandas is never imported; ``point_statuses`` tells the points' statuses).

    ``--workers 1`` (and no scheduler or cluster ``plan``) runs points in this process; otherwise every point
    runs in another process, never here: on this machine each batch in a process forked from this one,
    ``workers`` at a time (``forked_batches``; the embedded Dask cluster where it cannot, ``fork_safe``); on
    the Dask workers of a ``scheduler``; with a ``plan`` on workers in SLURM / PBS jobs submitted once there are
    runs to do. ``workers`` None: one per core, or this process for a sweep that is one batch. Compatible points
    run ``batch`` at a time (``plan_batches``). A ``scheduler`` is reached (a ``plan``'s scheduler started) before
    anything is written. Results are stored by batch (``results``), or with ``run_dirs`` in one directory per run;
    of each run what ``keep`` says (its params or not, its curves in summary or in full)."""
    sweep_dir = Path(out)
    chosen, workers = _checked_sizes(workers, batch)
    every = flush_every()  # a bad LIPSCHITZ_ICL_FLUSH_S is refused before anything is written
    check_curves(keep.curves)
    check_sweep_dir(sweep_dir, name, force)
    client, cluster = connect(scheduler, plan)
    try:
        try:
            (sweep_dir / RUNS_DIR if run_dirs else sweep_dir).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserInputError(f"{sweep_dir}: cannot create the sweep directory ({e.strerror})") from None
        with _exclusive(sweep_dir), Index(sweep_dir) as index, _heap_frozen():
            todo = _register(sweep_dir, index, points, spec_yaml, retry_failed, force)
            recorder = BatchStore(sweep_dir, index, len(todo), progress, run_dirs, keep.curves)
            if progress is not None:
                progress(0, 0, len(todo))
            # one batch (never more points than a batch holds): trained in this process unless --workers says else
            one = workers == 1 or chosen and len(todo) <= max(batch or 0, MAX_BATCH)
            alone = plan_batches(todo, batch) if client is None and one else None
            if alone is not None and (workers == 1 or len(alone) == 1):  # one batch: a second process costs
                run_in_process(alone, recorder, keep, every, not run_dirs, recorder.refresh)  # more than it saves
            elif todo and client is None and plan is None and fork_safe():  # this machine: forked processes
                run_forked_batches(plan_batches(todo, batch, workers), recorder, _failed_result, keep, workers,
                                   not run_dirs, recorder.refresh)
            elif todo:
                if plan is None and client is None:
                    client, cluster = open_local_cluster(min(workers, len(todo)))
                _on_dask(client, cluster, plan, todo, batch, recorder, keep, encode=not run_dirs)
            remove_unnamed(sweep_dir, index.results_files())  # files of runs trained again (--force, --retry-failed)
    finally:
        if client is not None:
            close_client(client, cluster)
    return _rows_of(sweep_dir, points) if rows else None


def _checked_sizes(workers: int | None, batch: int | None) -> tuple[bool, int]:
    """(whether the number of workers is the default, that number); a bad ``--workers`` or ``--batch``: one line."""
    chosen, workers = workers is None, default_workers() if workers is None else workers
    if workers < 1:
        raise UserInputError(f"--workers must be >= 1 (got {workers})")
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        raise UserInputError(f"--batch must be an integer >= 1 (got {batch!r})")
    return chosen, workers


def point_statuses(sweep_dir: str | Path, points: Sequence[Point]) -> list[str]:
    """The status of each point in the index of ``sweep_dir``, in order (``pending`` for a point it lacks): what the
    command line reports of a sweep it ran, read without building the rows of ``load_index`` (a column holding
    values of another type is refused, as there)."""
    with Index(sweep_dir) as index:
        index.check_types()
        statuses = index.statuses()
    return [statuses.get(p.config_hash, "pending") for p in points]


@contextlib.contextmanager
def _heap_frozen() -> Iterator[None]:
    """What exists now (the points, their configs: ~90 objects each) out of Python's cyclic collections until the
    block ends (``gc.freeze``; the forked lanes freeze it again): a full collection walked the 10,000 configs of a
    10,000-point sweep between its expansion and its forks, 0.07 s."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def fork_safe() -> bool:
    """Whether a local sweep trains its batches in forked processes: where the platform forks and this process runs
    no other thread (``forked.single_threaded``); else on an embedded Dask cluster, whose workers start from a fork
    server of their own (Jupyter's kernel has threads)."""
    return fork_available() and single_threaded()


def _on_dask(client: Any, cluster: Any, plan: ClusterPlan | None, todo: list[Point], batch: int | None,
             recorder: BatchStore, keep: Keep, encode: bool) -> None:
    """The points on Dask (``client``): a ``plan``'s jobs submitted first; batches for the workers expected."""
    if plan is not None:
        plan.submit(client, cluster, len(todo))  # the jobs, then the first worker
    expected = plan.processes * plan.jobs_for(len(todo)) if plan else len(client.nthreads())
    run_on_dask(client, plan_batches(todo, batch, max(2, expected)), recorder, _failed_result, keep, encode,
                recorder.refresh)


def _register(sweep_dir: Path, index: Index, points: Sequence[Point], spec_yaml: str | None, retry_failed: bool,
              force: bool) -> list[Point]:
    """Clear what a killed sweep left, register every point (and write the spec); the points to train."""
    index.names()  # every row's run directory is one plain folder name, before anything is written
    _remove_stale_temp_files(sweep_dir)
    remove_unnamed(sweep_dir, index.results_files())
    index.add((p.config_hash, p.name, p.index, p.axes, p.seed) for p in points)
    if spec_yaml is not None:
        atomic_write_text(sweep_dir / SPEC_FILE, spec_yaml)
    statuses = index.statuses()
    stale = _made_under(sweep_dir) != str(NUMERICS_REVISION) and any(s in FINISHED for s in statuses.values())
    todo = _select(points, statuses, retry_failed, force or stale)  # stale: numbers of another revision, rerun
    if stale:  # and the finished rows of points this spec does not have: trained again if a spec has them again
        spec_hashes = {p.config_hash for p in points}
        index.mark_pending(h for h, s in statuses.items() if s in FINISHED and h not in spec_hashes)
    atomic_write_text(sweep_dir / NUMERICS_FILE, f"{NUMERICS_REVISION}\n")
    return todo


def _made_under(sweep_dir: Path) -> str | None:
    """The numerics revision recorded in ``sweep_dir`` (None: none recorded, a sweep older than the record)."""
    try:
        return (sweep_dir / NUMERICS_FILE).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _rows_of(sweep_dir: Path, points: Sequence[Point]) -> pd.DataFrame:
    frame = load_index(sweep_dir)
    order = {p.config_hash: i for i, p in enumerate(points)}
    position = np.array([order.get(h, -1) for h in frame["config_hash"].tolist()], dtype=np.int64)
    held = np.flatnonzero(position >= 0)
    return frame.iloc[held[np.argsort(position[held], kind="stable")]].reset_index(drop=True)


def warm_workers(workers: int | None, scheduler: str | None, plan: ClusterPlan | None = None
                 ) -> Callable[[int], None]:
    """``load_sweep``'s ``on_count``: a spec of more points than one batch holds will start a local cluster
    (default or several ``workers``, no ``scheduler``, no SLURM / PBS ``plan``), so its fork server is started
    before the points are expanded, and its imports run meanwhile."""
    def counted(points: int) -> None:
        if scheduler is None and plan is None and workers != 1 and points > MAX_BATCH and not fork_safe():
            warm_fork_server()
    return counted


def run_sweep(
    spec: str | Path | dict[str, Any] | Sweep,
    out: str | Path | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    retry_failed: bool = False,
    force: bool = False,
    progress: ProgressFn | None = None,
    batch: int | None = DEFAULT_BATCH,
    run_dirs: bool = False,
    cluster: str | ClusterPlan = "local",
    cluster_options: dict[str, Any] | None = None,
    jobs: int | None = None,
    curves: str | None = None,
    fused: bool | None = None,
    rows: bool = True,
) -> pd.DataFrame | None:
    """Run a sweep spec (a YAML path, a mapping, or a loaded ``Sweep``) into ``out`` (default
    ``sweeps/<name>``) and return its rows of the index, in spec order (``rows`` False: None, without importing
    pandas; ``point_statuses`` then tells the runs' statuses).

    ``workers``: processes on this machine, each batch forked from this one (default: one per core; 1 runs in this
    process); ``scheduler``: address of an existing Dask scheduler instead.
    Runs with a finished row are skipped; ``retry_failed`` reruns failed ones, ``force`` all.
    ``batch``: at most this many compatible runs trained together per worker task (1: one by one; None, the
    default: sized by memory, ``planning.auto_batch``).
    ``run_dirs``: write each run's directory under ``runs/`` (as ``lipschitz-icl run`` does) instead of one
    results file per batch under ``results/`` (read either back with ``load_runs`` or ``load_metrics``).
    ``cluster``: ``"local"`` (the above), or ``"slurm"`` / ``"pbs"``: Dask workers in ``jobs`` batch jobs (default
    1) submitted through dask-jobqueue, ``cluster_options`` its keywords (``cores``, ``memory``, ``queue``, ...;
    see docs/SWEEPS.md), or a ``ClusterPlan`` from ``plan_cluster`` (``.job_script()``: what would be submitted).
    ``curves``: what is stored of each run's curves, ``"summary"`` or ``"full"`` (``results.CURVES``; default: the
    spec's ``curves:``, itself "summary" by default).
    ``fused``: the kernel step of the points that allow it, compiled (numba) or torch (default: the spec's
    ``fused:``; else the step ``out`` was made with; else compiled where numba can be imported and the runs train on
    this machine, torch on a scheduler's or cluster's workers; ``kernel_step``)."""
    plan = checked_plan(cluster, cluster_options, jobs, workers, scheduler)
    if curves is not None:
        check_curves(curves, "--curves")
    if isinstance(spec, Sweep):
        sweep = spec if fused is None else spec.with_step(resolve_step(fused, None)[0])
    else:
        sweep = load_sweep(spec, on_count=warm_workers(workers, scheduler, plan), fused=fused,
                           local=scheduler is None and plan is None)
    out = Path(out) if out is not None else Path("sweeps") / sweep.name
    sweep = with_dir_step(sweep, out)
    stored = curves or sweep.spec.curves  # what is kept of each run's curves, and what sweep.yaml says
    return execute_points(sweep.points, out, workers, scheduler, retry_failed, force, progress,
                          spec_yaml=sweep.resolved_yaml(stored), name=sweep.name, keep=Keep(sweep.spec.params, stored),
                          batch=batch, run_dirs=run_dirs, plan=plan, rows=rows)


def run_configs(
    configs: Sequence[Config],
    out: str | Path,
    workers: int | None = None,
    scheduler: str | None = None,
    retry_failed: bool = False,
    force: bool = False,
    progress: ProgressFn | None = None,
    labels: Sequence[dict[str, Any]] | None = None,
    batch: int | None = DEFAULT_BATCH,
    run_dirs: bool = False,
    cluster: str | ClusterPlan = "local",
    cluster_options: dict[str, Any] | None = None,
    jobs: int | None = None,
    curves: str = "summary",
) -> pd.DataFrame:
    """Run a list of configs as a sweep in ``out`` (no spec file) and return their index rows in
    the order given (configs with equal hashes share one row). ``labels``: optional per-config
    axis values stored in the index's ``axes`` column (and expanded into columns); ``cluster``, ``cluster_options``,
    ``jobs``, ``curves``: as for ``run_sweep``."""
    plan = checked_plan(cluster, cluster_options, jobs, workers, scheduler)
    if labels is not None and len(labels) != len(configs):
        raise UserInputError(f"labels: {len(labels)} given for {len(configs)} configs")
    points: list[Point] = []
    seen: set[str] = set()
    for i, cfg in enumerate(configs):
        if not isinstance(cfg, Config):
            raise UserInputError(f"configs[{i}]: expected a Config (got {type(cfg).__name__})")
        h = cfg.config_hash()
        if h in seen:
            continue
        seen.add(h)
        axes = dict(labels[i]) if labels is not None else {}
        points.append(Point.of(len(points), axes, cfg))
    return execute_points(points, out, workers, scheduler, retry_failed, force, progress, batch=batch,
                          run_dirs=run_dirs, plan=plan, keep=Keep(curves=check_curves(curves)))
