"""Running a sweep's points on Dask: an embedded ``LocalCluster`` of worker processes, or a
running cluster at a scheduler address.

Points never run in the driver's process here: a point that kills its process (an OOM kill, a
segfault, ``os._exit``) takes down one worker, which Dask replaces, and the point is recorded
``failed``; the driver and the other points go on.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import logging
import multiprocessing
import multiprocessing.forkserver
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from ..errors import UserInputError
from .local import FailedResult, OnResult
from .spec import Point
from .worker import Keep, ignore_sigint, run_batch_task

CONNECT_TIMEOUT_S = 20.0  # a hard deadline for reaching a --scheduler, whatever answers there
LOST_WORKER_S = 30.0  # a batch whose worker left is retried (then failed) if no other worker ends it by then
NO_WORKER_S = 60.0  # with points left and no worker at all for this long, they are recorded failed
SCHEDULER_LOST_S = 10.0  # the scheduler unreachable for this long ends the sweep (SchedulerLost)
QUIET_LOGGERS = ("distributed", "tornado", "asyncio")  # their tracebacks of a lost connection are not for the user


class SchedulerLost(RuntimeError):
    """The Dask scheduler went away during a sweep (the runs recorded so far are kept)."""


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


def warm_fork_server() -> None:
    """Start the fork server that the embedded cluster's workers will be forked from, now: its imports (torch,
    distributed, the package: seconds of CPU in its own process) then run while this process expands a spec."""
    if _start_method() == "forkserver":
        multiprocessing.forkserver.ensure_running()


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

    quiet_logs()  # a scheduler that dies later: one line from the sweep, not their tracebacks
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


def quiet_logs() -> None:
    """Silence distributed's (and its event loop's) loggers, children with levels of their own included."""
    names = [n for n in logging.root.manager.loggerDict if n.split(".")[0] in QUIET_LOGGERS]
    for name in {*QUIET_LOGGERS, *names}:
        logger = logging.getLogger(name)
        logger.setLevel(logging.CRITICAL)
        for handler in logger.handlers:
            handler.setLevel(logging.CRITICAL)


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
        with contextlib.suppress(Exception):  # a scheduler that went away: nothing to close there
            client.close(timeout=5)
    finally:
        if cluster is not None:
            cluster.close()


def _free_slots(alive: dict[str, int], running: dict[Any, tuple[list[Point], str]]) -> list[str]:
    """One entry per idle thread of the workers alive now (``alive``: address -> threads)."""
    busy = collections.Counter(addr for _, addr in running.values())
    return [addr for addr, threads in alive.items() for _ in range(threads - busy[addr])]


class _Watch:
    """Deadlines of a sweep on Dask: the scheduler unreachable (``SchedulerLost``), batches whose worker
    left and that no other worker ended (``overdue``), no worker at all while points wait (``starved``)."""

    def __init__(self, client: Any) -> None:
        self.client, self.unreachable_since, self.empty_since = client, None, None
        self.lost_since: dict[Any, float] = {}
        self.retried: set[str] = set()  # config hashes already retried after a lost worker

    def alive(self) -> dict[str, int]:
        """The workers now (address -> threads); none while the scheduler does not answer, up to its deadline."""
        now = time.monotonic()
        try:
            alive = dict(self.client.nthreads()) if self.client.status == "running" else None
        except Exception:  # noqa: BLE001 - a closed comm, a timeout: the scheduler is not there
            alive = None
        if alive is None:
            self.unreachable_since = self.unreachable_since or now
            if now - self.unreachable_since > SCHEDULER_LOST_S:
                raise SchedulerLost(f"the Dask scheduler went away (no answer for {SCHEDULER_LOST_S:g} s)")
            return {}
        self.unreachable_since = None
        self.empty_since = None if alive else (self.empty_since or now)
        return alive

    def overdue(self, running: dict[Any, tuple[list[Point], str]], alive: dict[str, int]) -> list[Any]:
        """Futures whose worker left more than LOST_WORKER_S ago and that are still not done."""
        now = time.monotonic()
        lost = [f for f, (_, addr) in running.items() if addr not in alive and not f.done()]
        if lost:  # the scheduler may have sent them to another worker already: follow them there
            with contextlib.suppress(Exception):
                where = {key: addr for addr, keys in self.client.processing().items() for key in keys}
                for future in [f for f in lost if where.get(f.key) in alive]:
                    running[future] = (running[future][0], where[future.key])
                    lost.remove(future)
        self.lost_since = {f: self.lost_since.get(f, now) for f in lost}
        return [f for f, since in self.lost_since.items() if now - since > LOST_WORKER_S]

    def starved(self) -> bool:
        return self.empty_since is not None and time.monotonic() - self.empty_since > NO_WORKER_S


def run_on_dask(client: Any, batches: Iterable[list[Point]], on_result: OnResult, failed_result: FailedResult,
                keep: Keep, encode: bool = False, idle: Callable[[], None] | None = None) -> None:
    """Run ``batches`` (lists of points, see ``execute.plan_batches``) on ``client``'s workers, one
    task per batch, and hand a batch's results to ``on_result`` (a list of (point, result)) as its task returns;
    with ``encode`` the worker encodes the batch's results file (``on_result(pairs, encoded)``) of what ``keep`` keeps.

    A batch is submitted only to a worker thread that is idle (``workers=[address]``), so a worker
    never holds a second batch besides the one it executes: when a run kills its worker, no other
    batch is charged with the death. The restriction is loose (``allow_other_workers``): a batch
    sent to a worker that died meanwhile goes elsewhere instead of waiting forever. A result is
    fetched as soon as it is ready, before its worker gets the next batch, and stored after. A task that raises on the
    Dask side (a run killed its worker: KilledWorker; a transfer error): a batch of several points is
    retried one point per task, first in the queue, so only the point that kills its worker is
    recorded ``failed_result(point, text)``; a batch of one point is recorded so at once."""
    try:
        _drive(client, collections.deque(batches), on_result, failed_result, keep, encode, idle)
    except (asyncio.CancelledError, concurrent.futures.CancelledError):  # only distributed cancels our futures:
        # when the connection to the scheduler is lost (those of lost workers are dropped before they are read)
        raise SchedulerLost("the Dask scheduler went away (the connection to it was lost)") from None


def _drive(client: Any, queue: collections.deque, on_result: OnResult, failed_result: FailedResult,
           keep: Keep, encode: bool, idle: Callable[[], None] | None = None) -> None:
    """``run_on_dask``'s loop: submit batches to idle workers, hand on results, keep the deadlines (``_Watch``).
    A finished batch's result is fetched, its worker given the next batch, and only then the result stored, so
    that a worker does not wait while the driver writes."""
    from distributed import wait  # distributed: imported only when a sweep uses Dask

    running: dict[Any, tuple[list[Point], str]] = {}
    watch = _Watch(client)
    submit = _Submitter(client, queue, running, keep, encode)
    while queue or running:
        alive = watch.alive()
        submit(alive)
        if not running:  # every worker is being replaced: wait for one, up to NO_WORKER_S
            if watch.starved():
                for points in queue:
                    on_result([(p, failed_result(p, f"no Dask worker for {NO_WORKER_S:g} s")) for p in points])
                return
            time.sleep(0.1)
            continue
        submit.prepare()  # the next batch's configs, while the workers train
        with contextlib.suppress(TimeoutError):  # wake up now and then to use workers that joined
            wait(list(running), timeout=0.5, return_when="FIRST_COMPLETED")
        if idle is not None:
            idle()
        for future in watch.overdue(running, alive):  # its worker left and no other worker ended it
            points, _ = running.pop(future)
            future.cancel()
            _retry_or_fail(queue, points, watch.retried, on_result, failed_result,
                           f"its Dask worker was lost and no worker finished it within {LOST_WORKER_S:g} s")
        fetched = [_fetch(future, running.pop(future)[0], queue, failed_result) for future in
                   [f for f in running if f.done()]]
        if fetched:  # the workers just freed start their next batch before the results are written (the workers
            submit(watch.alive())  # asked again: one that died during the wait gets nothing)
        for pairs, encoded in fetched:
            if pairs is not None:
                on_result(pairs, encoded)


def _fetch(future: Any, points: list[Point], queue: collections.deque, failed_result: FailedResult
           ) -> tuple[list[tuple[Point, dict[str, Any]]] | None, Any]:
    """A finished task's (point, result) pairs and encoded results file; (None, None) when its batch went back
    to the queue (a task that raised: each of its points alone, first)."""
    encoded = None
    try:
        results, encoded = future.result()
    except concurrent.futures.CancelledError:
        raise
    except Exception as e:  # noqa: BLE001 - a lost worker (KilledWorker), a transfer error
        if len(points) > 1:  # which run killed it is unknown: each alone, before anything else
            queue.extendleft([p] for p in reversed(points))
            future.release()
            return None, None
        results = [(0, failed_result(points[0], f"{type(e).__name__}: {e}"))]
    future.release()
    return [(points[pos], result) for pos, result in results], encoded


class _Submitter:
    """Sends queued batches to idle worker threads (one batch per thread), each batch's configs as JSON text
    (Dask does not walk text looking for futures), made ahead for the batch next in line (``prepare``)."""

    def __init__(self, client: Any, queue: collections.deque, running: dict[Any, tuple[list[Point], str]],
                 keep: Keep, encode: bool) -> None:
        self.client, self.queue, self.running = client, queue, running
        self.keep, self.encode = keep, encode
        self.ready: tuple[list[Point], list[str]] | None = None  # (batch, its configs' JSON)

    def prepare(self) -> None:
        if self.queue and (self.ready is None or self.ready[0] is not self.queue[0]):
            self.ready = (self.queue[0], _config_texts(self.queue[0]))

    def __call__(self, alive: dict[str, int]) -> None:
        for addr in _free_slots(alive, self.running)[: len(self.queue)]:
            points = self.queue.popleft()
            ready, self.ready = self.ready, None
            datas = ready[1] if ready is not None and ready[0] is points else _config_texts(points)
            hashes = [p.config_hash for p in points] if self.encode else None
            future = self.client.submit(run_batch_task, datas, self.keep, hashes, pure=False,
                                        workers=[addr], allow_other_workers=True)
            self.running[future] = (points, addr)


def _config_texts(points: list[Point]) -> list[str]:
    return [p.config.model_dump_json() for p in points]


def _retry_or_fail(queue: collections.deque, points: list[Point], retried: set[str], on_result: OnResult,
                   failed_result: FailedResult, reason: str) -> None:
    """A batch whose worker was lost: each point once more, alone and first in the queue; a point lost twice is
    recorded failed with ``reason``."""
    for point in reversed(points):
        if point.config_hash in retried:
            on_result([(point, failed_result(point, reason))])
        else:
            retried.add(point.config_hash)
            queue.appendleft([point])
