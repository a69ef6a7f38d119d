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
    lanes = _Lanes(batches, on_result, died, keep, encode, alone)
    for _ in range(len(batches) if alone else min(max(1, workers), len(batches))):
        lanes.add_lane()
    try:
        run_forked(lanes.items, lanes.work, max(1, workers), lambda lane: None, lanes.answered, lanes.ticked, idle)
    finally:
        for pipe in lanes.pipes:
            for end in pipe:
                end.close()


class _Lanes:
    """What the driver knows of one ``_round``'s lanes, and what a lane does (``work``, in its process)."""

    def __init__(self, batches: list[list[Point]], on_result: OnResult, died: Died, keep: Keep, encode: bool,
                 alone: bool) -> None:
        self.batches, self.on_result, self.died, self.keep, self.encode, self.alone = (
            batches, on_result, died, keep, encode, alone)
        self.left = list(reversed(range(len(batches))))  # popped from the end: handed out in order
        self.items: list[int] = []  # run_forked's items, which it forks as they are appended: lane numbers 0, 1, ...
        self.first: list[int] = []  # lane -> its first batch
        self.pipes: list[tuple[Any, Any]] = []  # lane -> (its end, the driver's end)
        self.held: dict[int, int | None] = {}  # lane -> the batch handed to it (None: told to end)
        self.begun: set[int] = set()  # lanes that began the batch they hold
        self.handed_again: set[int] = set()

    def add_lane(self) -> None:
        """A new lane (forked by run_forked), with the next batch."""
        lane = len(self.items)
        self.held[lane] = self.left.pop()
        self.first.append(self.held[lane])
        self.items.append(lane)
        if not self.alone:
            self.pipes.append(mp.get_context("fork").Pipe(duplex=False))

    def work(self, lane: int, tick: Callable[[Any], None]) -> None:
        """In the lane: its batches, each announced as it begins and sent back trained, until told to end."""
        for k, (reader, writer) in enumerate(self.pipes):  # only its own reading end: EOF if the driver ends
            writer.close()
            if k != lane:
                reader.close()
        i = self.first[lane]
        while i is not None:
            tick(("began", i))
            tick(("trained", i, _train(self.batches[i], self.keep, self.encode)))
            i = None if self.alone else self.pipes[lane][0].recv()

    def ticked(self, lane: int, payload: tuple) -> None:
        if payload[0] == "began":
            self.begun.add(lane)
            return
        _, i, (pairs, encoded) = payload
        self.begun.discard(lane)
        self.held[lane] = self.left.pop() if self.left and not self.alone else None
        if not self.alone:  # the lane's next batch first: it trains while this one is stored
            self.pipes[lane][1].send(self.held[lane])  # never blocks: one index in flight, our reading end open
        _store(self.on_result, [(self.batches[i][j], _arrived(result)) for j, result in pairs], encoded)

    def answered(self, lane: int, outcome: Any, elapsed: float) -> None:  # noqa: ARG002 - run_forked's signature
        for end in self.pipes[lane] if self.pipes else ():  # closed as it ends: lanes replaced many times hold none
            end.close()
        i = self.held.pop(lane)
        if i is None:
            return
        if lane in self.begun or self.alone or i in self.handed_again:
            why = (f"the process training it ended without a result (exit code {outcome.exitcode})"
                   if isinstance(outcome, ChildDied)  # else: raised outside the runs (each run's error is its own)
                   else f"{type(outcome).__name__}: {outcome}")
            self.died(self.batches[i], why)
        else:  # the lane died before it began this batch: another takes it
            self.handed_again.add(i)
            self.left.append(i)
        if self.left and not self.alone:
            self.add_lane()


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
