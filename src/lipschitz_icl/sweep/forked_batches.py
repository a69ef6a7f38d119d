"""Local sweeps of several batches: the batches trained in ``workers`` processes forked from the driver
(``forked.run_forked``), each a lane that trains one batch after another as the driver hands them out. A fork
starts in milliseconds with what the driver has imported (torch, the package, plugins) and the points it has
expanded, so runs train as soon as the spec is expanded; the embedded Dask cluster that this replaces on this
machine took 2-3 s to start its workers (their own imports of torch and the package), longer than a 2,000-run
sweep's first batches train. A lane asks for its next batch by sending the last one's results (with its results
file already encoded) through its pipe, and the driver hands it the next batch before it stores them: a lane never
waits for the storing, and a batch goes to whichever lane is free. (A process of its own for every batch, as up to
2026-12-07, paid the fork's copy-on-write page faults once per batch: ~1.3 CPU-s of system time at 10,000 runs.)

A point that kills its process (``os._exit``, a segfault, the OOM killer) ends that lane only, in the middle of one
batch: that batch's points are trained again, each alone in a process of its own, once the other batches are done,
and a point whose process dies again is recorded failed with the exit code. The other lanes go on, and where every
lane ended with batches not yet handed out, new lanes take them. Ctrl-C or SIGTERM ends the processes under way
(``ForkedInterrupted``, a KeyboardInterrupt); what was stored stays, the rest stays pending until the sweep is run
again. Where the platform cannot fork, the embedded Dask cluster runs the batches instead (``dask_backend``).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
from collections.abc import Callable
from typing import Any

from ..batch import warm_fused_step
from ..forked import ChildDied, arrays_of, run_forked, tensors_of
from ..interrupts import deferred_signals
from .local import FailedResult, OnResult, in_process_config
from .spec import Point
from .worker import Keep, run_batch_task

Died = Callable[[list[Point], str], None]  # (the points of a batch whose process died, why)
Crossing = tuple[list[tuple[int, dict[str, Any]]], Any]  # (position, result) pairs and the encoded results file


def run_forked_batches(batches: list[list[Point]], on_result: OnResult, failed_result: FailedResult, keep: Keep,
                       workers: int, encode: bool = True, idle: Callable[[], None] | None = None) -> None:
    """Train ``batches`` (``execute.plan_batches``) in ``workers`` lanes forked from this process and hand each
    batch's results to ``on_result(pairs, encoded)`` (``encode``: with its results file, of what ``keep`` keeps,
    encoded in the lane; else ``on_result(pairs)``, the results carrying their tables and params) as it arrives;
    ``idle()`` now and then while none does. A batch whose lane died: each of its points once more, alone, in a
    process of its own (see the module)."""
    again: list[Point] = []
    # the compiled fused step loaded once here, not in every lane (a batch's points share their engine)
    warm_fused_step({b[0].config.engine.dtype for b in batches if b and b[0].config.engine.fused})

    def first_death(points: list[Point], why: str) -> None:
        if len(points) > 1:  # which run killed it is unknown: each alone, after the others
            again.extend(points)
        else:
            _store(on_result, [(points[0], failed_result(points[0], why))], None)

    _lanes(batches, on_result, first_death, keep, workers, encode, idle)
    if again:
        def second_death(points: list[Point], why: str) -> None:
            _store(on_result, [(points[0], failed_result(points[0], why))], None)

        _lanes([[p] for p in again], on_result, second_death, keep, workers, encode, idle, alone=True)


def _lanes(batches: list[list[Point]], on_result: OnResult, died: Died, keep: Keep, workers: int, encode: bool,
           idle: Callable[[], None] | None, alone: bool = False) -> None:
    """``batches`` through ``workers`` lanes (``_round``), each batch's results stored as they arrive and a batch
    whose lane died to ``died``; new lanes while batches are left that no lane took (every lane died). ``alone``:
    a process for each batch, ``workers`` at a time."""
    left = list(reversed(range(len(batches))))  # popped from the end: handed out in order
    while left:  # each round hands out at least one batch
        _round(batches, left, on_result, died, keep, max(1, workers), encode, idle, alone)


def _round(batches: list[list[Point]], left: list[int], on_result: OnResult, died: Died, keep: Keep, workers: int,
           encode: bool, idle: Callable[[], None] | None, alone: bool) -> None:
    """One pass of ``run_forked``: ``workers`` lanes, each forked with its first batch (the next of ``left``, indices
    into ``batches``, at its end) and sent the next through a pipe of its own as it sends the last one's results,
    until none is left; with ``alone``, a process for each batch of ``left``."""
    first = [left.pop() for _ in range(len(left) if alone else min(workers, len(left)))]
    pipes = [] if alone else [mp.get_context("fork").Pipe(duplex=False) for _ in first]  # (lane's end, driver's)
    held: dict[int, int | None] = dict(enumerate(first))  # lane -> the batch it trains (None: told to end)

    def work(lane: int, tick: Callable[[Any], None]) -> None:
        i = first[lane]
        while i is not None:
            tick((i, _train(batches[i], keep, encode)))
            i = None if alone else pipes[lane][0].recv()

    def ticked(lane: int, payload: tuple[int, Crossing]) -> None:
        i, (pairs, encoded) = payload
        held[lane] = left.pop() if left and not alone else None
        if not alone:  # the lane's next batch first: it trains while this one is stored
            with contextlib.suppress(OSError):  # a lane that died meanwhile: its batch goes to ``answered``
                pipes[lane][1].send(held[lane])
        _store(on_result, [(batches[i][j], _arrived(result)) for j, result in pairs], encoded)

    def answered(lane: int, outcome: Any, elapsed: float) -> None:  # noqa: ARG001 - run_forked's signature
        i = held.pop(lane)
        if i is not None and isinstance(outcome, ChildDied):
            died(batches[i], f"the process training it ended without a result (exit code {outcome.exitcode})")
        elif i is not None:  # raised outside the runs (each run's error is its own)
            died(batches[i], f"{type(outcome).__name__}: {outcome}")

    try:
        run_forked(range(len(first)), work, workers, lambda lane: None, answered, ticked, idle)
    finally:
        for reader, writer in pipes:
            reader.close()
            writer.close()


def _train(points: list[Point], keep: Keep, encode: bool) -> Crossing:
    """In a lane: the batch's runs (``worker.run_batch_task``), as they cross the pipe."""
    hashes = [p.config_hash for p in points] if encode else None
    pairs, encoded = run_batch_task([in_process_config(p.config) for p in points], keep, hashes)
    return [(pos, _crossing(result)) for pos, result in pairs], encoded


def _crossing(result: dict[str, Any]) -> dict[str, Any]:
    """A result as it crosses the pipe: its params as NumPy arrays (``forked.arrays_of``)."""
    result["params"] = arrays_of(result.get("params"))
    return result


def _arrived(result: dict[str, Any]) -> dict[str, Any]:
    result["params"] = tensors_of(result.get("params"))
    return result


def _store(on_result: OnResult, pairs: list[tuple[Point, dict[str, Any]]], encoded: Any) -> None:
    """Store a batch's results (Ctrl-C waits until they are)."""
    with deferred_signals():
        on_result(pairs, encoded)
