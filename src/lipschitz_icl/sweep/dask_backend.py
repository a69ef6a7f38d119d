"""Running a sweep's points on Dask: an embedded ``LocalCluster`` of worker processes, or a
running cluster at a scheduler address.

Points never run in the driver's process here: a point that kills its process (an OOM kill, a
segfault, ``os._exit``) takes down one worker, which Dask replaces, and the point is recorded
``failed``; the driver and the other points go on.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import multiprocessing
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from ..errors import UserInputError
from .spec import Point
from .worker import ignore_sigint, run_batch_task

OnResult = Callable[[Point, dict[str, Any]], None]
FailedResult = Callable[[Point, str], dict[str, Any]]
CONNECT_TIMEOUT_S = 20.0  # a hard deadline for reaching a --scheduler, whatever answers there


def _start_method() -> str:
    """How the embedded cluster starts its worker processes: forked from a fork server that has
    imported the worker's code once (torch included), where the platform has one; else spawn."""
    import dask  # distributed is imported only when a sweep uses Dask (seconds of imports)
    from distributed.utils import get_mp_context

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return "spawn"
    with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}):
        ctx = get_mp_context()  # sets distributed's own preload list (once per process)
    # no effect if this process's fork server already runs (then it only lacks the warm imports)
    ctx.set_forkserver_preload(["distributed", "lipschitz_icl.sweep.preload"])
    return "forkserver"


def connect_scheduler(address: str, timeout: float | None = None) -> Any:
    """A ``distributed.Client`` to the scheduler at ``address``, or UserInputError "no Dask scheduler
    at ADDRESS" within ``timeout`` seconds (default ``CONNECT_TIMEOUT_S``), whatever listens there
    (nothing, a web server, another protocol). The attempt runs in a daemon thread and this one
    waits on an event, so Ctrl-C and SIGTERM end the wait at once and nothing keeps the process alive."""
    from distributed import Client

    timeout = CONNECT_TIMEOUT_S if timeout is None else timeout
    outcome: dict[str, Any] = {}
    finished = threading.Event()

    def attempt() -> None:
        try:
            outcome["client"] = Client(address, timeout=f"{timeout}s")
        except BaseException as e:  # noqa: BLE001 - reported by the waiting thread
            outcome["error"] = e
        finally:
            finished.set()

    threading.Thread(target=attempt, name="lipschitz-icl-dask-connect", daemon=True).start()
    if not finished.wait(timeout + 1.0):
        raise UserInputError(f"--scheduler {address}: no Dask scheduler at {address} (no answer within {timeout:g} s)")
    error = outcome.get("error")
    if error is not None:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else "it does not answer as one"
        if isinstance(error, ValueError) and "://" not in address:
            reason = "not an address such as tcp://host:8786"
        raise UserInputError(f"--scheduler {address}: no Dask scheduler at {address} ({reason})")
    return outcome["client"]


def open_local_cluster(workers: int) -> tuple[Any, Any]:
    """``(client, cluster)``: a new embedded LocalCluster of ``workers`` single-threaded worker
    processes. Its scheduler records a task whose worker dies as failed at once (no retries): a
    point that kills its process kills one worker, once (``run_on_dask`` sends a worker no second
    run, so no other point is charged with it)."""
    import dask
    from distributed import Client, LocalCluster

    logging.getLogger("distributed").setLevel(logging.WARNING)  # no INFO chatter on the terminal
    settings = {
        "distributed.worker.multiprocessing-method": _start_method(),
        "distributed.scheduler.allowed-failures": 0,
    }
    with dask.config.set(settings):
        cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.CRITICAL,  # a dead worker is reported in the index, not as log lines
        )
    try:
        client = Client(cluster)
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


def _free_slots(client: Any, running: dict[Any, tuple[list[Point], str]]) -> list[str]:
    """One entry per idle thread of the workers alive now (asked of the scheduler each time)."""
    busy = collections.Counter(addr for _, addr in running.values())
    return [addr for addr, threads in client.nthreads().items() for _ in range(threads - busy[addr])]


def run_on_dask(client: Any, batches: Iterable[list[Point]], on_result: OnResult, failed_result: FailedResult,
                save_params: bool) -> None:
    """Run ``batches`` (lists of points, see ``execute.plan_batches``) on ``client``'s workers, one
    task per batch, and hand each point's result to ``on_result`` as its batch's task returns.

    A batch is submitted only to a worker thread that is idle (``workers=[address]``), so a worker
    never holds a second batch besides the one it executes: when a run kills its worker, no other
    batch is charged with the death. The restriction is loose (``allow_other_workers``): a batch
    sent to a worker that died meanwhile goes elsewhere instead of waiting forever. A result is
    fetched as soon as it is ready, before its worker gets the next batch. A task that raises on the
    Dask side (a run killed its worker: KilledWorker; a transfer error): a batch of several points is
    retried one point per task, first in the queue, so only the point that kills its worker is
    recorded ``failed_result(point, text)``; a batch of one point is recorded so at once."""
    from distributed import wait  # distributed: imported only when a sweep uses Dask

    queue = collections.deque(batches)
    running: dict[Any, tuple[list[Point], str]] = {}
    while queue or running:
        for addr in _free_slots(client, running)[: len(queue)]:
            points = queue.popleft()
            datas = [p.config.model_dump(mode="json") for p in points]
            future = client.submit(run_batch_task, datas, save_params, pure=False, workers=[addr],
                                   allow_other_workers=True)
            running[future] = (points, addr)
        if not running:  # every worker is being replaced: wait for one
            time.sleep(0.1)
            continue
        with contextlib.suppress(TimeoutError):  # wake up now and then to use workers that joined
            wait(list(running), timeout=0.5, return_when="FIRST_COMPLETED")
        for future in [f for f in running if f.done()]:
            points, _ = running.pop(future)
            results: list[tuple[int, dict[str, Any]]] = []
            try:
                results = future.result()
            except Exception as e:  # noqa: BLE001 - a lost worker (KilledWorker), a transfer error
                if len(points) > 1:  # which run killed it is unknown: each alone, before anything else
                    queue.extendleft([p] for p in reversed(points))
                else:
                    results = [(0, failed_result(points[0], f"{type(e).__name__}: {e}"))]
            future.release()
            for pos, result in results:
                on_result(points[pos], result)
