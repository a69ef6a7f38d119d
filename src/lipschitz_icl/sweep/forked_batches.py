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
batch: that batch's points are trained again, each alone in a process of its own, once the other batches are done
(a one-point batch too: the lane may have been killed from outside), and a point whose process dies again is
recorded failed with the exit code. A new lane replaces the dead one while batches are left; a batch handed to a
lane that died before it began the batch (a lane tells the driver as it begins one) goes to another lane. Ctrl-C or
SIGTERM ends the processes under way (``ForkedInterrupted``, a KeyboardInterrupt); what was stored stays, the rest
stays pending until the sweep is run again. Where the platform cannot fork, the embedded Dask cluster runs the
batches instead (``dask_backend``).
"""

from __future__ import annotations

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
    ``idle()`` now and then while none does. A batch whose lane died while training it: each of its points once
    more, alone, in a process of its own (see the module)."""
    again: list[Point] = []
    # the compiled fused step loaded once here, not in every lane (a batch's points share their engine)
    warm_fused_step({b[0].config.engine.dtype for b in batches if b and b[0].config.engine.fused})
    _round(batches, on_result, lambda points, why: again.extend(points), keep, workers, encode, idle)
    if again:  # which run killed the lane is unknown, or whether one did (an OOM kill, a kill -9): each alone
        def second_death(points: list[Point], why: str) -> None:
            _store(on_result, [(points[0], failed_result(points[0], why))], None)

        _round([[p] for p in again], on_result, second_death, keep, workers, encode, idle, alone=True)


def _round(batches: list[list[Point]], on_result: OnResult, died: Died, keep: Keep, workers: int, encode: bool,
           idle: Callable[[], None] | None, alone: bool = False) -> None:
    """``batches`` through ``run_forked``: ``workers`` lanes, each forked with its first batch and sent the next
    through a pipe of its own as it sends the last one's results; a batch whose lane died while training it to
    ``died`` and the lane replaced while batches are left (a batch handed to a lane that died before it began is
    handed out again, once). ``alone``: a process for each batch, ``workers`` at a time."""
    left = list(reversed(range(len(batches))))  # popped from the end: handed out in order
    lanes: list[int] = []  # run_forked's items, which it forks as they are appended: lane numbers 0, 1, ...
    first: list[int] = []  # lane -> its first batch
    pipes: list[tuple[Any, Any]] = []  # lane -> (its end, the driver's end)
    held: dict[int, int | None] = {}  # lane -> the batch handed to it (None: told to end)
    begun: set[int] = set()  # lanes that began the batch they hold
    handed_again: set[int] = set()

    def open_lane() -> None:
        held[len(lanes)] = left.pop()
        first.append(held[len(lanes)])
        lanes.append(len(lanes))
        if not alone:
            pipes.append(mp.get_context("fork").Pipe(duplex=False))

    def work(lane: int, tick: Callable[[Any], None]) -> None:
        for k, (reader, writer) in enumerate(pipes):  # the lane keeps its own reading end only: EOF if the driver ends
            writer.close()
            if k != lane:
                reader.close()
        i = first[lane]
        while i is not None:
            tick(("began", i))
            tick(("trained", i, _train(batches[i], keep, encode)))
            i = None if alone else pipes[lane][0].recv()

    def ticked(lane: int, payload: tuple) -> None:
        if payload[0] == "began":
            begun.add(lane)
            return
        _, i, (pairs, encoded) = payload
        begun.discard(lane)
        held[lane] = left.pop() if left and not alone else None
        if not alone:  # the lane's next batch first: it trains while this one is stored
            pipes[lane][1].send(held[lane])  # never blocks: one index in flight, our reading end kept open
        _store(on_result, [(batches[i][j], _arrived(result)) for j, result in pairs], encoded)

    def answered(lane: int, outcome: Any, elapsed: float) -> None:  # noqa: ARG001 - run_forked's signature
        for end in pipes[lane] if pipes else ():  # closed as the lane ends: lanes replaced many times hold no more
            end.close()
        i = held.pop(lane)
        if i is None:
            return
        if lane in begun or alone or i in handed_again:
            why = (f"the process training it ended without a result (exit code {outcome.exitcode})"
                   if isinstance(outcome, ChildDied)  # else: raised outside the runs (each run's error is its own)
                   else f"{type(outcome).__name__}: {outcome}")
            died(batches[i], why)
        else:  # the lane died before it began this batch: another takes it
            handed_again.add(i)
            left.append(i)
        if left and not alone:
            open_lane()

    for _ in range(len(left) if alone else min(max(1, workers), len(left))):
        open_lane()
    try:
        run_forked(lanes, work, max(1, workers), lambda lane: None, answered, ticked, idle)
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
