"""Running a sweep's points: in-process, on an embedded Dask ``LocalCluster``, or on a Dask
cluster at a scheduler address.

Workers compute and return results (the summary and the metrics as parquet bytes); only this
driver writes run directories (atomically, through ``store.write_run_files``) and the index,
as results arrive. A killed sweep therefore leaves whole files and whole index rows only, and
running it again picks up the runs whose rows are not finished.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import itertools
import logging
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ..api import run as run_api
from ..api import versions
from ..config import Config, validate_config
from ..errors import UserInputError
from ..recorder import SCHEMA, metrics_table
from ..store import atomic_write_text, parquet_bytes, write_run_files
from ..threads import single_threaded_torch
from .index import FINISHED, RUNS_DIR, Index, load_index
from .spec import Point, Sweep, load_sweep, run_name

ProgressFn = Callable[[int, int, int], None]  # (done, failed, total) over the runs this call executes
SPEC_FILE = "sweep.yaml"
LOCK_FILE = ".lock"


def default_workers() -> int:
    """One worker per core this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# --------------------------------------------------------------------------- the worker side


def execute_config(data: dict[str, Any]) -> dict[str, Any]:
    """Run one config (a plain mapping, validated here so plugins are imported in the worker).

    Returns ``{"summary": dict, "metrics": parquet bytes, "elapsed_s": float}``; an error
    anywhere becomes a ``failed`` summary with its text, never an exception."""
    start = time.perf_counter()
    try:
        cfg = validate_config(data)
        result = run_api(cfg, write=False)
        summary, metrics = result.summary, parquet_bytes(metrics_table(result.metrics))
    except Exception as e:  # noqa: BLE001 - recorded in the index, the sweep goes on
        summary = failed_summary(data, f"{type(e).__name__}: {e}")
        metrics = parquet_bytes(SCHEMA.empty_table())
    return {"summary": summary, "metrics": metrics, "elapsed_s": time.perf_counter() - start}


def failed_summary(data: dict[str, Any], error: str) -> dict[str, Any]:
    return {"status": "failed", "error": error, "seed": data.get("seed"), "versions": versions()}


# --------------------------------------------------------------------------- backends

OnResult = Callable[[Point, dict[str, Any]], None]


def _run_one_in_process(point: Point, on_result: OnResult) -> None:
    result = execute_config(point.config.model_dump(mode="json"))
    on_result(point, result)
    if result["summary"].get("status") == "interrupted":  # Ctrl-C inside the training loop
        raise KeyboardInterrupt


def _run_in_process(todo: Sequence[Point], on_result: OnResult) -> None:
    with single_threaded_torch():  # as on the workers: same numbers, and no threads fighting for cores
        for point in todo:
            _run_one_in_process(point, on_result)


def _start_method() -> str:
    """How the embedded cluster starts its worker processes: forked from a fork server that has
    imported the worker's code once (torch included), where the platform has one; else spawn."""
    import dask
    from distributed.utils import get_mp_context

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return "spawn"
    with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}):
        ctx = get_mp_context()  # sets distributed's own preload list (once per process)
    # no effect if this process's fork server already runs (then it only lacks the warm imports)
    ctx.set_forkserver_preload(["distributed", "lipschitz_icl.sweep.preload"])
    return "forkserver"


def open_client(workers: int, scheduler: str | None) -> tuple[Any, Any]:
    """``(client, cluster)``: a ``distributed.Client`` to ``scheduler`` (cluster None), or to a new
    embedded LocalCluster of ``workers`` single-threaded worker processes. Close with ``close_client``."""
    import dask
    from distributed import Client, LocalCluster

    logging.getLogger("distributed").setLevel(logging.WARNING)  # no INFO chatter on the terminal
    if scheduler is not None:
        try:
            return Client(scheduler, timeout="20s"), None
        except (OSError, TimeoutError, ValueError) as e:
            raise UserInputError(f"--scheduler {scheduler}: cannot connect ({e})") from None
    with dask.config.set({"distributed.worker.multiprocessing-method": _start_method()}):
        cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
    try:
        client = Client(cluster)
        from .worker import ignore_sigint

        client.run(ignore_sigint)
    except BaseException:
        cluster.close()
        raise
    return client, cluster


def close_client(client: Any, cluster: Any) -> None:
    try:
        client.close()
    finally:
        if cluster is not None:
            cluster.close()


@contextlib.contextmanager
def dask_client(workers: int, scheduler: str | None) -> Iterator[Any]:
    """``open_client`` as a context manager that yields the client."""
    client, cluster = open_client(workers, scheduler)
    try:
        yield client
    finally:
        close_client(client, cluster)




def _run_on_dask(todo: Sequence[Point], on_result: OnResult, workers: int, scheduler: str | None) -> None:
    """Run ``todo`` on Dask. An embedded cluster takes seconds to start (its fork server imports
    torch): meanwhile the driver runs points itself, on the core the start-up leaves free."""
    queue = collections.deque(todo)
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="lipschitz-icl-dask-start")
    starting = pool.submit(open_client, workers, scheduler)
    pool.shutdown(wait=False)
    try:
        if scheduler is None:
            with single_threaded_torch():
                while queue and not starting.done():
                    _run_one_in_process(queue.popleft(), on_result)
        if not queue:  # all done before the cluster was up: close it once it is
            starting.add_done_callback(lambda f: f.exception() is None and close_client(*f.result()))
            return
        client, cluster = starting.result()
    except BaseException:
        starting.add_done_callback(lambda f: f.exception() is None and close_client(*f.result()))
        raise
    try:
        _submit_and_collect(client, queue, on_result, workers)
    finally:
        close_client(client, cluster)


