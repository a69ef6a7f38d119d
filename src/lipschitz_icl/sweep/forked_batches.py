"""Local sweeps of several batches: each batch trained in a process forked from the driver (``forked.run_forked``),
one per worker at a time. A fork starts in milliseconds with what the driver has imported (torch, the package,
plugins) and the points it has expanded, so runs train as soon as the spec is expanded; the embedded Dask cluster
that this replaces on this machine took 2-3 s to start its workers (their own imports of torch and the package),
longer than a 2,000-run sweep's first batches train. A batch's results, with its results file already encoded, come
back through a pipe and are stored by the driver as they arrive.

A point that kills its process (``os._exit``, a segfault, the OOM killer) ends that batch's process only: the
batch's points are trained again, each alone in a process of its own, once the other batches are done, and a point
whose process dies again is recorded failed with the exit code. The driver and the other points go on. Ctrl-C or
SIGTERM ends the processes under way (``ForkedInterrupted``, a KeyboardInterrupt); what was stored stays, the rest
stays pending until the sweep is run again. Where the platform cannot fork, the embedded Dask cluster runs the
batches instead (``dask_backend``).
"""

from __future__ import annotations

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
GROUP_POINTS = 32  # smaller batches go to one process together, up to this many points (a fork costs ~50 ms)


def run_forked_batches(batches: list[list[Point]], on_result: OnResult, failed_result: FailedResult, keep: Keep,
                       workers: int, encode: bool = True, idle: Callable[[], None] | None = None) -> None:
    """Train ``batches`` (``execute.plan_batches``) in processes forked from this one, ``workers`` at a time, and
    hand each batch's results to ``on_result(pairs, encoded)`` (``encode``: with its results file, of what ``keep``
    keeps, encoded in the batch's process; else ``on_result(pairs)``, the results carrying their tables and
    params) as it arrives; ``idle()`` now and then while none does. Batches of a few points go to one process
    together (``groups``). A batch whose process died: each of its points once more, alone (see the module)."""
    again: list[Point] = []
    # the compiled fused step loaded once here, not in every batch's process (a batch's points share their engine)
    warm_fused_step({b[0].config.engine.dtype for b in batches if b and b[0].config.engine.fused})

    def first_death(points: list[Point], why: str) -> None:
        if len(points) > 1:  # which run killed it is unknown: each alone, after the others
            again.extend(points)
        else:
            _store(on_result, [(points[0], failed_result(points[0], why))], None)

    _round(groups(batches, workers), on_result, first_death, keep, workers, encode, idle)
    if again:
        def second_death(points: list[Point], why: str) -> None:
            _store(on_result, [(points[0], failed_result(points[0], why))], None)

        _round([[[p]] for p in again], on_result, second_death, keep, workers, encode, idle)


def groups(batches: list[list[Point]], workers: int) -> list[list[list[Point]]]:
    """Consecutive batches, one group per process: a group closes once it holds GROUP_POINTS points, or fewer
    where that leaves each worker at least 4 groups."""
    most = max(1, min(GROUP_POINTS, -(-sum(map(len, batches)) // (4 * workers))))
    out: list[list[list[Point]]] = []
    held = most
    for batch in batches:
        if held >= most:
            out.append([])
            held = 0
        out[-1].append(batch)
        held += len(batch)
    return out


def _round(dealt: list[list[list[Point]]], on_result: OnResult, died: Died, keep: Keep, workers: int,
           encode: bool, idle: Callable[[], None] | None) -> None:
    """One pass of ``run_forked`` over the groups of batches ``dealt``: each batch's results stored as they arrive,
    the unstored batches of a group whose process died to ``died``."""
    stored: list[set[int]] = [set() for _ in dealt]

    def work(group: list[list[Point]], tick: Callable[[Any], None]) -> None:
        for i, points in enumerate(group):
            tick((i, _train(points, keep, encode)))

    def ticked(pos: int, payload: tuple[int, Crossing]) -> None:
        i, (pairs, encoded) = payload
        stored[pos].add(i)
        _store(on_result, [(dealt[pos][i][j], _arrived(result)) for j, result in pairs], encoded)

    def answered(pos: int, outcome: Any, elapsed: float) -> None:  # noqa: ARG001 - run_forked's signature
        left = [p for i, points in enumerate(dealt[pos]) if i not in stored[pos] for p in points]
        if isinstance(outcome, ChildDied) and left:
            died(left, f"the process training it ended without a result (exit code {outcome.exitcode})")
        elif isinstance(outcome, BaseException) and left:  # raised outside the runs (each run's error is its own)
            died(left, f"{type(outcome).__name__}: {outcome}")

    run_forked(dealt, work, max(1, min(workers, len(dealt))), lambda pos: None, answered, ticked, idle)


def _train(points: list[Point], keep: Keep, encode: bool) -> Crossing:
    """In the batch's process: its runs (``worker.run_batch_task``), as they cross the pipe."""
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