def _submit_and_collect(client: Any, queue: collections.deque[Point], on_result: OnResult, workers: int) -> None:
    from distributed import as_completed

    from .worker import run_task

    slots = sum(client.nthreads().values()) or workers
    window = max(64, 4 * slots)  # tasks in flight: bounds the scheduler's and the driver's memory
    pending: dict[Any, Point] = {}
    completed = as_completed()

    def submit(n: int) -> None:
        for _ in range(min(n, len(queue))):
            point = queue.popleft()
            future = client.submit(run_task, point.config.model_dump(mode="json"), pure=False)
            pending[future] = point
            completed.add(future)

    submit(window)
    for future in completed:
        point = pending.pop(future)
        try:
            result = future.result()
        except Exception as e:  # noqa: BLE001 - a lost worker (KilledWorker), a transfer error
            data = point.config.model_dump(mode="json")
            result = {"summary": failed_summary(data, f"{type(e).__name__}: {e}"), "metrics": None,
                      "elapsed_s": None}
        future.release()
        on_result(point, result)
        submit(1)


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

    return [p for p in points if wanted(statuses.get(p.config.config_hash()))]


def execute_points(
    points: Sequence[Point],
    out: str | Path,
    workers: int | None = None,
    scheduler: str | None = None,
    retry_failed: bool = False,
    force: bool = False,
    progress: ProgressFn | None = None,
    spec_yaml: str | None = None,
) -> pd.DataFrame:
    """Run the points that have no finished row in ``out``'s index; return their index rows."""
    sweep_dir = Path(out)
    workers = default_workers() if workers is None else workers
    if workers < 1:
        raise UserInputError(f"--workers must be >= 1 (got {workers})")
    try:
        (sweep_dir / RUNS_DIR).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserInputError(f"{sweep_dir}: cannot create the sweep directory ({e.strerror})") from None
    with _exclusive(sweep_dir), Index(sweep_dir) as index:
        _remove_stale_temp_files(sweep_dir)
        if spec_yaml is not None:
            atomic_write_text(sweep_dir / SPEC_FILE, spec_yaml)
        index.add((p.config.config_hash(), p.name, p.index, p.axes, p.config.seed) for p in points)
        todo = _select(points, index.statuses(), retry_failed, force)
        done = failed = 0
        if progress is not None:
            progress(0, 0, len(todo))

        def on_result(point: Point, result: dict[str, Any]) -> None:
            nonlocal done, failed
            summary = {**result["summary"], "config_hash": point.config.config_hash()}
            metrics = result["metrics"] if result["metrics"] is not None else SCHEMA.empty_table()
            write_run_files(sweep_dir / RUNS_DIR / point.name, point.config.to_yaml(), metrics, summary)
            index.record(summary["config_hash"], summary, result["elapsed_s"])  # after the files: see docs
            if summary.get("status") == "failed":
                failed += 1
            else:
                done += 1
            if progress is not None:
                progress(done, failed, len(todo))

        if todo:
            if scheduler is None and min(workers, len(todo)) == 1:
                _run_in_process(todo, on_result)
            else:
                _run_on_dask(todo, on_result, min(workers, len(todo)), scheduler)
    return _rows_of(sweep_dir, points)


def _rows_of(sweep_dir: Path, points: Sequence[Point]) -> pd.DataFrame:
    frame = load_index(sweep_dir)
    order = {p.config.config_hash(): i for i, p in enumerate(points)}
    frame = frame[frame["config_hash"].isin(order)]
    frame = frame.assign(_order=frame["config_hash"].map(order)).sort_values("_order")
    return frame.drop(columns="_order").reset_index(drop=True)


def run_sweep(
    spec: str | Path | dict[str, Any] | Sweep,
    out: str | Path | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    retry_failed: bool = False,
    force: bool = False,
    progress: ProgressFn | None = None,
) -> pd.DataFrame:
    """Run a sweep spec (a YAML path, a mapping, or a loaded ``Sweep``) into ``out`` (default
    ``sweeps/<name>``) and return its rows of the index, in spec order.

    ``workers``: Dask worker processes on this machine (default: one per core; 1 runs in this
    process without Dask); ``scheduler``: address of an existing Dask scheduler instead.
    Runs with a finished row are skipped; ``retry_failed`` reruns failed ones, ``force`` all."""
    sweep = spec if isinstance(spec, Sweep) else load_sweep(spec)
    out = Path(out) if out is not None else Path("sweeps") / sweep.name
    return execute_points(sweep.points, out, workers, scheduler, retry_failed, force, progress,
                          spec_yaml=sweep.resolved_yaml())


def run_configs(
    configs: Sequence[Config],
    out: str | Path,
    workers: int | None = None,
    scheduler: str | None = None,
    retry_failed: bool = False,
    force: bool = False,
    progress: ProgressFn | None = None,
    labels: Sequence[dict[str, Any]] | None = None,
) -> pd.DataFrame:
    """Run a list of configs as a sweep in ``out`` (no spec file) and return their index rows in
    the order given (configs with equal hashes share one row). ``labels``: optional per-config
    axis values stored in the index's ``axes`` column (and expanded into columns)."""
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
        points.append(Point(len(points), axes, cfg, run_name(axes, cfg)))
    return execute_points(points, out, workers, scheduler, retry_failed, force, progress)
